//! End to end on the real droid CLI (Factory's agent, the version pinned in
//! tests/droid/VERSION, installed by tests/droid/setup.sh), driven by a scripted fake OpenAI
//! Chat Completions server on 127.0.0.1 as the user's own custom model, and a scripted stdio
//! harness. droid's shim is a manifest only (shims/droid/shim.toml): no Rust.
//!
//! `droid exec` does not fire its UserPromptSubmit hook (0.225.2), so no test here blocks a
//! prompt: the shim's README says so.

use ahp_wrap_testkit::llm_agents as support;

use serde_json::{json, Value};
use support::{Agent, FakeLlm, World};

const PROMPT: &str = "please do the task";

/// A scripted turn in which the model runs one command with droid's shell tool.
fn execute(command: &str) -> Value {
    json!({"tool_calls": [{"name": "Execute", "args": {
        "command": command, "summary": "test step",
        "riskLevel": "low", "riskLevelReason": "a test"}}]})
}

#[test]
#[cfg_attr(
    skip_e2e = "droid",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the droid setup"
)]
fn a_blocked_command_never_runs_an_allowed_one_does_and_the_users_own_settings_load() {
    let world = World::new(Agent::Droid);
    let (r, llm) = support::one_blocked_one_allowed(&world, execute, PROMPT);
    support::check_reason_then_output(&r, &llm);
    let pre = world.harness_saw("pre_action");
    r.check(pre.len() == 2, "two pre_actions");
    assert_eq!(pre[0]["payload"]["tool_name"], "Execute");
    assert_eq!(pre[0]["metadata"]["framework"], "droid");
    assert!(pre[0]["payload"]["context"]["working_directory"].is_string());
    let post = world.harness_saw("post_action");
    r.check(
        post.len() == 1
            && post[0]["payload"]["result"]
                .to_string()
                .contains("exited with code 0"),
        &format!("post_action: {post:?}"),
    );
    r.check(
        world.harness_saw("session_start").len() == 2,
        "the wrapper's session_start and droid's own",
    );
    // The user's model answered, and the user's own hook ran beside ours, on each call.
    let user_hook =
        std::fs::read_to_string(world.dir.path().join("home/user-hook-ran")).unwrap_or_default();
    r.check(
        user_hook.lines().count() >= 1,
        "the user's own PreToolUse hook never ran",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "droid",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the droid setup"
)]
fn a_modified_command_runs_in_place_of_the_models() {
    let world = World::new(Agent::Droid);
    let (r, _, new) = support::modified_call(&world, execute, PROMPT, |new| {
        json!([{"event": "pre_action", "decision": {"decision": "modify",
         "modified_payload": {"arguments": {"command": format!("touch {}", new.display()),
            "summary": "modified", "riskLevel": "low", "riskLevelReason": "a test"}}}}])
    });
    r.check(new.exists(), "the modified command did not run");
}

#[test]
#[cfg_attr(
    skip_e2e = "droid",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the droid setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    let world = World::new(Agent::Droid);
    let (r, llm) = support::harness_goes_down(&world, execute, PROMPT);
    let results = llm.tool_results();
    r.check(
        results.len() == 1 && results[0].to_string().contains("fail mode: closed"),
        &format!("the model was not told why: {results:?}"),
    );
}

/// The hooks a wrapped run registers stay in droid's settings while the wrapper is gone (a
/// run killed, its runtime settings file kept): a hook call that finds no wrapper blocks.
#[test]
#[cfg_attr(
    skip_e2e = "droid",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the droid setup"
)]
fn a_hook_whose_wrapper_is_gone_blocks() {
    let world = World::new(Agent::Droid);
    let marker = world.ws().join("orphan-marker");
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([execute(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let settings = world.dir.path().join("left-behind.json");
    let command = format!(
        "AHP_WRAP_RUN=0123456789abcdef exec '{}' hook droid PreToolUse",
        ahp_wrap_testkit::wrap_bin().display()
    );
    std::fs::write(
        &settings,
        json!({"hooks": {"PreToolUse": [{"matcher": "*",
            "hooks": [{"type": "command", "command": command, "timeout": 20}]}]}})
        .to_string(),
    )
    .unwrap();
    let r = world.unwrapped(
        &llm,
        PROMPT,
        &[("FACTORY_RUNTIME_SETTINGS_PATH", &settings)],
    );
    r.check(!marker.exists(), "the command ran with no wrapper to ask");
    let results = llm.tool_results();
    r.check(
        results.len() == 1 && results[0].to_string().contains("the hook fails closed"),
        &format!("the model was not told why: {results:?}"),
    );
}
