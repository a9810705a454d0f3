//! The ACP mapping's decisions, call by call (the engine and real peers are exercised by
//! `tests/acp_proxy.rs`), and the payloads read by the real embedded policy.

use serde_json::{json, Map, Value};

use super::Acp;
use crate::intercept::proxy::{Direction, Disposition, HeldCall, Notice, OnCall, Protocol};
use crate::protocol::{EventType, Final, Verdict};

const DEFERRED: Verdict = Verdict::Defer {
    retry_after_ms: 5,
    reason: None,
};

pub(super) const TO_AGENT: Direction = Direction::ToServer;
pub(super) const TO_EDITOR: Direction = Direction::ToClient;

pub(super) fn acp() -> Acp {
    Acp::new("gemini", Some("/ws".into()))
}

pub(super) fn held(a: &Acp, dir: Direction, method: &str, params: &Value) -> HeldCall {
    match a.call(dir, method, Some(params), true) {
        OnCall::Hold(h) => h,
        other => panic!("{method} was not held: {other:?}"),
    }
}

fn block(reason: &str) -> Final {
    Final::Block {
        reason: reason.into(),
    }
}

fn explicit_allow() -> Final {
    Final::Allow {
        explicit: true,
        modified_payload: None,
        extra: Map::new(),
    }
}

fn modify(payload: Value) -> Final {
    Final::Modify {
        modified_payload: payload,
    }
}

pub(super) fn permission_params(call: Value) -> Value {
    json!({
        "sessionId": "s1",
        "toolCall": call,
        "options": [
            {"optionId": "proceed_always", "name": "Always", "kind": "allow_always"},
            {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "cancel", "name": "Reject", "kind": "reject_once"}
        ]
    })
}

fn shell_permission() -> Value {
    permission_params(json!({
        "toolCallId": "c1", "status": "pending", "title": "rm -rf build", "kind": "execute",
        "content": [{"type": "content", "content": {"type": "text", "text": "clean"}}]
    }))
}

fn decide(a: &Acp, dir: Direction, method: &str, params: &Value, v: &Final) -> super::Resolution {
    let h = held(a, dir, method, params);
    a.resolve(dir, method, Some(params), &h, v)
}

fn selected(id: &str) -> Disposition {
    Disposition::Answer(json!({"outcome": {"outcome": "selected", "optionId": id}}))
}

fn shown_text(notices: &[Notice]) -> String {
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!((n.to, n.method.as_str()), (TO_EDITOR, "session/update"));
    assert_eq!(n.params["update"]["sessionUpdate"], "agent_message_chunk");
    n.params["update"]["content"]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_prompt_is_a_pre_prompt_and_a_block_is_a_refusal_the_editor_sees() {
    let a = acp();
    let p = json!({"sessionId": "s1", "prompt": [
        {"type": "text", "text": "fix it"}, {"type": "resource_link", "uri": "file:///ws/a", "name": "a"}
    ]});
    let h = held(&a, TO_AGENT, "session/prompt", &p);
    assert_eq!(h.event.event_type, EventType::PrePrompt);
    assert!(!h.native_ask);
    assert_eq!(h.event.payload["prompt"], "fix it");
    assert_eq!(h.event.payload["prompt_blocks"], p["prompt"]);

    let d = a.resolve(
        TO_AGENT,
        "session/prompt",
        Some(&p),
        &h,
        &block("no (rule 3)"),
    );
    assert_eq!(
        d.outcome,
        Disposition::Answer(json!({"stopReason": "refusal"}))
    );
    assert!(shown_text(&d.notices).contains("no (rule 3)"));

    let allowed = a.resolve(
        TO_AGENT,
        "session/prompt",
        Some(&p),
        &h,
        &Final::no_opinion(),
    );
    assert_eq!(
        (allowed.outcome, allowed.notices),
        (Disposition::Forward, vec![])
    );
}

#[test]
fn a_modified_prompt_is_what_the_agent_gets() {
    let a = acp();
    let p = json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "fix it"}]});
    let d = decide(
        &a,
        TO_AGENT,
        "session/prompt",
        &p,
        &modify(json!({"prompt": "fix it gently"})),
    );
    let Disposition::Rewrite(new) = d.outcome else {
        panic!("{:?}", d.outcome)
    };
    assert_eq!(new["sessionId"], "s1");
    assert_eq!(
        new["prompt"],
        json!([{"type": "text", "text": "fix it gently"}])
    );

    let bad = decide(&a, TO_AGENT, "session/prompt", &p, &modify(json!({"x": 1})));
    assert_eq!(
        bad.outcome,
        Disposition::Answer(json!({"stopReason": "refusal"}))
    );
}

