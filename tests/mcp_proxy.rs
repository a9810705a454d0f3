//! The MCP stream proxy between real peers: the official Rust SDK (`rmcp`) or a raw line
//! client on one side, the real `@modelcontextprotocol/server-filesystem` and
//! `server-everything` (pinned, installed by tests/mcp/setup.sh) on the other, the run's
//! session with an embedded policy as the gate. Each point is proven by what is on disk,
//! what the client got, and what the audit log recorded.

use ahp_wrap_testkit::mcp as support;

use std::time::Duration;

use ahp_wrap::intercept::proxy::{Ended, Options};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use support::{within, LineClient, Proxied, Server, World};

/// The policy of these tests: files named `secret*` are never written; a write to
/// `redirect-me.txt` is rewritten to `redirected.txt`.
fn policy(world: &World) -> String {
    format!(
        r#"
[[rule]]
id = "mcp-no-secrets"
decision = "block"
reason = "files named secret* are off limits (rule mcp-1)"
tools = ["mcp__*"]
file.writes = ["**/secret*"]

[[rule]]
id = "mcp-redirect"
decision = "modify"
tools = ["mcp__fs__write_file"]
file.writes = ["**/redirect-me.txt"]
rewrite.set = {{ "/arguments/path" = "{}" }}
"#,
        world.ws().join("redirected.txt").display()
    )
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn text_of(r: &rmcp::model::CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
async fn write_file_blocked_allowed_and_modified_as_decided_with_what_ran_on_disk() {
    let world = World::new();
    let ws = world.ws();
    let proxied = Proxied::start(
        &world,
        Server::filesystem(&ws),
        &policy(&world),
        Options::default(),
    );
    let client = within(().serve(proxied.client)).await.unwrap();

    let write = |name: &str| {
        CallToolRequestParams::new("write_file").with_arguments(args(
            json!({"path": ws.join(name).display().to_string(), "content": "hello"}),
        ))
    };
    let blocked = within(client.call_tool(write("secret.txt"))).await.unwrap();
    assert_eq!(blocked.is_error, Some(true), "{blocked:?}");
    assert!(text_of(&blocked).contains("(rule mcp-1)"), "{blocked:?}");
    assert!(!ws.join("secret.txt").exists(), "the blocked write ran");

    let allowed = within(client.call_tool(write("notes.txt"))).await.unwrap();
    assert_ne!(allowed.is_error, Some(true), "{allowed:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "hello"
    );

    let modified = within(client.call_tool(write("redirect-me.txt")))
        .await
        .unwrap();
    assert_ne!(modified.is_error, Some(true), "{modified:?}");
    assert!(
        !ws.join("redirect-me.txt").exists(),
        "the original write ran"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("redirected.txt")).unwrap(),
        "hello"
    );

    within(client.cancel()).await.unwrap();
    assert_eq!(within(proxied.proxy).await.unwrap(), Ended::ClientClosed);

    // The audit log: three decisions, and a post_action for each call that ran.
    let audit = world.audit();
    let decided: Vec<(&str, &str)> = audit
        .iter()
        .filter(|r| r["event_type"] == "pre_action")
        .map(|r| {
            (
                r["payload"]["arguments"]["path"].as_str().unwrap(),
                r["decision"].as_str().unwrap(),
            )
        })
        .map(|(p, d)| (p.rsplit('/').next().unwrap(), d))
        .collect();
    assert_eq!(
        decided,
        [
            ("secret.txt", "block"),
            ("notes.txt", "allow"),
            ("redirect-me.txt", "modify")
        ]
    );
    let pre = audit
        .iter()
        .find(|r| r["event_type"] == "pre_action")
        .unwrap();
    assert_eq!(pre["payload"]["tool_name"], "mcp__fs__write_file");
    assert_eq!(pre["payload"]["mcp"]["server"], "fs");
    assert_eq!(pre["payload"]["mcp"]["protocol_version"], "2025-11-25");
    let ran: Vec<&str> = audit
        .iter()
        .filter(|r| r["event_type"] == "post_action")
        .map(|r| r["payload"]["arguments"]["path"].as_str().unwrap())
        .map(|p| p.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(ran, ["notes.txt", "redirected.txt"]);
}

/// What a client sends, in lockstep: each request waits for its answer.
fn script(ws: &std::path::Path) -> Vec<String> {
    let ws = ws.display();
    vec![
        // Odd spacing, key order and escapes must reach the server exactly as sent.
        r#"{ "id" : 1, "jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"line-client","version":"\u0031.0"}}}"#.into(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
        r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#.into(),
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#.into(),
        r#"{"jsonrpc":"2.0","id":4,"method":"no/such/method","params":{}}"#.into(),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"list_allowed_directories","arguments":{{}}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"{ws}/seed.txt"}}}}}}"#),
        "this line is not JSON".into(),
        r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#.into(),
    ]
}

#[tokio::test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
async fn everything_not_refused_passes_byte_for_byte_as_on_a_direct_connection() {
    let world = World::new();
    let ws = world.ws();
    std::fs::write(ws.join("seed.txt"), "seed ✓\n").unwrap();
    let lines = script(&ws);

    // Directly: the server's answers.
    let direct = Server::filesystem(&ws).spawn();
    let direct_out = LineClient::over_child(direct).exchange(&lines).await;
    // Through the proxy, with what the server read recorded by `tee`.
    let seen = world.dir.path().join("server-stdin");
    let proxied = Proxied::start(
        &world,
        Server::filesystem(&ws).teed(&seen),
        &policy(&world),
        Options::default(),
    );
    let mut client = LineClient::new(proxied.client);
    let proxied_out = client.exchange(&lines).await;
    drop(client);
    assert_eq!(within(proxied.proxy).await.unwrap(), Ended::ClientClosed);

    assert_eq!(
        proxied_out, direct_out,
        "the server's answers differ through the proxy"
    );
    let sent: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        sent,
        "the server read other bytes"
    );
    // The answers compared are the real ones: the tool list, a tool's output, an error.
    for want in ["\"tools\":[", "seed ✓", "\"id\":4,\"error\""] {
        assert!(
            direct_out.iter().any(|l| l.contains(want)),
            "{want}: {direct_out:?}"
        );
    }
}

#[tokio::test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
async fn server_everything_through_the_sdk_probing_the_2026_draft_first() {
    let world = World::new();
    // rmcp's Auto lifecycle sends the stateless draft's `server/discover` first, then falls
    // back to `initialize`: the proxy passes the probe and its error through untouched.
    let auto = || ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let direct = Server::everything().spawn();
    let (out, inp) = direct.stdio;
    let _direct_child = direct.child;
    let direct_client = within(().serve_with_lifecycle((out, inp), auto()))
        .await
        .unwrap();
    let want = within(direct_client.list_all_tools()).await.unwrap();

    let proxied = Proxied::start(
        &world,
        Server::everything(),
        &policy(&world),
        Options::default(),
    );
    let client = within(().serve_with_lifecycle(proxied.client, auto()))
        .await
        .unwrap();
    let got = within(client.list_all_tools()).await.unwrap();
    assert_eq!(
        serde_json::to_value(&got).unwrap(),
        serde_json::to_value(&want).unwrap()
    );

    let echo = CallToolRequestParams::new("echo").with_arguments(args(json!({"message": "hi ✓"})));
    let r = within(client.call_tool(echo)).await.unwrap();
    assert!(text_of(&r).contains("hi ✓"), "{r:?}");
    within(client.cancel()).await.unwrap();
    within(direct_client.cancel()).await.unwrap();
    assert_eq!(within(proxied.proxy).await.unwrap(), Ended::ClientClosed);
    let post: Vec<Value> = world
        .audit()
        .into_iter()
        .filter(|r| r["event_type"] == "post_action")
        .collect();
    assert_eq!(post.len(), 1);
    assert_eq!(post[0]["payload"]["tool_name"], "mcp__everything__echo");
    assert_eq!(post[0]["payload"]["result"]["status"], "success");
}

/// A long tool call on server-everything, started through the proxy: returns once the
/// server has reported progress (the call is running).
async fn long_call_running(client: &mut LineClient) {
    client.handshake().await;
    client
        .send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":4,"steps":40},"_meta":{"progressToken":"p"}}}"#)
        .await;
    client
        .recv_until(|m| m["method"] == "notifications/progress")
        .await;
}

#[tokio::test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
async fn a_server_that_dies_mid_call_fails_the_call_closed_and_ends_the_proxy() {
    let world = World::new();
    let mut proxied = Proxied::start(
        &world,
        Server::everything(),
        &policy(&world),
        Options::default(),
    );
    let mut client = LineClient::new(proxied.client);
    long_call_running(&mut client).await;
    proxied.server.start_kill().unwrap();
    let answer = client.recv_until(|m| m["id"] == 7).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("ended before it answered"), "{message}");
    assert_eq!(within(proxied.proxy).await.unwrap(), Ended::ServerClosed);
    let errors: Vec<Value> = world
        .audit()
        .into_iter()
        .filter(|r| r["event_type"] == "error")
        .collect();
    assert_eq!(errors[0]["payload"]["unanswered_requests"], 1, "{errors:?}");
}

