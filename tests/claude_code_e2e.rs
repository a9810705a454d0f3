//! End to end on the real Claude Code CLI (the version pinned in tests/claude-code/VERSION,
//! installed by tests/claude-code/setup.sh), driven by a scripted fake Anthropic API on
//! 127.0.0.1 and a scripted stdio harness that the test controls. Each test proves its
//! point by what happens on disk and by what the model server receives.

use ahp_wrap_testkit::claude_code as support;

use serde_json::{json, Value};
use support::{bash, run, FakeApi, World};

const PROMPT: &str = "please do the task";

/// `ahp-wrap --harness <h> -- claude -p PROMPT <extra>`, run to the end.
fn wrapped(world: &World, api: &FakeApi, harness: &str, extra: &[&str]) -> support::Run {
    wrapped_with(world, api, &["--harness", harness], extra)
}

fn wrapped_with(world: &World, api: &FakeApi, wrapper: &[&str], extra: &[&str]) -> support::Run {
    let mut claude = vec!["-p", PROMPT];
    claude.extend_from_slice(extra);
    run(world.command(api, Some(wrapper), &claude))
}

fn text(v: &Value) -> String {
    v.to_string()
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_blocked_command_never_runs_and_the_model_gets_the_reason() {
    let world = World::new();
    let marker = world.ws().join("blocked-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {} && echo RAN", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "contains": "blocked-marker",
         "decision": {"decision": "block", "reason": "no markers today (rule 7)"}}
    ]}));
    let r = wrapped(&world, &api, &harness, &["--allowedTools", "Bash"]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(!marker.exists(), "the blocked command ran");
    let results = api.tool_results();
    r.check(results.len() == 1, "one tool result should reach the model");
    r.check(
        results[0]["is_error"] == true,
        "the tool result is an error",
    );
    r.check(
        text(&results[0]).contains("no markers today (rule 7)"),
        &format!("the model did not get the reason: {}", results[0]),
    );
    r.check(
        !text(&results[0]).contains("RAN"),
        "the command's output leaked",
    );

    // What the harness saw: Claude's tool call as an AHP pre_action, with its context.
    let pre = world.harness_saw("pre_action");
    r.check(pre.len() == 1, "one pre_action");
    let p = &pre[0]["payload"];
    assert_eq!(p["action_type"], "tool_call");
    assert_eq!(p["tool_name"], "Bash");
    assert!(text(&p["arguments"]["command"]).contains("blocked-marker"));
    assert!(p["tool_use_id"].is_string());
    let ws = world.ws().canonicalize().unwrap();
    assert_eq!(p["context"]["working_directory"], ws.display().to_string());
    assert!(p["context"]["permission_mode"].is_string());
    assert!(p["context"]["transcript_path"].is_string());
    // Claude's session id travels next to ours.
    let claude_session = &pre[0]["metadata"]["framework_session_id"];
    assert!(claude_session.is_string(), "{}", pre[0]);
    assert_ne!(claude_session, &pre[0]["session_id"]);
    let starts = world.harness_saw("session_start");
    assert!(starts
        .iter()
        .any(|s| s["payload"]["framework_session_id"] == *claude_session));
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn an_explicitly_allowed_command_runs_and_its_output_reaches_the_model() {
    let world = World::new();
    let marker = world.ws().join("allowed-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {} && echo OUTPUT-4471", marker.display())), {"text": "All done."}]),
    );
    // No --allowedTools: the command runs only because the harness explicitly allowed it.
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "decision": {"decision": "allow", "metadata": {"explicit": true}}}
    ]}));
    let r = wrapped(&world, &api, &harness, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(marker.exists(), "the allowed command did not run");
    let results = api.tool_results();
    r.check(
        results.len() == 1 && text(&results[0]).contains("OUTPUT-4471"),
        &format!("the output did not reach the model: {results:?}"),
    );
    // And the harness heard how it went.
    let post = world.harness_saw("post_action");
    r.check(
        post.len() == 1 && text(&post[0]["payload"]["result"]).contains("OUTPUT-4471"),
        &format!("post_action: {post:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn no_opinion_leaves_claudes_own_permission_rules_in_charge() {
    let world = World::new();
    let marker = world.ws().join("unapproved-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    // A plain allow is "no objection": it must not approve what Claude would not.
    let harness = world.harness(json!({"default": {"decision": "allow"}}));
    let r = wrapped(&world, &api, &harness, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        !marker.exists(),
        "a no-opinion allow overrode Claude's permission check",
    );
    r.check(world.harness_saw("pre_action").len() == 1, "one pre_action");
    let results = api.tool_results();
    r.check(
        results.len() == 1 && text(&results[0]).contains("approval"),
        &format!("Claude's own permission denial should reach the model: {results:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_modified_command_is_the_one_that_runs() {
    let world = World::new();
    let ws = world.ws();
    let (a1, b1, a2, b2) = (
        ws.join("orig-1"),
        ws.join("new-1"),
        ws.join("orig-2"),
        ws.join("new-2"),
    );
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash(&format!("touch {}", a1.display())),
            bash(&format!("touch {}", a2.display())),
            {"text": "All done."}
        ]),
    );
    // Both shapes a harness may send: a whole pre_action payload, or just the arguments.
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "contains": "orig-1", "decision": {"decision": "modify",
         "modified_payload": {"action_type": "tool_call", "tool_name": "Bash",
           "arguments": {"command": format!("touch {} && echo MODIFIED-1", b1.display())}}}},
        {"event": "pre_action", "contains": "orig-2", "decision": {"decision": "modify",
         "modified_payload": {"command": format!("touch {} && echo MODIFIED-2", b2.display())}}}
    ]}));
    let r = wrapped(&world, &api, &harness, &["--allowedTools", "Bash"]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        b1.exists() && b2.exists(),
        "the modified commands did not run",
    );
    r.check(!a1.exists() && !a2.exists(), "the original commands ran");
    let results = text(&json!(api.tool_results()));
    r.check(
        results.contains("MODIFIED-1") && results.contains("MODIFIED-2"),
        &format!("the model did not get the modified commands' output: {results}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_blocked_prompt_never_reaches_the_model_server() {
    let world = World::new();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "I saw it."}]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "contains": "please do",
         "decision": {"decision": "block", "reason": "prompt refused (rule P)"}}
    ]}));
    let r = wrapped(&world, &api, &harness, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let messages: Vec<Value> = api
        .requests()
        .into_iter()
        .filter(|q| q["path"].as_str().unwrap_or("").starts_with("/v1/messages"))
        .collect();
    r.check(
        messages.is_empty(),
        &format!("the prompt reached the server: {messages:?}"),
    );
    r.check(
        r.stdout().contains("prompt refused (rule P)"),
        "the user is not told why",
    );
    let pre = world.harness_saw("pre_prompt");
    r.check(
        pre.len() == 1 && pre[0]["payload"]["prompt"] == PROMPT,
        &format!("pre_prompt: {pre:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn context_from_the_harness_reaches_the_model() {
    let world = World::new();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "Noted."}]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "decision": {"decision": "allow",
         "additional_context": "CTX-5521: the build uses make",
         "injected_context": {"facts": [{"content": "FACT-9034", "source": "kb", "confidence": 1.0}]}}}
    ]}));
    let r = wrapped(&world, &api, &harness, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let bodies = text(&json!(api.main_bodies()));
    r.check(
        bodies.contains("CTX-5521: the build uses make") && bodies.contains("FACT-9034"),
        "the harness's context did not reach the model",
    );
}

