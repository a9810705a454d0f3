//! One policy governs every framework: the same policy file gives the same decision for the
//! same shell commands in Claude Code, Codex, Gemini CLI and OpenCode (the real CLIs), shown
//! by what ran on disk and what did not.

use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::claude_code as claude;
use ahp_wrap_testkit::codex;
use ahp_wrap_testkit::llm_agents as llm;

use std::path::{Path, PathBuf};

use serde_json::json;

/// Blocks `touch` of anything named `forbidden-*`, wherever the agent runs it from, and
/// says nothing about the rest.
const POLICY: &str = r#"
version = 1

[[rule]]
id = "no-forbidden-files"
decision = "block"
reason = "the cross-framework policy forbids creating forbidden-* files"
match = ["touch forbidden-x", "cd /tmp && touch ./forbidden-1 allowed", "bash -c 'touch forbidden-2'"]
no_match = ["touch allowed-x", "echo touch forbidden-x"]
command.program = ["touch"]
command.args_any = ["**/forbidden-*", "forbidden-*"]
"#;

fn policy_file(dir: &Path) -> PathBuf {
    let p = dir.join("policy.toml");
    std::fs::write(&p, POLICY).unwrap();
    p
}

/// The two commands every agent is asked to run, and whether each must have run.
fn commands(ws: &Path) -> [(String, PathBuf, bool); 2] {
    let forbidden = ws.join("forbidden-marker");
    let allowed = ws.join("allowed-marker");
    [
        (format!("touch {}", forbidden.display()), forbidden, false),
        (format!("touch {}", allowed.display()), allowed, true),
    ]
}

fn check(agent: &str, ws: &Path, out: &str) {
    for (cmd, marker, should_run) in commands(ws) {
        assert_eq!(
            marker.exists(),
            should_run,
            "{agent}: `{cmd}` {} have run\n{out}",
            if should_run { "should" } else { "should not" }
        );
    }
}

#[test]
fn the_policy_file_is_valid_and_its_examples_hold() {
    let dir = tempfile::tempdir().unwrap();
    let out = agents::run_captured(
        std::process::Command::new(ahp_wrap_testkit::wrap_bin())
            .args(["policy", "check"])
            .arg(policy_file(dir.path())),
        std::time::Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn claude_code_follows_the_policy() {
    let world = claude::World::new();
    let policy = policy_file(world.dir.path());
    let [(block, ..), (allow, ..)] = commands(&world.ws());
    let api = claude::FakeApi::start(
        world.dir.path(),
        "api",
        json!([claude::bash(&block), claude::bash(&allow), {"text": "done"}]),
    );
    let r = claude::run(world.command(
        &api,
        Some(&["--policy", policy.to_str().unwrap()]),
        &["-p", "make the markers", "--allowedTools", "Bash"],
    ));
    let results = api.tool_results();
    let first = results.first().map(|r| r.to_string()).unwrap_or_default();
    assert!(
        first.contains("forbids creating forbidden-"),
        "the model got the reason: {first}"
    );
    check("claude", &world.ws(), &r.stdout());
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn codex_follows_the_policy() {
    let world = codex::World::new();
    let policy = policy_file(world.dir.path());
    let [(block, ..), (allow, ..)] = commands(&world.ws());
    let api = codex::FakeApi::start(
        world.dir.path(),
        "api",
        json!([codex::shell(&block), codex::shell(&allow), {"text": "done"}]),
    );
    let r = codex::run(world.command(
        &api,
        Some(&["--policy", policy.to_str().unwrap()]),
        &[],
        "make the markers",
    ));
    let outputs = api.tool_outputs();
    assert!(
        outputs
            .first()
            .is_some_and(|o| o.contains("forbids creating forbidden-")),
        "the model got the reason: {outputs:?}"
    );
    check("codex", &world.ws(), &r.stdout());
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn gemini_cli_follows_the_policy() {
    let world = llm::World::new(llm::Agent::Gemini);
    let policy = policy_file(world.dir.path());
    let [(block, ..), (allow, ..)] = commands(&world.ws());
    let fake = llm::FakeLlm::start(
        world.dir.path(),
        json!([llm::shell(&block), llm::shell(&allow), {"text": "done"}]),
    );
    let r = world.wrapped(
        &fake,
        &["--policy", policy.to_str().unwrap()],
        "make the markers",
        &[],
    );
    let results = fake.tool_results();
    let first = results.first().map(|r| r.to_string()).unwrap_or_default();
    assert!(
        first.contains("forbids creating forbidden-"),
        "the model got the reason: {first}"
    );
    check("gemini", &world.ws(), &r.stdout());
}

#[test]
#[cfg_attr(
    skip_e2e = "opencode",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the opencode setup"
)]
fn opencode_follows_the_policy() {
    let world = llm::World::new(llm::Agent::OpenCode);
    let policy = policy_file(world.dir.path());
    let [(block, ..), (allow, ..)] = commands(&world.ws());
    let fake = llm::FakeLlm::start(
        world.dir.path(),
        json!([
            llm::shell_tool("bash", &block),
            llm::shell_tool("bash", &allow),
            {"text": "done"}
        ]),
    );
    let r = world.wrapped(
        &fake,
        &["--policy", policy.to_str().unwrap()],
        "make the markers",
        &[],
    );
    let results = fake.tool_results();
    let first = results.first().map(|r| r.to_string()).unwrap_or_default();
    assert!(
        first.contains("forbids creating forbidden-"),
        "the model got the reason: {first}"
    );
    check("opencode", &world.ws(), &r.stdout());
}