#[tokio::test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
async fn a_server_that_writes_garbage_fails_the_pending_call_and_ends_the_proxy() {
    let world = World::new();
    // The real server-everything, then 100 kB without a newline on its stdout once the call
    // is running (more than this proxy's limit), then the server's output again.
    let garbage = Server::everything().with_garbage_after_progress(100_000);
    let options = Options {
        max_frame: 64 * 1024,
        ..Options::default()
    };
    let proxied = Proxied::start(&world, garbage, &policy(&world), options);
    let mut client = LineClient::new(proxied.client);
    long_call_running(&mut client).await;
    let answer = client.recv_until(|m| m["id"] == 7).await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let ended = within(proxied.proxy).await.unwrap();
    assert!(
        matches!(&ended, Ended::ServerFault(w) if w.contains("65536-byte limit")),
        "{ended:?}"
    );
}

#[tokio::test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
async fn a_client_that_leaves_mid_call_ends_the_proxy_and_the_server() {
    let world = World::new();
    let options = Options {
        drain: Duration::from_millis(100),
        ..Options::default()
    };
    let mut proxied = Proxied::start(&world, Server::everything(), &policy(&world), options);
    let mut client = LineClient::new(proxied.client);
    long_call_running(&mut client).await;
    drop(client);
    assert_eq!(within(proxied.proxy).await.unwrap(), Ended::ClientClosed);
    // Nobody kills it: with its stdin closed, the server exits once its call is done.
    within(proxied.server.wait()).await.unwrap();
}
