//! The engine and the MCP mapping over in-memory pipes, with a scripted gate: order, id
//! matching, pass-through, faults. Real servers are driven by `tests/mcp_proxy.rs`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::mcp::Mcp;
use super::{run, Decide, Ended, Options, Protocol, Streams};
use crate::protocol::{EventType, Final, Verdict};

/// A gate that answers from a script (allow when it runs out) and records what it saw.
/// Each decision first takes a permit, so a test can hold decisions back.
pub(super) struct ScriptGate {
    verdicts: Mutex<VecDeque<Verdict>>,
    pub(super) permits: Semaphore,
    seen: Mutex<Vec<(EventType, Value)>>,
}

impl ScriptGate {
    pub(super) fn new(verdicts: Vec<Verdict>, permits: usize) -> Arc<ScriptGate> {
        Arc::new(ScriptGate {
            verdicts: Mutex::new(verdicts.into()),
            permits: Semaphore::new(permits),
            seen: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn seen(&self, t: EventType) -> Vec<Value> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(et, _)| *et == t)
            .map(|(_, p)| p.clone())
            .collect()
    }
}

impl Decide for Arc<ScriptGate> {
    async fn decide(&self, ev: super::GateEvent) -> Final {
        self.seen.lock().unwrap().push((ev.event_type, ev.payload));
        self.permits.acquire().await.unwrap().forget();
        let next = self.verdicts.lock().unwrap().pop_front();
        next.map_or_else(Final::no_opinion, Final::from)
    }

    async fn abandoned(&self, ev: super::GateEvent, why: String, _: Duration) {
        let mut payload = ev.payload;
        payload["abandoned"] = why.into();
        self.seen.lock().unwrap().push((ev.event_type, payload));
    }

    async fn notify(&self, ev: super::GateEvent) {
        self.seen.lock().unwrap().push((ev.event_type, ev.payload));
    }
}

/// A proxy between an in-memory client and server.
pub(super) struct Rig {
    client: DuplexStream,
    pub(super) from_proxy: BufReader<DuplexStream>,
    server: DuplexStream,
    pub(super) to_server: BufReader<DuplexStream>,
    pub(super) gate: Arc<ScriptGate>,
    proxy: JoinHandle<Ended>,
}

const WAIT: Duration = Duration::from_secs(10);

impl Rig {
    fn start(gate: Arc<ScriptGate>, options: Options) -> Rig {
        Rig::start_with(Mcp::new("fs", None), gate, options)
    }

    /// A proxy speaking `protocol`.
    pub(super) fn start_with(
        protocol: impl Protocol,
        gate: Arc<ScriptGate>,
        options: Options,
    ) -> Rig {
        let (client, client_in) = tokio::io::duplex(1 << 16);
        let (client_out, from_proxy) = tokio::io::duplex(1 << 16);
        let (server_in, to_server) = tokio::io::duplex(1 << 16);
        let (server, server_out) = tokio::io::duplex(1 << 16);
        let g = gate.clone();
        let proxy = tokio::spawn(async move {
            let streams = Streams {
                client_in,
                client_out,
                server_in,
                server_out,
            };
            run(
                Arc::new(protocol),
                Arc::new(g),
                streams,
                options,
                std::future::pending(),
            )
            .await
        });
        Rig {
            client,
            from_proxy: BufReader::new(from_proxy),
            server,
            to_server: BufReader::new(to_server),
            gate,
            proxy,
        }
    }

    pub(super) async fn client_sends(&mut self, bytes: &str) {
        self.client.write_all(bytes.as_bytes()).await.unwrap();
    }

    pub(super) async fn server_sends(&mut self, bytes: &str) {
        self.server.write_all(bytes.as_bytes()).await.unwrap();
    }

    pub(super) async fn server_gets(&mut self) -> String {
        next_line(&mut self.to_server).await
    }

    pub(super) async fn client_gets(&mut self) -> String {
        next_line(&mut self.from_proxy).await
    }