#[test]
fn a_permission_request_is_asked_natively_and_each_verdict_picks_its_answer() {
    let a = acp();
    let p = shell_permission();
    let h = held(&a, TO_EDITOR, "session/request_permission", &p);
    assert!(h.native_ask, "the editor is the native ask");
    assert_eq!(h.event.event_type, EventType::PreAction);
    assert_eq!(h.event.payload["tool_name"], "acp__execute");
    assert_eq!(h.event.payload["arguments"]["command"], "rm -rf build");

    let d = |v: &Final| a.resolve(TO_EDITOR, "session/request_permission", Some(&p), &h, v);
    let blocked = d(&block("not today"));
    assert_eq!(blocked.outcome, selected("cancel"));
    assert!(shown_text(&blocked.notices).contains("not today"));
    assert_eq!(d(&explicit_allow()).outcome, selected("proceed_once"));
    // No opinion: the editor's person still decides.
    assert_eq!(d(&Final::no_opinion()).outcome, Disposition::Forward);
    let escalated = d(&Final::Ask {
        reason: "unsure".into(),
        target: None,
    });
    assert_eq!(escalated.outcome, Disposition::Forward);
    assert!(shown_text(&escalated.notices).contains("unsure"));
    // A permission cannot change the call: a modify is refused, never approved.
    assert_eq!(
        d(&modify(json!({"command": "ls"}))).outcome,
        selected("cancel")
    );
    // A defer never comes out of the gate; one that did would be a block.
    let deferred = d(&Final::from(DEFERRED));
    assert_eq!(deferred.outcome, selected("cancel"));
}

#[test]
fn a_block_without_a_reject_option_cancels_and_an_allow_without_allow_option_asks() {
    let a = acp();
    let p = json!({"sessionId": "s1", "toolCall": {"toolCallId": "c", "kind": "edit"},
                   "options": [{"optionId": "x", "name": "Reject all", "kind": "reject_always"}]});
    let d = |v: &Final| decide(&a, TO_EDITOR, "session/request_permission", &p, v).outcome;
    assert_eq!(d(&block("no")), selected("x"));
    assert_eq!(d(&explicit_allow()), Disposition::Forward);
    let none = json!({"sessionId": "s1", "toolCall": {"toolCallId": "c"}, "options": []});
    let out = decide(
        &a,
        TO_EDITOR,
        "session/request_permission",
        &none,
        &block("no"),
    )
    .outcome;
    assert_eq!(
        out,
        Disposition::Answer(json!({"outcome": {"outcome": "cancelled"}}))
    );
}

#[test]
fn a_permission_payload_shows_raw_input_or_the_diffs_and_locations() {
    let a = acp();
    let raw = permission_params(json!({"toolCallId": "c", "kind": "execute", "title": "Run",
                                       "rawInput": {"command": "make test"}}));
    let h = held(&a, TO_EDITOR, "session/request_permission", &raw);
    assert_eq!(
        h.event.payload["arguments"],
        json!({"command": "make test"})
    );

    let edit = permission_params(
        json!({"toolCallId": "c", "kind": "edit", "title": "Write a",
        "content": [{"type": "diff", "path": "/ws/a.txt", "oldText": null, "newText": "hi"}],
        "locations": [{"path": "/ws/a.txt"}]}),
    );
    let h = held(&a, TO_EDITOR, "session/request_permission", &edit);
    assert_eq!(h.event.payload["tool_name"], "acp__edit");
    assert_eq!(
        h.event.payload["arguments"],
        json!({"path": "/ws/a.txt", "content": "hi"})
    );
}

/// codex-acp 0.16's patch approval, as it sends it: its `rawInput` names the file only as a
/// key of `changes`, where no policy reads a path; the diff names it.
pub(super) fn codex_patch_permission(path: &str) -> Value {
    json!({
        "sessionId": "s",
        "toolCall": {
            "toolCallId": "call_1", "kind": "edit", "status": "pending",
            "title": format!("Edit {path}"),
            "content": [{"type": "diff", "path": path, "newText": "hello\n"}],
            "locations": [{"path": path}],
            "rawInput": {"call_id": "call_1", "turn_id": "t1", "started_at_ms": 1,
                         "changes": {path: {"type": "add", "content": "hello\n"}}}
        },
        "options": [
            {"optionId": "approved", "name": "Yes", "kind": "allow_once"},
            {"optionId": "abort", "name": "No, provide feedback", "kind": "reject_once"}
        ]
    })
}