/// The deadline given to the wrapper in the fail-closed tests.
const DEADLINE_MS: u64 = 1500;

fn fail_closed_run(rule: Value, name: &str) {
    let world = World::new();
    let marker = world.ws().join(format!("{name}-marker"));
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({ "rules": [rule] }));
    let timeout = DEADLINE_MS.to_string();
    let r = wrapped_with(
        &world,
        &api,
        &["--harness", &harness, "--timeout", &timeout],
        &["--allowedTools", "Bash"],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(!marker.exists(), "the command ran without a decision");
    let results = api.tool_results();
    r.check(
        results.len() == 1
            && text(&results[0]).contains("ahp-wrap blocked this")
            && text(&results[0]).contains("fail mode: closed"),
        &format!("the model was not told why: {results:?}"),
    );
    r.check(
        world.harness_saw("pre_action").len() == 1,
        "the harness never got the pre_action",
    );
    // One deadline for the tool call, plus Claude's own start-up and turns.
    r.check(
        r.elapsed.as_millis() < u128::from(DEADLINE_MS) + 15_000,
        "the run took too long",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_harness_that_hangs_gets_the_command_blocked_within_the_deadline() {
    fail_closed_run(json!({"event": "pre_action", "hang": true}), "hang");
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    fail_closed_run(json!({"event": "pre_action", "exit": true}), "down");
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_harness_that_never_starts_blocks_everything() {
    let world = World::new();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "hello"}]));
    let r = wrapped_with(
        &world,
        &api,
        &[
            "--harness",
            "stdio:/nonexistent/harness",
            "--timeout",
            "1000",
        ],
        &["--allowedTools", "Bash"],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        api.requests().iter().all(|q| q["kind"] != "main"),
        "the prompt reached the model without a decision",
    );
    r.check(
        r.stdout().contains("ahp-wrap blocked this"),
        "no reason shown",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn hooks_the_user_passed_still_run_and_their_files_are_untouched() {
    let world = World::new();
    let ws = world.ws();
    let marker = ws.join("tool-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    // The user's own --settings (a file) and user settings with hooks of their own.
    let hook = |name: &str| {
        json!([{"matcher": "*", "hooks": [{"type": "command",
            "command": format!("touch {}", ws.join(name).display())}]}])
    };
    let user_cli = world.dir.path().join("my-settings.json");
    let cli_text = json!({"hooks": {"PreToolUse": hook("cli-pre-hook"),
                                    "UserPromptSubmit": hook("cli-prompt-hook")}})
    .to_string();
    std::fs::write(&user_cli, &cli_text).unwrap();
    let user_file = world.config_dir().join("settings.json");
    let file_text = json!({"hooks": {"PostToolUse": hook("file-post-hook")}}).to_string();
    std::fs::write(&user_file, &file_text).unwrap();

    let harness = world.harness(json!({}));
    let cli = user_cli.display().to_string();
    let r = wrapped(
        &world,
        &api,
        &harness,
        &["--allowedTools", "Bash", "--settings", &cli],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(marker.exists(), "the tool did not run");
    for name in ["cli-pre-hook", "cli-prompt-hook", "file-post-hook"] {
        r.check(
            ws.join(name).exists(),
            &format!("the user's {name} did not run"),
        );
    }
    // Ours ran too, next to theirs.
    r.check(
        world.harness_saw("pre_action").len() == 1 && world.harness_saw("post_action").len() == 1,
        "our hooks did not run",
    );
    assert_eq!(std::fs::read_to_string(&user_cli).unwrap(), cli_text);
    assert_eq!(std::fs::read_to_string(&user_file).unwrap(), file_text);
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn disable_all_hooks_cannot_switch_supervision_off() {
    let world = World::new();
    let marker = world.ws().join("unsupervised-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    std::fs::write(
        world.config_dir().join("settings.json"),
        r#"{"disableAllHooks": true}"#,
    )
    .unwrap();
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "decision": {"decision": "block", "reason": "supervised"}}
    ]}));
    let r = wrapped(&world, &api, &harness, &["--allowedTools", "Bash"]);
    r.check(!marker.exists(), "disableAllHooks turned supervision off");
    r.check(
        String::from_utf8_lossy(&r.output.stderr).contains("disableAllHooks"),
        "the user is not warned that their hooks run",
    );
}

