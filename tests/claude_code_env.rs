//! Credentials in the agent's environment, on the real Claude Code CLI: the user exported a
//! `GITHUB_TOKEN` and an npm token for their own tools, and a deploy setting that holds a
//! GitHub token under an innocent name; the model runs `env`. On the floor none of the three
//! values reaches the model (its tool result): the two the default policy declares as
//! credentials are placeholders, the third is removed; the run names the variables it
//! removed or replaced (never their values), Claude's own key stays, and `--keep-env` leaves
//! one in place. With
//! `--floor off` all three reach the model, which shows the test can fail.

use ahp_wrap_testkit::claude_code::{bash, run, FakeApi, World};

use serde_json::json;

const GITHUB: &str = "ghp_TESTONLY0123456789abcdefghijklmnopqr";
const NPM: &str = "npm-token-value-for-the-test";
const DEPLOY: &str = "github_pat_TESTONLY_0123456789abcdefghij";

/// Runs `env` through the model under `wrapper`; returns what the model got back, and the
/// wrapper's stderr followed by its audit log.
fn env_seen(wrapper: &[&str]) -> (String, String) {
    let world = World::new();
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash("env"), {"text": "Listed."}]),
    );
    let audit = world.dir.path().join("audit.jsonl");
    let wrapper: Vec<&str> = wrapper
        .iter()
        .copied()
        .chain(["--audit-log", audit.to_str().unwrap()])
        .collect();
    let wrapper = wrapper.as_slice();
    let mut cmd = world.command(
        &api,
        Some(wrapper),
        &["-p", "show the environment", "--allowedTools", "Bash"],
    );
    cmd.env("GITHUB_TOKEN", GITHUB)
        .env("NPM_TOKEN", NPM)
        .env("DEPLOY_SETTING", DEPLOY);
    let r = run(cmd);
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(results.len() == 1, "the tool result reaches the model");
    (
        results[0]["content"].to_string(),
        String::from_utf8_lossy(&r.output.stderr).into_owned()
            + &std::fs::read_to_string(&audit).unwrap_or_default(),
    )
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn exported_tokens_never_reach_the_model_on_the_floor() {
    let (seen, stderr) = env_seen(&["--summary", "never"]);
    for value in [GITHUB, NPM, DEPLOY] {
        assert!(!seen.contains(value), "{value} reached the model: {seen}");
        assert!(!stderr.contains(value), "a value was said: {stderr}");
    }
    assert!(
        seen.contains("ANTHROPIC_API_KEY"),
        "Claude's own key: {seen}"
    );
    // The two tokens the default policy declares are placeholders (used on their hosts
    // only); the deploy setting is removed.
    assert!(
        stderr.contains("removed from the agent's environment: DEPLOY_SETTING (")
            && stderr.contains("as placeholders, their values put on its HTTPS requests to their hosts only: GITHUB_TOKEN (to github.com"),
        "the run names what it removed and replaced: {stderr}"
    );
    assert!(
        stderr.contains(r#""removed_env":["DEPLOY_SETTING"]"#)
            && stderr.contains(r#""placeholder_env":["GITHUB_TOKEN","NPM_TOKEN"]"#),
        "the audit log names them: {stderr}"
    );
    assert!(
        seen.contains("GITHUB_TOKEN=ghp_"),
        "the model sees a placeholder shaped like the token: {seen}"
    );

    let (seen, _) = env_seen(&["--summary", "never", "--keep-env", "NPM_*"]);
    assert!(seen.contains(NPM) && !seen.contains(GITHUB), "{seen}");

    let (seen, _) = env_seen(&["--summary", "never", "--floor", "off"]);
    for value in [GITHUB, NPM, DEPLOY] {
        assert!(
            seen.contains(value),
            "without the floor {value} reaches the model: {seen}"
        );
    }
}
