//! Claude Code over ACP: Zed's adapter `claude-agent-acp` (pinned, tests/claude-acp/setup.sh),
//! which runs the Claude Code its Agent SDK bundles, driven by the scripted fake Anthropic
//! server, behind `ahp-wrap --framework acp` as an editor's configuration would run it, with
//! the editor built on the official ACP client library (tests/acp/setup.sh). Each point is
//! proven by what is on disk, what the editor saw, and the audit log.
//!
//! Like codex-acp, claude-agent-acp 0.23 never calls the editor's `fs/*` or `terminal/*`
//! methods: Claude Code writes its files and runs its commands itself, after a
//! `session/request_permission` (kind `edit` for Write and Edit, `execute` for Bash) in its
//! default permission mode. Unlike codex-acp, a rejected call does not end the turn: Claude
//! reads the refusal and goes on, so each prompt here ends `end_turn`.

use ahp_wrap_testkit::acp;
use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::claude_code::{write, FakeApi};

use std::path::Path;

use acp::{AcpAgent, FOUR_PROMPTS};
use agents::TestDir;
use serde_json::{json, Value};

fn world() -> TestDir {
    TestDir::new(
        "ahp-acp-claude-",
        Some(Path::new(env!("CARGO_TARGET_TMPDIR"))),
        &["home/.claude"],
    )
}

/// A scripted turn in which Claude runs one command with its Bash tool.
fn bash(command: &str) -> Value {
    json!({"tool_use": {"name": "Bash", "input": {"command": command, "description": "a test step"}}})
}

fn text(t: &str) -> Value {
    json!({"text": t})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "claude-acp"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or claude-acp setup"
)]
async fn a_blocked_write_or_command_never_happens_and_the_editor_still_asks_for_the_rest() {
    let world = world();
    let ws = world.ws().canonicalize().unwrap();
    // Each call, refused or not, is followed by the model's closing words for that prompt.
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            write(&ws.join("secret.txt"), "hello\n"),
            text("Could not write it."),
            write(&ws.join("notes.txt"), "hello\n"),
            text("Wrote the notes."),
            bash(&format!("touch {}", ws.join("secret-marker").display())),
            text("Could not touch it."),
            bash(&format!("touch {}", ws.join("allowed-marker").display())),
            text("All done."),
        ]),
    );
    let e = acp::under_the_policy(&world, AcpAgent::ClaudeAcp, &api, "allow", &FOUR_PROMPTS).await;
    let log = format!("the editor saw: {:#?}", e.0);

    acp::assert_blocked_and_allowed(&ws, "hello\n", &log);
    e.assert_asked_only_about_the_allowed(&log);
    // Claude read that the blocked two were refused (ACP's reject carries no reason to the
    // agent).
    let refusals: Vec<String> = api
        .tool_results()
        .iter()
        .map(|r| r.to_string())
        .filter(|r| r.contains("refused permission"))
        .collect();
    assert_eq!(refusals.len(), 2, "{:#?}", api.tool_results());
    e.assert_no_file_or_terminal_calls(&log);
    assert_eq!(e.stops(), ["end_turn"; 4], "{log}");

    // The audit log: both blocks decided by the rule on the permission requests.
    assert_eq!(
        acp::blocked_tools(&world),
        ["acp__edit", "acp__execute"],
        "{:#?}",
        acp::audit(&world)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "claude-acp"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or claude-acp setup"
)]
async fn an_explicit_allow_answers_for_the_editor_and_no_opinion_leaves_it_to_the_person() {
    let world = world();
    let ws = world.ws().canonicalize().unwrap();
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash(&format!("touch {}", ws.join("explicit-marker").display())),
            text("Done."),
            bash(&format!("touch {}", ws.join("asked-marker").display())),
            text("Done."),
        ]),
    );
    acp::explicit_allow_then_a_person_who_says_no(&world, AcpAgent::ClaudeAcp, &api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "acp", skip_e2e = "claude-acp"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the acp or claude-acp setup"
)]
async fn with_the_harness_down_the_prompt_is_refused_and_nothing_runs() {
    let world = world();
    let ws = world.ws().canonicalize().unwrap();
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash(&format!("touch {}", ws.join("marker").display())),
            text("done")
        ]),
    );
    acp::harness_down_refuses_the_prompt(&world, AcpAgent::ClaudeAcp, &api).await;
}