    async fn ended(self) -> Ended {
        tokio::time::timeout(WAIT, self.proxy)
            .await
            .expect("the proxy ends")
            .unwrap()
    }
}

pub(super) async fn next_line(r: &mut BufReader<DuplexStream>) -> String {
    let mut line = String::new();
    tokio::time::timeout(WAIT, r.read_line(&mut line))
        .await
        .expect("a line within the time limit")
        .unwrap();
    line
}

/// Whether nothing arrives for a while (a held frame must not).
pub(super) async fn stays_quiet(r: &mut BufReader<DuplexStream>) -> bool {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_millis(200), r.read_line(&mut line))
        .await
        .is_err()
}

pub(super) fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

fn call(id: Value, tool: &str, args: Value) -> String {
    let m = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": args}});
    format!("{m}\n")
}

/// Options whose frames hold at most 256 bytes, for the tests of oversized lines.
fn small_frames() -> Options {
    Options {
        max_frame: 256,
        ..Options::default()
    }
}

fn block(reason: &str) -> Verdict {
    Verdict::Block {
        reason: reason.into(),
    }
}

#[tokio::test]
async fn a_held_call_holds_its_direction_in_order_while_the_other_flows() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 0), Options::default());
    let first = call(json!(1), "write_file", json!({"path": "/a"}));
    let list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n";
    let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}\n";
    // In one write, so that the notifications before the call and after it are read with
    // it: those before it pass at once (in a run), the others wait behind it.
    let progress = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n";
    rig.client_sends(&format!("{progress}{progress}{first}{list}{note}"))
        .await;
    assert_eq!(rig.server_gets().await, progress);
    assert_eq!(rig.server_gets().await, progress);
    assert!(
        stays_quiet(&mut rig.to_server).await,
        "forwarded before its decision"
    );
    // The server's side is not held meanwhile.
    let log = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n";
    rig.server_sends(log).await;
    assert_eq!(rig.client_gets().await, log);
    rig.gate.permits.add_permits(1);
    assert_eq!(rig.server_gets().await, first);
    assert_eq!(rig.server_gets().await, list);
    assert_eq!(rig.server_gets().await, note);
    let pre = rig.gate.seen(EventType::PreAction);
    assert_eq!(pre.len(), 1);
    assert_eq!(pre[0]["tool_name"], "mcp__fs__write_file");
    assert_eq!(pre[0]["arguments"], json!({"path": "/a"}));
}

#[tokio::test]
async fn a_blocked_call_is_answered_as_a_tool_error_and_never_forwarded() {
    let gate = ScriptGate::new(vec![block("no writes (rule 7)")], 9);
    let mut rig = Rig::start(gate, Options::default());
    rig.client_sends(&call(json!("w-1"), "write_file", json!({"path": "/a"})))
        .await;
    let after = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n";
    rig.client_sends(after).await;
    // The next frame the server sees is the one after the blocked call.
    assert_eq!(rig.server_gets().await, after);
    let answer = parse(&rig.client_gets().await);
    assert_eq!(answer["id"], "w-1");
    assert_eq!(
        answer["result"],
        json!({"content": [{"type": "text", "text": "no writes (rule 7)"}], "isError": true})
    );
    // A blocked call has no post_action, even if a server answered its id.
    rig.server_sends("{\"jsonrpc\":\"2.0\",\"id\":\"w-1\",\"result\":{}}\n")
        .await;
    rig.client_gets().await;
    assert!(rig.gate.seen(EventType::PostAction).is_empty());
}

#[tokio::test]
async fn a_modified_call_runs_with_the_new_arguments_and_others_stay_byte_exact() {
    let modify = Verdict::Modify {
        modified_payload: json!({"arguments": {"path": "/safe"}}),
    };
    let mut rig = Rig::start(ScriptGate::new(vec![modify], 9), Options::default());
    let m = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"write_file\",\"arguments\":{\"path\":\"/etc/x\"},\"_meta\":{\"k\":1}}}\n";
    rig.client_sends(m).await;
    let got = parse(&rig.server_gets().await);
    assert_eq!(got["params"]["arguments"], json!({"path": "/safe"}));
    assert_eq!(got["params"]["_meta"], json!({"k": 1}));
    assert_eq!(got["id"], 5);
    // The post_action reports what ran.
    rig.server_sends("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]}}\n")
        .await;
    rig.client_gets().await;
    let post = rig.gate.seen(EventType::PostAction);
    assert_eq!(post[0]["arguments"], json!({"path": "/safe"}));
}

