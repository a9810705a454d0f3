//! Every message and snapshot the host makes parses as the `ahp-types` crate's wire types;
//! the first authorised answer wins.

use std::sync::Arc;
use std::time::Duration;

use ahp_types::actions::ActionEnvelope;
use ahp_types::notifications::{
    SessionAddedParams, SessionRemovedParams, SessionSummaryChangedParams,
};
use ahp_types::state::{ChatState, RootState, SessionState};
use serde_json::{json, Value};

use super::*;
use crate::gate::{Approver, DecidedBy, Decision, Escalation};
use crate::protocol::{Event, EventType, Final, Verdict};

const ALICE: &str = "alice=0123456789abcdef";
const BOB: &str = "bob=fedcba9876543210:view";

fn event(event_type: EventType, payload: Value) -> Event {
    Event {
        event_type,
        session_id: "s-1".into(),
        agent_id: "claude-code-abc".into(),
        timestamp: crate::protocol::now_rfc3339(),
        depth: 0,
        payload,
        context: None,
        metadata: None,
    }
}

fn bash(id: &str, command: &str) -> Event {
    let p = json!({"tool_name": "Bash", "tool_use_id": id, "arguments": {"command": command}});
    event(EventType::PreAction, p)
}

fn decision(verdict: Verdict, by: DecidedBy) -> Decision {
    Decision::new(Final::from(verdict), by, Duration::ZERO)
}

fn token(host: &Host, secret: &str) -> Token {
    host.tokens.check(secret).unwrap().clone()
}