/// `claude -p` with and without the wrapper: the same stdout and exit code.
fn same_as_unwrapped(
    claude: &[&str],
    turns: Value,
    wrapper: &[&str],
    world: &World,
    name: &str,
) -> support::Run {
    let plain_api = FakeApi::start(world.dir.path(), &format!("{name}-plain"), turns.clone());
    let plain = run(world.command(&plain_api, None, claude));
    let wrapped_api = FakeApi::start(world.dir.path(), &format!("{name}-wrapped"), turns);
    let wrapped = run(world.command(&wrapped_api, Some(wrapper), claude));
    assert_eq!(
        (wrapped.output.status.code(), wrapped.stdout()),
        (plain.output.status.code(), plain.stdout()),
        "\n=== unwrapped\n{plain}\n=== wrapped\n{wrapped}"
    );
    plain
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn an_allowed_run_has_the_same_stdout_and_exit_code_as_without_the_wrapper() {
    let world = World::new();
    let ws = world.ws();
    let turns = json!([
        bash(&format!("echo same > {}/same.txt && cat {}/same.txt", ws.display(), ws.display())),
        {"text": "All done: same."}
    ]);
    let claude = ["-p", PROMPT, "--allowedTools", "Bash"];
    // The embedded stand-in, and a harness with no opinion.
    let plain = same_as_unwrapped(&claude, turns.clone(), &[], &world, "embedded");
    plain.check(
        plain.stdout().contains("All done: same."),
        "unexpected output",
    );
    let harness = world.harness(json!({}));
    same_as_unwrapped(&claude, turns, &["--harness", &harness], &world, "harness");
    assert!(!world.harness_saw("pre_action").is_empty());
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_failing_run_has_the_same_exit_code_as_without_the_wrapper() {
    let world = World::new();
    // One turn allowed, but the model wants a tool call: Claude stops with an error.
    let turns = json!([bash("echo one"), bash("echo two"), {"text": "never"}]);
    let claude = ["-p", PROMPT, "--allowedTools", "Bash", "--max-turns", "1"];
    let plain = same_as_unwrapped(&claude, turns, &[], &world, "max-turns");
    plain.check(
        plain.output.status.code() != Some(0),
        "claude should fail here",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn claudes_permission_request_goes_to_the_harness_as_a_confirmation() {
    let world = World::new();
    let (yes, no) = (world.ws().join("approved"), world.ws().join("rejected"));
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash(&format!("touch {}", yes.display())),
            bash(&format!("touch {}", no.display())),
            {"text": "All done."}
        ]),
    );
    // No opinion on the tool call, so Claude asks for permission: the harness answers that.
    let harness = world.harness(json!({"rules": [
        {"event": "confirmation", "contains": "approved", "decision": {"decision": "approve"}},
        {"event": "confirmation", "contains": "rejected",
         "decision": {"decision": "reject", "reason": "not this one (rule C)"}}
    ]}));
    let r = wrapped(&world, &api, &harness, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(yes.exists(), "the approved command did not run");
    r.check(!no.exists(), "the rejected command ran");
    let results = api.tool_results();
    r.check(
        results.len() == 2 && text(&results[1]).contains("not this one (rule C)"),
        &format!("the model did not get the rejection: {results:?}"),
    );
    let confirmations = world.harness_saw("confirmation");
    r.check(confirmations.len() == 2, "two confirmations");
    assert_eq!(confirmations[0]["payload"]["tool_name"], "Bash");
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn an_escalation_in_print_mode_follows_the_fail_mode() {
    let world = World::new();
    let marker = world.ws().join("escalated-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "decision": {"decision": "escalate", "reason": "ask the on-call"}}
    ]}));
    let r = wrapped(&world, &api, &harness, &["--allowedTools", "Bash"]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        !marker.exists(),
        "an escalated command ran with nobody to ask",
    );
    let results = api.tool_results();
    r.check(
        results.len() == 1
            && text(&results[0]).contains("ask the on-call")
            && text(&results[0]).contains("fail mode: closed"),
        &format!("the model was not told why: {results:?}"),
    );
}
