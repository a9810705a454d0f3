//! The ACP stream proxy between real peers: an editor built on the official ACP client
//! library (`@agentclientprotocol/sdk`, pinned, installed by tests/acp/setup.sh; it writes
//! files and runs commands for real) and the real Gemini CLI in `--acp` mode (pinned,
//! tests/gemini/setup.sh) driven by the scripted fake model server, with the run's gate
//! deciding. Each point is proven by what is on disk, what the editor saw, and the audit log.
//!
//! Gemini CLI 0.61 in ACP mode writes files through the editor (`fs/write_text_file`, after
//! reading them with `fs/read_text_file`) but runs shell commands itself, after a
//! `session/request_permission`; it never calls `terminal/create`, so a command is stopped
//! at its permission request here (the `terminal/create` mapping has unit tests).

use ahp_wrap_testkit::acp;
use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::llm_agents as support;

use std::path::Path;

use acp::{session, AcpAgent, Decides, POLICY};
use ahp_wrap::intercept::proxy::Ended;
use serde_json::{json, Value};
use support::{shell, Agent, FakeLlm, World};

const PROMPT: &str = "please do the task";

fn write_file(path: &Path, content: &str) -> Value {
    json!({"tool_calls": [{"name": "write_file",
        "args": {"file_path": path.display().to_string(), "content": content}}]})
}

