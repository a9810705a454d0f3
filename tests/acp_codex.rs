//! The ACP stream proxy with a second real agent: Zed's ACP adapter for Codex, `codex-acp`
//! (pinned, tests/codex-acp/setup.sh), driven by the scripted fake model server (OpenAI's
//! Responses API), behind `ahp-wrap --framework acp` as an editor's configuration would run
//! it, with an editor built on the official ACP client library (tests/acp/setup.sh) that
//! answers permission requests as its scripted person would. Each point is proven by what is
//! on disk, what the editor saw, and the audit log.
//!
//! codex-acp 0.16 never calls the editor's `fs/*` or `terminal/*` methods: Codex applies its
//! patches and runs its commands itself, after a `session/request_permission` (kind `edit`
//! for a patch, `execute` for a command) when its approval policy asks. Its only reject
//! option is `abort`, which ends the turn: one prompt per tool call here.

use ahp_wrap_testkit::acp;
use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::llm_agents as support;

use std::path::Path;

use acp::{AcpAgent, FOUR_PROMPTS};
use agents::TestDir;
use serde_json::{json, Value};
use support::FakeLlm;

/// The test's private directory, under the target directory: Codex will not put its helper
/// links under /tmp.
fn world() -> TestDir {
    TestDir::new(
        "ahp-acp-codex-",
        Some(Path::new(env!("CARGO_TARGET_TMPDIR"))),
        &["home"],
    )
}

/// A scripted turn in which the model runs one command (Codex's `exec_command`).
fn shell(command: &str) -> Value {
    json!({"tool_calls": [{"name": "exec_command", "args": {"cmd": command}}]})
}

/// A scripted turn in which the model adds a file (one line) with a patch: Codex takes
/// `apply_patch` through `exec_command` as its patch tool.
fn add_file(name: &str, line: &str) -> Value {
    shell(&format!(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {name}\n+{line}\n*** End Patch\nEOF\n"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "codex-acp"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or codex-acp setup"
)]
async fn a_blocked_patch_or_command_never_happens_and_the_editor_still_asks_for_the_rest() {
    let world = world();
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            add_file("secret.txt", "hello"),
            add_file("notes.txt", "hello"),
            {"text": "Wrote the notes."},
            shell(&format!("touch {}", ws.join("secret-marker").display())),
            shell(&format!("touch {}", ws.join("allowed-marker").display())),
            {"text": "All done."}
        ]),
    );
    let e = acp::under_the_policy(&world, AcpAgent::CodexAcp, &llm, "allow", &FOUR_PROMPTS).await;
    let log = format!("the editor saw: {:#?}", e.0);

    acp::assert_blocked_and_allowed(&ws, "hello\n", &log);
    e.assert_asked_only_about_the_allowed(&log);
    // The person saw why the blocked two were blocked.
    assert!(e.messages().contains("(rule acp-1)"), "{log}");
    e.assert_no_file_or_terminal_calls(&log);
    // A rejected approval is Codex's `abort`: that prompt's turn ends there, cancelled.
    assert_eq!(
        e.stops(),
        ["cancelled", "end_turn", "cancelled", "end_turn"],
        "{log}"
    );

    // The audit log: both blocks decided by the rule on the permission requests, the
    // finished tool calls reported.
    let records = acp::audit(&world);
    assert_eq!(
        acp::blocked_tools(&world),
        ["acp__edit", "acp__execute"],
        "{records:#?}"
    );
    for tool in ["acp__edit", "acp__execute"] {
        assert!(
            records.iter().any(|r| r["event_type"] == "post_action"
                && r["payload"]["tool_name"] == tool
                && r["payload"]["result"]["status"] == "success"),
            "no successful {tool} post_action: {records:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "codex-acp"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or codex-acp setup"
)]
async fn an_explicit_allow_answers_for_the_editor_and_no_opinion_leaves_it_to_the_person() {
    let world = world();
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            shell(&format!("touch {}", ws.join("explicit-marker").display())),
            {"text": "Done."},
            shell(&format!("touch {}", ws.join("asked-marker").display())),
            {"text": "Done."}
        ]),
    );
    let e = acp::explicit_allow_then_a_person_who_says_no(&world, AcpAgent::CodexAcp, &llm).await;
    // A rejected approval is Codex's `abort`: that prompt's turn ends there, cancelled.
    assert_eq!(
        e.stops(),
        ["end_turn", "cancelled"],
        "the editor saw: {:#?}",
        e.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "codex-acp"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or codex-acp setup"
)]
async fn with_the_harness_down_the_prompt_is_refused_and_nothing_runs() {
    let world = world();
    let ws = world.ws().canonicalize().unwrap();
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([shell(&format!("touch {}", ws.join("marker").display())), {"text": "done"}]),
    );
    acp::harness_down_refuses_the_prompt(&world, AcpAgent::CodexAcp, &llm).await;
}
