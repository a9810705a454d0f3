//! Harness credentials: `Authorization: Bearer` or `X-API-Key` on HTTP, `?token=` or
//! `?api_key=` on WebSocket; a harness that refuses them stops the run before the agent
//! starts (exit 125). And the
//! control socket's own token: a hook that brings a wrong one is told so.

#![allow(clippy::result_large_err)] // tungstenite's handshake callback signature

use ahp_wrap_testkit::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const BLOCKED: &str = r#"{"event_type":"pre_action","payload":{"tool_name":"bash","arguments":{"command":"BLOCK_ME"}}}"#;
const ALLOWED: &str =
    r#"{"event_type":"pre_action","payload":{"tool_name":"bash","arguments":{"command":"ls"}}}"#;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_harness(dir: &std::path::Path, header: &str, value: &str) -> (Server, u16) {
    let portfile = dir.join("port");
    let child = Command::new("python3")
        .arg(support("auth_http_harness.py"))
        .args([portfile.to_str().unwrap(), header, value])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !portfile.exists() {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    let port = std::fs::read_to_string(&portfile).unwrap().parse().unwrap();
    (Server(child), port)
}

fn gate(harness: &str, extra: &[&str], payload: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        Command::new(wrap_bin())
            .args(["--harness", harness, "--timeout", "3000"])
            .args(extra)
            .arg("--")
            .args(gated_agent(dir.path(), payload, 0)),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    (
        dir.path().join("ran").exists(),
        read(dir.path(), "reason.txt"),
    )
}

#[test]
fn http_bearer_token_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_harness(dir.path(), "Authorization", "Bearer t0ken");
    let url = format!("http://127.0.0.1:{port}/ahp");
    assert!(gate(&url, &["--token", "t0ken"], ALLOWED).0);
    let (ran, reason) = gate(&url, &["--token", "t0ken"], BLOCKED);
    assert!(!ran);
    assert!(reason.contains("auth harness says no"), "{reason}");
}

#[test]
fn http_api_key_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_harness(dir.path(), "X-API-Key", "k3y");
    let url = format!("http://127.0.0.1:{port}/ahp");
    assert!(gate(&url, &["--token", "k3y", "--auth", "api-key"], ALLOWED).0);
}

/// Credentials the harness turns down will not become right: the agent is not started, in
/// either fail mode (fail-open would run it with nobody deciding), and the reason is said.
#[test]
fn refused_credentials_stop_the_run_before_the_agent_starts_whatever_the_fail_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = http_harness(dir.path(), "Authorization", "Bearer right");
    let url = format!("http://127.0.0.1:{port}/ahp");
    for fail_mode in ["closed", "open"] {
        let agent_dir = tempfile::tempdir().unwrap();
        let started = agent_dir.path().join("started");
        let out = run(
            Command::new(wrap_bin())
                .args(["--harness", &url, "--timeout", "3000", "--token", "wrong"])
                .args(["--fail-mode", fail_mode, "--", "sh", "-c"])
                .arg(format!("touch '{}'", started.display())),
            Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(125), "{fail_mode}: {}", show(&out));
        assert!(!started.exists(), "{fail_mode}: the agent started");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("refused our credentials (HTTP 401") && said.contains("--token"),
            "{fail_mode}: {said}"
        );
    }
}

#[test]
fn websocket_token_goes_in_the_query() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    rt.spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let cb = |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                          resp| {
                    seen.lock().unwrap().push(req.uri().to_string());
                    Ok(resp)
                };
                let mut ws = tokio_tungstenite::accept_hdr_async(stream, cb).await.unwrap();
                while let Some(Ok(Message::Text(text))) = ws.next().await {
                    let msg: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let Some(id) = msg.get("id") else { continue };
                    let result = if msg["method"] == "ahp/handshake" {
                        serde_json::json!({"protocol_version": "2.4", "harness_info": {"name": "ws", "version": "1", "capabilities": []}})
                    } else {
                        serde_json::json!({"decision": "block", "reason": "ws harness says no"})
                    };
                    let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
                    ws.send(Message::Text(reply.to_string())).await.unwrap();
                }
            });
        }
    });
    let url = format!("ws://127.0.0.1:{port}/ahp");
    let (ran, reason) = gate(&url, &["--token", "a b&c"], ALLOWED);
    assert!(!ran);
    assert!(reason.contains("ws harness says no"), "{reason}");
    let (ran, _) = gate(&url, &["--token", "k", "--auth", "api-key"], ALLOWED);
    assert!(!ran);
    let uris = seen.lock().unwrap().clone();
    assert_eq!(uris, ["/ahp?token=a+b%26c", "/ahp?api_key=k"]);
}

#[test]
fn a_hook_with_a_wrong_token_is_refused_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = gated_agent(dir.path(), ALLOWED, 0);
    let script = agent.pop().unwrap().replace(
        "| \"$AHP_WRAP_BIN\" hook",
        "| AHP_WRAP_TOKEN=not-the-token \"$AHP_WRAP_BIN\" hook",
    );
    let out = run(
        Command::new(wrap_bin()).args(["--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        !dir.path().join("ran").exists(),
        "allowed with a wrong token"
    );
    assert_eq!(read(dir.path(), "hook_rc").trim(), "2");
    let reason = read(dir.path(), "reason.txt");
    assert!(reason.contains("refused: wrong token"), "{reason}");
    assert!(!reason.contains("closed the connection"), "{reason}");
    let d: serde_json::Value = serde_json::from_str(&read(dir.path(), "decision.json")).unwrap();
    assert_eq!(d["decision"], "block");
}