fn audit(world: &World) -> Vec<Value> {
    agents::read_jsonl(&world.dir.path().join("audit.jsonl"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "gemini"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or gemini setup"
)]
async fn a_blocked_write_or_command_never_happens_and_the_editor_still_asks_for_the_rest() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            write_file(&ws.join("secret.txt"), "hello"),
            write_file(&ws.join("notes.txt"), "hello"),
            shell(&format!("touch {}", ws.join("secret-marker").display())),
            shell(&format!("touch {}", ws.join("allowed-marker").display())),
            {"text": "All done."}
        ]),
    );
    let s = session(
        &world,
        AcpAgent::Gemini,
        &llm,
        Decides::Policy(POLICY),
        "allow",
        &[PROMPT],
    )
    .await;
    let log = format!("the editor saw: {:#?}", s.editor);

    acp::assert_blocked_and_allowed(&ws, "hello", &log);

    // The editor never got the blocked write nor the blocked command's permission request;
    // it was asked about the command the harness had no opinion on, and said yes.
    let writes: Vec<Value> = s.saw("write").iter().map(|w| w["path"].clone()).collect();
    assert_eq!(writes, [json!(ws.join("notes.txt"))], "{log}");
    let asked: Vec<Value> = s
        .saw("permission")
        .iter()
        .map(|p| p["toolCall"]["title"].clone())
        .collect();
    assert_eq!(asked.len(), 1, "{log}");
    assert!(
        asked[0].as_str().unwrap().contains("allowed-marker"),
        "{log}"
    );
    // The person sees why, in the session; the turn itself ended normally.
    assert!(s.messages().contains("(rule acp-1)"), "{log}");
    assert_eq!(
        s.saw("stop"),
        [json!({"kind": "stop", "stopReason": "end_turn"})],
        "{log}"
    );
    assert_eq!(s.ended, Ended::ClientClosed, "the editor ended the session");

    // The audit log: both blocks decided by the rule, the finished tool calls reported.
    let records = audit(&world);
    let blocked: Vec<&Value> = records
        .iter()
        .filter(|r| r["event_type"] == "pre_action" && r["decision"] == "block")
        .collect();
    let tools: Vec<&str> = blocked
        .iter()
        .map(|r| r["payload"]["tool_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["acp__write_text_file", "acp__execute"],
        "{records:#?}"
    );
    assert!(records.iter().any(|r| r["event_type"] == "post_action"
        && r["payload"]["tool_name"] == "acp__execute"
        && r["payload"]["result"]["status"] == "success"));
    assert!(records
        .iter()
        .any(|r| r["event_type"] == "pre_prompt" && r["payload"]["prompt"] == PROMPT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "gemini"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or gemini setup"
)]
async fn an_explicit_allow_answers_for_the_editor_and_no_opinion_leaves_it_to_the_person() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            shell(&format!("touch {}", ws.join("explicit-marker").display())),
            shell(&format!("touch {}", ws.join("asked-marker").display())),
            {"text": "All done."}
        ]),
    );
    // The editor's person says no to everything.
    let s = session(
        &world,
        AcpAgent::Gemini,
        &llm,
        Decides::Policy(POLICY),
        "reject",
        &[PROMPT],
    )
    .await;
    let log = format!("the editor saw: {:#?}", s.editor);
    let asked: Vec<String> = s
        .saw("permission")
        .iter()
        .map(|p| p["toolCall"]["title"].as_str().unwrap().to_owned())
        .collect();
    acp::explicit_ran_and_the_refused_one_did_not(&ws, &asked, &log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "gemini"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or gemini setup"
)]
async fn with_the_harness_down_the_prompt_is_refused_and_nothing_runs() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([shell(&format!("touch {}", ws.join("marker").display())), {"text": "done"}]),
    );
    acp::harness_down_refuses_the_prompt(&world, AcpAgent::Gemini, &llm).await;
    let records = audit(&world);
    assert!(
        records
            .iter()
            .any(|r| r["event_type"] == "pre_prompt" && r["decision"] == "block"),
        "{records:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "gemini"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or gemini setup"
)]
async fn the_command_line_puts_the_proxy_where_the_editor_expects_the_agent() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            write_file(&ws.join("secret.txt"), "hello"),
            write_file(&ws.join("notes.txt"), "hello"),
            {"text": "All done."}
        ]),
    );
    let editor = acp::under_the_policy(&world, AcpAgent::Gemini, &llm, "allow", &[PROMPT])
        .await
        .0;
    assert!(
        !ws.join("secret.txt").exists(),
        "the blocked write reached the disk: {editor:#?}"
    );
    assert!(
        ws.join("notes.txt").exists(),
        "the allowed write did not: {editor:#?}"
    );
    let blocked: Vec<Value> = audit(&world)
        .into_iter()
        .filter(|r| r["decision"] == "block")
        .collect();
    assert_eq!(blocked.len(), 1, "{blocked:#?}");
    assert_eq!(blocked[0]["payload"]["tool_name"], "acp__write_text_file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "gemini"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or gemini setup"
)]
async fn the_editor_cancelling_cuts_short_a_decision_the_harness_has_not_given() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws().canonicalize().unwrap();
    let marker = ws.join("cancelled-marker");
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([shell(&format!("touch {}", marker.display())), {"text": "done"}]),
    );
    // The harness never answers about the command: only the editor's cancel can end the
    // wait before the 60 s deadline.
    let harness = world.harness(json!({"handshake": {"timeout_ms": 60_000},
               "rules": [{"event": "pre_action", "contains": "cancelled-marker", "hang": true}]}));
    let audit_log = world.dir.path().join("audit.jsonl");
    let wrapper = [
        "--harness",
        &harness,
        "--timeout",
        "60000",
        "--audit-log",
        audit_log.to_str().unwrap(),
    ];
    let harness_log = world.events_log();
    let started = std::time::Instant::now();
    let editor = acp::cancelled_through_the_cli(
        &world,
        AcpAgent::Gemini,
        &llm,
        &wrapper,
        &[PROMPT],
        (&harness_log, "cancelled-marker"),
    )
    .await;
    let log = format!("the editor saw: {editor:#?}");
    let saw = |kind: &str| -> Vec<&Value> { editor.iter().filter(|e| e["kind"] == kind).collect() };

    assert_eq!(saw("cancel").len(), 1, "the editor never cancelled; {log}");
    assert_eq!(
        saw("stop"),
        [&json!({"kind": "stop", "stopReason": "cancelled"})],
        "the turn did not end as cancelled; {log}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "the session waited for the harness's deadline ({:?})",
        started.elapsed()
    );
    assert!(!marker.exists(), "the cancelled command ran; {log}");
    assert!(saw("permission").is_empty(), "the editor was asked; {log}");
    let cut: Vec<Value> = agents::read_jsonl(&audit_log)
        .into_iter()
        .filter(|r| r["event_type"] == "pre_action" && r["source"] == "cancelled")
        .collect();
    assert_eq!(cut.len(), 1, "{cut:#?}");
    assert_eq!(cut[0]["decision"], "block");
    assert!(cut[0]["payload"].to_string().contains("cancelled-marker"));
}