/// Parses one pushed message with the crate's types; returns its action type or method.
fn parse(text: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap();
    let params = v["params"].clone();
    match v["method"].as_str().unwrap() {
        "action" => {
            let env: ActionEnvelope = serde_json::from_value(params).expect(text);
            serde_json::to_value(&env.action).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        }
        "root/sessionAdded" => {
            let _: SessionAddedParams = serde_json::from_value(params).expect(text);
            "root/sessionAdded".into()
        }
        "root/sessionSummaryChanged" => {
            let p: SessionSummaryChangedParams = serde_json::from_value(params).expect(text);
            assert!(p.changes.status.is_some());
            "root/sessionSummaryChanged".into()
        }
        "root/sessionRemoved" => {
            let _: SessionRemovedParams = serde_json::from_value(params).expect(text);
            "root/sessionRemoved".into()
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn a_session_with_an_answered_escalation_is_all_in_the_wire_types() {
    let tokens = Tokens::load(&[ALICE.into(), BOB.into()], None).unwrap();
    let host = Host::new(tokens, None);
    let mut rx = host.updates();
    let alice = token(&host, "0123456789abcdef");
    let start = json!({"framework": "claude-code", "cwd": "/w", "command": ["claude", "-p", "hi"]});
    host.observe(&event(EventType::SessionStart, start), None);
    let allow = decision(Verdict::no_opinion(), DecidedBy::Policy(None));
    host.observe(&bash("t1", "ls"), Some(&allow));
    escalate_and_deny(&host, &alice, &token(&host, "fedcba9876543210")).await;
    let post = json!({"tool_name": "Bash", "tool_use_id": "t1"});
    host.observe(&event(EventType::PostAction, post), None);
    host.observe(&event(EventType::SessionEnd, json!({})), None);
    let mut seen = Vec::new();
    while let Ok(out) = rx.try_recv() {
        seen.push(parse(&out.text));
    }
    let expected = [
        "root/sessionAdded",
        "chat/toolCallStart",
        "chat/toolCallReady",
        "chat/toolCallConfirmed",
        "chat/toolCallStart",
        "chat/toolCallReady",
        "session/inputNeededSet",
        "root/sessionSummaryChanged",
        "session/inputNeededRemoved",
        "root/sessionSummaryChanged",
        "chat/toolCallConfirmed",
        "chat/toolCallComplete",
        "chat/turnComplete",
        "root/sessionRemoved",
    ];
    assert_eq!(seen, expected);
    assert!(host.list(&alice).is_empty());
}

/// An escalation on `s-1`, checked in every snapshot while it waits, then denied by alice
/// after refusals (bob may only watch; a wrong chat; a second answer).
async fn escalate_and_deny(host: &Arc<Host>, alice: &Token, bob: &Token) {
    let waiting = {
        let (host, rm) = (host.clone(), bash("t2", "rm -rf build"));
        tokio::spawn(async move {
            let e = Escalation {
                event: &rm,
                reason: "a person must decide",
                target: None,
                rule: Some("r1"),
                deadline: tokio::time::Instant::now() + Duration::from_secs(10),
            };
            host.approve(e).await
        })
    };
    while host.lock().waiting.is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for channel in [ROOT, "ahp-session:/s-1", "ahp-chat:/s-1"] {
        let (state, _) = host.snapshot(channel, alice).unwrap();
        match channel {
            ROOT => drop(serde_json::from_value::<RootState>(state).unwrap()),
            "ahp-session:/s-1" => {
                let s: SessionState = serde_json::from_value(state).unwrap();
                assert_eq!(s.input_needed.unwrap().len(), 1);
            }
            _ => drop(serde_json::from_value::<ChatState>(state).unwrap()),
        }
    }
    let chat = "ahp-chat:/s-1";
    let reply = |chat, approved, message: Option<&str>| Reply {
        chat,
        call: "t2",
        approved,
        message: message.map(str::to_owned),
        origin: json!({"clientId": "page", "clientSeq": 1}),
    };
    let view_only = host.answer(bob, "b", reply(chat, true, None));
    assert!(view_only.is_err());
    let elsewhere = host.answer(alice, "a", reply("ahp-chat:/other", true, None));
    assert!(elsewhere.is_err());
    let no = reply(chat, false, Some("not now"));
    host.answer(alice, "10.0.0.1:1", no).unwrap();
    let second = host.answer(alice, "a", reply(chat, true, None));
    assert!(second.is_err());
    let Approval::Deny { by, reason } = waiting.await.unwrap() else {
        panic!("not a denial");
    };
    assert_eq!(by.unwrap().who, "alice");
    assert!(reason.contains("not now") && reason.contains("a person must decide"));
}

#[test]
fn a_token_limited_to_a_directory_sees_only_sessions_there() {
    let tokens = Tokens::load(&["c=0123456789abcdef:cwd=/team".into()], None).unwrap();
    let host = Host::new(tokens, None);
    let carol = token(&host, "0123456789abcdef");
    let mut other = event(EventType::SessionStart, json!({"cwd": "/elsewhere"}));
    host.observe(&other, None);
    other.session_id = "s-2".into();
    other.payload = json!({"cwd": "/team/app"});
    host.observe(&other, None);
    let listed = host.list(&carol);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["resource"], "ahp-session:/s-2");
    assert!(host.snapshot("ahp-session:/s-1", &carol).is_none());
}

#[test]
fn a_client_is_refused_until_it_authenticates_and_on_a_version_we_do_not_speak() {
    let host = Host::new(Tokens::load(&[ALICE.into()], None).unwrap(), None);
    let mut c = wire::Connection::new(host, "127.0.0.1:9".into());
    let ask = |c: &mut wire::Connection, method: &str, params: Value| -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        serde_json::from_str(&c.handle(&msg.to_string()).unwrap()).unwrap()
    };
    let root = json!({"channel": ROOT});
    let old = json!({"channel": ROOT, "protocolVersions": ["0.1.0"], "clientId": "c"});
    let refused = ask(&mut c, "initialize", old);
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
    let ok = json!({"channel": ROOT, "protocolVersions": ["1.0.0"], "clientId": "c"});
    assert_eq!(
        ask(&mut c, "initialize", ok)["result"]["protocolVersion"],
        "1.0.0"
    );
    let early = ask(&mut c, "subscribe", root.clone());
    assert_eq!(early["error"]["code"], -32007, "{early}");
    assert_eq!(
        early["error"]["data"]["resources"][0]["resource"],
        wire::RESOURCE
    );
    let auth = json!({"channel": ROOT, "resource": wire::RESOURCE, "token": "0123456789abcdef"});
    assert!(ask(&mut c, "authenticate", auth)["result"].is_object());
    let snap = ask(&mut c, "subscribe", root);
    assert!(
        snap["result"]["snapshot"]["state"]["agents"].is_array(),
        "{snap}"
    );
}

#[test]
fn a_session_silent_for_long_leaves_the_catalogue_at_the_next_event() {
    let host = Host::new(Tokens::load(&[ALICE.into()], None).unwrap(), None);
    let alice = token(&host, "0123456789abcdef");
    host.observe(&event(EventType::SessionStart, json!({"cwd": "/w"})), None);
    let long_ago = std::time::Instant::now().checked_sub(Duration::from_secs(301));
    host.lock().sessions.get_mut("s-1").unwrap().last_seen = long_ago.unwrap();
    let mut other = event(EventType::SessionStart, json!({"cwd": "/v"}));
    other.session_id = "s-2".into();
    host.observe(&other, None);
    let listed = host.list(&alice);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["resource"], "ahp-session:/s-2");
}

#[tokio::test]
async fn an_escalation_whose_wait_is_dropped_leaves_the_pending_list() {
    let host = Host::new(Tokens::load(&[ALICE.into()], None).unwrap(), None);
    let alice = token(&host, "0123456789abcdef");
    let start = json!({"framework": "acp", "cwd": "/w", "command": ["agent"]});
    host.observe(&event(EventType::SessionStart, start), None);
    let rm = bash("t9", "rm -rf build");
    let e = Escalation {
        event: &rm,
        reason: "a person must decide",
        target: None,
        rule: None,
        deadline: tokio::time::Instant::now() + Duration::from_secs(60),
    };
    // The caller gives up long before the deadline (its call was cancelled).
    let gave_up = tokio::time::timeout(Duration::from_millis(100), host.approve(e)).await;
    assert!(gave_up.is_err());
    assert!(host.lock().waiting.is_empty());
    let (state, _) = host.snapshot("ahp-session:/s-1", &alice).unwrap();
    let s: SessionState = serde_json::from_value(state).unwrap();
    assert!(s.input_needed.unwrap_or_default().is_empty());
}