#[tokio::test]
async fn ids_match_per_direction_numbers_and_strings_apart() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 9), Options::default());
    // The client's tools/call "1" and tools/list 1; the server's own request 1.
    rig.client_sends(&call(json!("1"), "read_file", json!({"path": "/r"})))
        .await;
    rig.server_gets().await;
    rig.client_sends("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n")
        .await;
    rig.server_gets().await;
    let roots = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n";
    rig.server_sends(roots).await;
    assert_eq!(rig.client_gets().await, roots);
    // The client answers the server's 1: not the answer to any client call.
    let roots_answer = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"roots\":[]}}\n";
    rig.client_sends(roots_answer).await;
    assert_eq!(rig.server_gets().await, roots_answer);
    // The server answers tools/list 1, then tools/call "1": only the latter is reported.
    for id in ["1", "\"1\""] {
        let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n");
        rig.server_sends(&answer).await;
        assert_eq!(rig.client_gets().await, answer);
    }
    let post = rig.gate.seen(EventType::PostAction);
    assert_eq!(post.len(), 1, "{post:?}");
    assert_eq!(post[0]["tool_name"], "mcp__fs__read_file");
    assert_eq!(post[0]["result"]["status"], "success");
}

#[tokio::test]
async fn non_json_and_odd_json_pass_through_byte_for_byte() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 9), Options::default());
    let lines = [
        "Secure MCP Filesystem Server running on stdio\n",
        "\n",
        "  {\"jsonrpc\" : \"2.0\", \"method\":\"x\", \"params\":{\"s\":\"\\u00e9\"}}  \r\n",
        "\u{ff}\u{fe} not utf-8 below\n",
        "[1, 2]\n",
    ];
    for l in lines {
        rig.client_sends(l).await;
        assert_eq!(rig.server_gets().await, l);
        rig.server_sends(l).await;
        assert_eq!(rig.client_gets().await, l);
    }
    let raw = b"\xff\xfe{\n".to_vec();
    rig.client.write_all(&raw).await.unwrap();
    let mut got = vec![0; raw.len()];
    rig.to_server.read_exact(&mut got).await.unwrap();
    assert_eq!(got, raw);
}

#[tokio::test]
async fn calls_that_cannot_be_read_or_batched_are_refused_not_forwarded() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 9), small_frames());
    let huge = call(json!(1), "write_file", json!({"content": "x".repeat(300)}));
    let bad_id = "{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"tools/call\",\"params\":{}}\n";
    let no_version = "{\"id\":4,\"method\":\"tools/call\",\"params\":{}}\n";
    let batch = format!("[{}]\n", call(json!(2), "write_file", json!({})).trim());
    for bad in [huge.as_str(), bad_id, no_version, &batch] {
        rig.client_sends(bad).await;
        let answer = parse(&rig.client_gets().await);
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], -32000, "{answer}");
    }
    // None of them reached the server; the stream goes on.
    let ping = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n";
    rig.client_sends(ping).await;
    assert_eq!(rig.server_gets().await, ping);
    // A last frame cut off by the client's end is dropped, and the server's stdin closed.
    rig.client_sends(call(json!(3), "write_file", json!({})).trim())
        .await;
    drop(rig.client);
    let mut rest = String::new();
    rig.to_server.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "", "a cut call was forwarded");
    drop(rig.server);
    assert_eq!(
        tokio::time::timeout(WAIT, rig.proxy)
            .await
            .unwrap()
            .unwrap(),
        Ended::ClientClosed
    );
}