#[test]
fn a_raw_input_without_paths_is_completed_with_the_paths_the_request_shows() {
    let a = acp();
    let h = held(
        &a,
        TO_EDITOR,
        "session/request_permission",
        &codex_patch_permission("/ws/a.txt"),
    );
    let args = &h.event.payload["arguments"];
    assert_eq!(args["path"], "/ws/a.txt");
    assert_eq!(args["content"], "hello\n");
    assert_eq!(args["changes"]["/ws/a.txt"]["type"], "add", "{args}");

    // The agent's own keys win: its path stays, and no title becomes a command.
    let own = permission_params(
        json!({"toolCallId": "c", "kind": "edit", "title": "Write b",
        "content": [{"type": "diff", "path": "/ws/a.txt", "newText": "hi"}],
        "rawInput": {"file_path": "/ws/b.txt", "path": "/ws/b.txt"}}),
    );
    let h = held(&a, TO_EDITOR, "session/request_permission", &own);
    assert_eq!(
        h.event.payload["arguments"],
        json!({"file_path": "/ws/b.txt", "path": "/ws/b.txt", "content": "hi"})
    );
    let run = permission_params(json!({"toolCallId": "c", "kind": "execute", "title": "Run",
        "rawInput": {"argv": ["make"]}}));
    let h = held(&a, TO_EDITOR, "session/request_permission", &run);
    assert_eq!(h.event.payload["arguments"], json!({"argv": ["make"]}));
}

#[test]
fn editor_operations_are_pre_actions_refused_or_rewritten_and_answered_as_post_actions() {
    let a = acp();
    let p = json!({"sessionId": "s1", "path": "/ws/secret.txt", "content": "x"});
    let h = held(&a, TO_EDITOR, "fs/write_text_file", &p);
    assert!(!h.native_ask);
    assert_eq!(h.event.payload["tool_name"], "acp__write_text_file");
    assert_eq!(h.event.payload["arguments"]["path"], "/ws/secret.txt");
    assert_eq!(h.event.payload["arguments"]["content"], "x");

    let blocked = a.resolve(
        TO_EDITOR,
        "fs/write_text_file",
        Some(&p),
        &h,
        &block("secret"),
    );
    let Disposition::Refuse { message, .. } = blocked.outcome else {
        panic!("{:?}", blocked.outcome)
    };
    assert_eq!(message, "secret");

    let m = modify(json!({"arguments": {"path": "/ws/other.txt", "content": "y"}}));
    let modified = a.resolve(TO_EDITOR, "fs/write_text_file", Some(&p), &h, &m);
    assert_eq!(
        modified.outcome,
        Disposition::Rewrite(json!({"sessionId": "s1", "path": "/ws/other.txt", "content": "y"}))
    );
    let watch = modified.watch.expect("the answer is watched");
    assert_eq!(watch.note["arguments"]["path"], "/ws/other.txt");

    let allowed = a.resolve(
        TO_EDITOR,
        "fs/write_text_file",
        Some(&p),
        &h,
        &Final::no_opinion(),
    );
    assert_eq!(allowed.outcome, Disposition::Forward);
    let post = a.answered(TO_EDITOR, allowed.watch.unwrap(), &Ok(json!({})));
    let post = post.expect("a post_action");
    assert_eq!(post.event_type, EventType::PostAction);
    assert_eq!(post.payload["result"]["status"], "success");
}

#[test]
fn a_terminal_is_an_argv_and_a_modified_command_line_runs_under_sh() {
    let a = acp();
    let p = json!({"sessionId": "s1", "command": "rm", "args": ["-rf", "/tmp/x"], "cwd": "/ws",
                   "env": [{"name": "PATH", "value": "/usr/bin"}]});
    let h = held(&a, TO_EDITOR, "terminal/create", &p);
    assert_eq!(h.event.payload["tool_name"], "acp__terminal_create");
    assert_eq!(
        h.event.payload["arguments"],
        json!({"command": ["rm", "-rf", "/tmp/x"], "cwd": "/ws"})
    );
    let m = modify(json!({"arguments": {"command": "echo safe"}}));
    let d = a.resolve(TO_EDITOR, "terminal/create", Some(&p), &h, &m);
    let Disposition::Rewrite(new) = d.outcome else {
        panic!("{:?}", d.outcome)
    };
    assert_eq!(
        (&new["command"], &new["args"]),
        (&json!("sh"), &json!(["-c", "echo safe"]))
    );
    assert_eq!(new["env"], p["env"]);
}