/// One connection's request or notification; what it sends back, parsed.
fn send(c: &mut wire::Connection, id: Option<u64>, method: &str, params: Value) -> Option<Value> {
    let mut msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
    if let Some(id) = id {
        msg["id"] = json!(id);
    }
    let back = c.handle(&msg.to_string())?;
    Some(serde_json::from_str(&back).unwrap())
}

/// A connection initialized as `client` and authenticated with `secret`; the result.
fn connect(host: &Arc<Host>, client: &str, secret: &str) -> (wire::Connection, Value) {
    let mut c = wire::Connection::new(host.clone(), format!("{client}:1"));
    let init = json!({"channel": ROOT, "protocolVersions": ["1.0.0"], "clientId": client});
    send(&mut c, Some(1), "initialize", init).unwrap();
    let auth = json!({"channel": ROOT, "resource": wire::RESOURCE, "token": secret});
    let authed = send(&mut c, Some(2), "authenticate", auth).unwrap();
    (c, authed["result"].clone())
}

fn answer(seq: i64, approved: bool) -> Value {
    json!({"channel": "ahp-chat:/s-1", "clientSeq": seq, "action": {
        "type": "chat/toolCallConfirmed", "turnId": TURN, "toolCallId": "t3", "approved": approved}})
}

#[tokio::test]
async fn a_client_learns_what_its_token_allows_and_sees_its_refused_answers_echoed() {
    let tokens = Tokens::load(&[ALICE.into(), BOB.into()], None).unwrap();
    let host = Host::new(tokens, None);
    let (mut alice, allowed) = connect(&host, "alice-page", "0123456789abcdef");
    assert_eq!(
        allowed["_meta"],
        json!({"token": "alice", "scopes": ["approve"]})
    );
    let (mut bob, allowed) = connect(&host, "bob-page", "fedcba9876543210");
    assert_eq!(allowed["_meta"]["scopes"], json!(["view"]));
    let _: ahp_types::commands::AuthenticateResult = serde_json::from_value(allowed).unwrap();
    let mut rx = host.updates();
    let start = json!({"framework": "acp", "cwd": "/w", "command": ["agent"]});
    host.observe(&event(EventType::SessionStart, start), None);
    let waiting = {
        let (host, rm) = (host.clone(), bash("t3", "rm -rf build"));
        tokio::spawn(async move {
            let e = Escalation {
                event: &rm,
                reason: "a person must decide",
                target: None,
                rule: None,
                deadline: tokio::time::Instant::now() + Duration::from_secs(10),
            };
            host.approve(e).await
        })
    };
    while host.lock().waiting.is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Bob may only watch: his answer comes back to him alone, refused, with why.
    let echo = send(&mut bob, None, "dispatchAction", answer(4, true)).unwrap();
    let env: ActionEnvelope = serde_json::from_value(echo["params"].clone()).unwrap();
    let origin = env.origin.unwrap();
    assert_eq!(
        (origin.client_id.as_str(), origin.client_seq),
        ("bob-page", 4)
    );
    assert!(env.rejection_reason.unwrap().contains("may only watch"));
    // Sent as a request (not as the spec has it), the refusal is an error response.
    let refused = send(&mut bob, Some(3), "dispatchAction", answer(5, true)).unwrap();
    assert_eq!(refused["error"]["code"], -32009, "{refused}");

    // Alice's answer is taken: nothing comes back to her alone, and the confirmation
    // everyone sees is her answer's echo.
    assert!(send(&mut alice, None, "dispatchAction", answer(7, true)).is_none());
    assert!(matches!(waiting.await.unwrap(), Approval::Allow { .. }));
    let mut confirmed = None;
    while let Ok(out) = rx.try_recv() {
        let v: Value = serde_json::from_str(&out.text).unwrap();
        if v["params"]["action"]["type"] == "chat/toolCallConfirmed" {
            confirmed = Some(serde_json::from_value::<ActionEnvelope>(
                v["params"].clone(),
            ));
        }
    }
    let confirmed = confirmed.expect("a confirmation was pushed").unwrap();
    assert!(confirmed.rejection_reason.is_none());
    let origin = confirmed.origin.unwrap();
    assert_eq!(
        (origin.client_id.as_str(), origin.client_seq),
        ("alice-page", 7)
    );

    // Too late: a second answer is refused.
    let echo = send(&mut alice, None, "dispatchAction", answer(8, false)).unwrap();
    let env: ActionEnvelope = serde_json::from_value(echo["params"].clone()).unwrap();
    assert!(env.rejection_reason.unwrap().contains("answered already"));
}
