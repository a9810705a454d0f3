//! A peer cancelling what is still waiting for the gate (ACP's `session/cancel`), over the
//! engine with in-memory pipes and a gate that never decides until told to.

use serde_json::{json, Value};

use super::acp::Acp;
use super::tests::{parse, stays_quiet, Rig, ScriptGate};
use super::{Options, REQUEST_CANCELLED};
use crate::protocol::EventType;

fn request(id: u64, method: &str, params: Value) -> String {
    let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    format!("{m}\n")
}

fn permission(session: &str) -> Value {
    json!({
        "sessionId": session,
        "toolCall": {"toolCallId": "c1", "kind": "execute", "title": "rm -rf build"},
        "options": [
            {"optionId": "ok", "name": "Allow", "kind": "allow_once"},
            {"optionId": "no", "name": "Reject", "kind": "reject_once"}
        ]
    })
}

fn cancel(session: &str) -> String {
    let m = json!({"jsonrpc": "2.0", "method": "session/cancel",
                   "params": {"sessionId": session}});
    format!("{m}\n")
}

/// The agent (our server) gets both the editor's cancel and our answers, in either order.
async fn agent_gets(rig: &mut Rig, n: usize) -> (Vec<String>, Vec<Value>) {
    let mut passed = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..n {
        let line = rig.server_gets().await;
        match parse(&line).get("method") {
            Some(_) => passed.push(line),
            None => answers.push(parse(&line)),
        }
    }
    answers.sort_by_key(|a| a["id"].as_u64());
    (passed, answers)
}

#[tokio::test]
async fn a_cancel_cuts_short_the_pending_decisions_of_its_session_and_passes_through() {
    let mut rig = Rig::start_with(
        Acp::new("agent", None),
        ScriptGate::new(vec![], 0),
        Options::default(),
    );
    rig.server_sends(&request(5, "session/request_permission", permission("s1")))
        .await;
    assert!(stays_quiet(&mut rig.from_proxy).await, "not held");
    rig.client_sends(&cancel("s1")).await;

    let (passed, answers) = agent_gets(&mut rig, 2).await;
    assert_eq!(
        passed,
        vec![cancel("s1")],
        "the cancel passes through as it is"
    );
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["id"], 5);
    assert_eq!(
        answers[0]["result"],
        json!({"outcome": {"outcome": "cancelled"}})
    );

    // The editor never got the permission request: the next thing it sees is what the
    // agent sends after it.
    let update = "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{}}\n";
    rig.server_sends(update).await;
    assert_eq!(rig.client_gets().await, update);
    // The audit log hears of it (the gate's `abandoned`), and a decision that comes later
    // changes nothing.
    let seen = rig.gate.seen(EventType::PreAction);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[1]["abandoned"].as_str().unwrap().contains("cancelled"));
    rig.gate.permits.add_permits(1);
    assert!(stays_quiet(&mut rig.to_server).await);
    assert!(stays_quiet(&mut rig.from_proxy).await);
}

#[tokio::test]
async fn an_editor_operation_is_refused_as_cancelled_and_another_session_still_waits() {
    let mut rig = Rig::start_with(
        Acp::new("agent", None),
        ScriptGate::new(vec![], 0),
        Options::default(),
    );
    // s2's permission is held first: everything behind it in that direction waits with it.
    rig.server_sends(&request(7, "session/request_permission", permission("s2")))
        .await;
    let write = json!({"sessionId": "s1", "path": "/ws/a", "content": "x"});
    rig.server_sends(&request(8, "fs/write_text_file", write))
        .await;
    rig.client_sends(&cancel("s1")).await;
    // The write is not held yet (it waits behind s2's request), so the cancel does not
    // reach it; only s2's decision frees the stream.
    let passed = rig.server_gets().await;
    assert_eq!(passed, cancel("s1"));
    assert!(stays_quiet(&mut rig.to_server).await);

    rig.client_sends(&cancel("s2")).await;
    let (passed, answers) = agent_gets(&mut rig, 2).await;
    assert_eq!(passed, vec![cancel("s2")]);
    assert_eq!(answers[0]["id"], 7);
    assert_eq!(answers[0]["result"]["outcome"]["outcome"], "cancelled");
    // Now the write is held, in s1, whose cancel came before it: it waits for its decision.
    assert!(stays_quiet(&mut rig.to_server).await);
    rig.client_sends(&cancel("s1")).await;
    let (_, answers) = agent_gets(&mut rig, 2).await;
    assert_eq!(answers[0]["id"], 8);
    assert_eq!(answers[0]["error"]["code"], REQUEST_CANCELLED);
    let message = answers[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("cancelled"), "{message}");
}