#[test]
fn finished_tool_calls_are_post_actions_and_the_rest_passes() {
    let a = acp();
    let done = json!({"sessionId": "s1", "update": {"sessionUpdate": "tool_call_update",
        "toolCallId": "c1", "status": "completed", "kind": "execute",
        "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}]}});
    let OnCall::Notify(ev) = a.call(TO_EDITOR, "session/update", Some(&done), false) else {
        panic!("a finished tool call is a post_action")
    };
    assert_eq!(ev.event_type, EventType::PostAction);
    assert_eq!(ev.payload["result"]["status"], "success");
    assert_eq!(ev.payload["acp"]["tool_call_id"], "c1");

    let running = json!({"sessionId": "s1", "update": {"sessionUpdate": "tool_call",
        "toolCallId": "c1", "status": "in_progress"}});
    for (dir, method, params) in [
        (TO_EDITOR, "session/update", running),
        (TO_EDITOR, "session/cancel", json!({"sessionId": "s1"})),
        (TO_AGENT, "session/cancel", json!({})),
        (TO_AGENT, "initialize", json!({"protocolVersion": 1})),
        (
            TO_AGENT,
            "fs/write_text_file",
            json!({"path": "/x", "content": ""}),
        ),
        (TO_EDITOR, "session/prompt", json!({"prompt": []})),
    ] {
        assert_eq!(
            a.call(dir, method, Some(&params), true),
            OnCall::Pass,
            "{method}"
        );
    }
    // The editor's cancel passes through and cuts short what its session still waits on.
    let cancel = json!({"sessionId": "s1"});
    assert_eq!(
        a.call(TO_AGENT, "session/cancel", Some(&cancel), false),
        OnCall::Cancel("s1".into())
    );
}

#[test]
fn a_finished_update_is_the_tool_call_its_earlier_updates_described() {
    // codex-acp 0.16: the kind, title and input come with the `tool_call` (or the permission
    // request); the update that finishes it says only how it went.
    let a = acp();
    let start = json!({"sessionId": "s1", "update": {"sessionUpdate": "tool_call",
        "toolCallId": "p1", "kind": "edit", "title": "Edit /ws/a.txt", "status": "in_progress",
        "rawInput": {"changes": {"/ws/a.txt": {"type": "add", "content": "hi"}}}}});
    assert_eq!(
        a.call(TO_EDITOR, "session/update", Some(&start), false),
        OnCall::Pass
    );
    let done = json!({"sessionId": "s1", "update": {"sessionUpdate": "tool_call_update",
        "toolCallId": "p1", "status": "completed", "rawOutput": {"success": true}}});
    let OnCall::Notify(ev) = a.call(TO_EDITOR, "session/update", Some(&done), false) else {
        panic!("a finished tool call is a post_action")
    };
    assert_eq!(ev.payload["tool_name"], "acp__edit");
    assert_eq!(ev.payload["acp"]["title"], "Edit /ws/a.txt");
    assert_eq!(
        ev.payload["arguments"]["changes"]["/ws/a.txt"]["type"],
        "add"
    );
    assert_eq!(ev.payload["result"]["output"], json!({"success": true}));

    // A command whose permission request came first, its `tool_call` too.
    let ask = permission_params(json!({"toolCallId": "x1", "kind": "execute",
        "title": "touch m", "rawInput": {"command": ["/bin/bash", "-lc", "touch m"]}}));
    held(&a, TO_EDITOR, "session/request_permission", &ask);
    let done = json!({"sessionId": "s1", "update": {"sessionUpdate": "tool_call_update",
        "toolCallId": "x1", "status": "failed"}});
    let OnCall::Notify(ev) = a.call(TO_EDITOR, "session/update", Some(&done), false) else {
        panic!("a failed tool call is a post_action")
    };
    assert_eq!(ev.payload["tool_name"], "acp__execute");
    assert_eq!(ev.payload["arguments"]["command"][2], "touch m");
    assert_eq!(ev.payload["result"]["status"], "error");
}

#[test]
fn a_session_s_working_directory_is_the_context_of_its_calls() {
    let a = acp();
    let new = json!({"cwd": "/projects/p", "mcpServers": []});
    let OnCall::Watch(t) = a.call(TO_AGENT, "session/new", Some(&new), true) else {
        panic!("session/new is watched")
    };
    assert_eq!(
        a.answered(TO_AGENT, t, &Ok(json!({"sessionId": "s9"}))),
        None
    );
    let p = json!({"sessionId": "s9", "path": "/projects/p/a", "content": ""});
    let h = held(&a, TO_EDITOR, "fs/write_text_file", &p);
    assert_eq!(
        h.event.payload["context"]["working_directory"],
        "/projects/p"
    );
    let other = json!({"sessionId": "s0", "path": "/ws/a", "content": ""});
    let h = held(&a, TO_EDITOR, "fs/write_text_file", &other);
    assert_eq!(h.event.payload["context"]["working_directory"], "/ws");
}