#[tokio::test]
async fn a_server_that_dies_or_writes_an_oversized_line_fails_what_it_left() {
    for garbage in [None, Some("y".repeat(300) + "\n")] {
        let mut rig = Rig::start(ScriptGate::new(vec![], 9), small_frames());
        rig.client_sends(&call(json!(1), "echo", json!({}))).await;
        rig.client_sends("{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"tools/list\"}\n")
            .await;
        rig.server_gets().await;
        rig.server_gets().await;
        match &garbage {
            Some(g) => rig.server_sends(g).await,
            None => drop(std::mem::replace(&mut rig.server, tokio::io::duplex(1).0)),
        }
        let mut ids = Vec::new();
        for _ in 0..2 {
            let answer = parse(&rig.client_gets().await);
            assert_eq!(answer["error"]["code"], -32000, "{answer}");
            ids.push(answer["id"].clone());
        }
        assert_eq!(ids, [json!("b"), json!(1)]);
        let errors = rig.gate.seen(EventType::Error);
        assert_eq!(errors[0]["unanswered_requests"], 2);
        let ended = rig.ended().await;
        match garbage {
            None => assert_eq!(ended, Ended::ServerClosed),
            Some(_) => assert!(
                matches!(ended, Ended::ServerFault(ref w) if w.contains("256")),
                "{ended:?}"
            ),
        }
    }
}

#[tokio::test]
async fn frames_the_server_wrote_before_an_oversized_line_still_reach_the_client() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 9), small_frames());
    let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n";
    // In one write: both frames are read together, the first one queued behind the second.
    rig.server_sends(&format!("{note}{note}{}\n", "y".repeat(300)))
        .await;
    assert_eq!(rig.client_gets().await, note);
    assert_eq!(rig.client_gets().await, note);
    let ended = rig.ended().await;
    assert!(
        matches!(ended, Ended::ServerFault(ref w) if w.contains("256")),
        "{ended:?}"
    );
}

#[tokio::test]
async fn a_call_in_flight_when_the_client_leaves_closes_the_server_stdin() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 9), Options::default());
    rig.client_sends(&call(json!(1), "slow", json!({}))).await;
    rig.server_gets().await;
    drop(rig.client);
    let mut rest = String::new();
    rig.to_server.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "", "the server's stdin is closed");
    // The server's last words still reach the client, until it closes.
    let last = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n";
    rig.server.write_all(last.as_bytes()).await.unwrap();
    assert_eq!(next_line(&mut rig.from_proxy).await, last);
    drop(rig.server);
    assert_eq!(
        tokio::time::timeout(WAIT, rig.proxy)
            .await
            .unwrap()
            .unwrap(),
        Ended::ClientClosed
    );
}

#[tokio::test]
async fn input_required_is_not_a_post_action_and_the_retry_is_decided_again() {
    let mut rig = Rig::start(ScriptGate::new(vec![], 9), Options::default());
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let first = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "deploy", "arguments": {}, "_meta": meta}});
    rig.client_sends(&format!("{first}\n")).await;
    rig.server_gets().await;
    let ask = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{},\"requestState\":\"s\"}}\n";
    rig.server_sends(ask).await;
    assert_eq!(rig.client_gets().await, ask);
    let retry = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "deploy", "arguments": {}, "_meta": meta,
                                  "inputResponses": {}, "requestState": "s"}});
    rig.client_sends(&format!("{retry}\n")).await;
    rig.server_gets().await;
    rig.server_sends(
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"resultType\":\"complete\",\"content\":[]}}\n",
    )
    .await;
    rig.client_gets().await;
    let pre = rig.gate.seen(EventType::PreAction);
    assert_eq!(pre.len(), 2);
    assert_eq!(pre[0]["mcp"]["protocol_version"], "2026-07-28");
    assert_eq!(
        (
            pre[0]["mcp"]["round_trip"].clone(),
            pre[1]["mcp"]["round_trip"].clone()
        ),
        (json!(false), json!(true))
    );
    assert_eq!(rig.gate.seen(EventType::PostAction).len(), 1);
}
