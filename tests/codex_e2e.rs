//! End to end on the real Codex CLI (the version pinned in tests/codex/VERSION, installed
//! by tests/codex/setup.sh), driven by a scripted fake OpenAI Responses API on 127.0.0.1
//! and a scripted stdio harness that the test controls. Each test proves its point by what
//! happens on disk and by what the model server receives.
//!
//! Every test also checks that the harness heard from Codex's hooks: if Codex ever changes
//! how it trusts hooks (the hash ahp-wrap computes), our hooks are skipped silently, and
//! these tests fail.

use ahp_wrap_testkit::codex as support;

use serde_json::{json, Value};
use support::{run, shell, FakeApi, World};

const PROMPT: &str = "please do the task";

/// `ahp-wrap <wrapper> -- codex exec … <extra> PROMPT`, run to the end.
fn wrapped(world: &World, api: &FakeApi, wrapper: &[&str], extra: &[&str]) -> support::Run {
    run(world.command(api, Some(wrapper), extra, PROMPT))
}

fn text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap()
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn a_blocked_command_never_runs_and_the_model_gets_the_reason() {
    let world = World::new();
    let marker = world.ws().join("blocked-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(&format!("touch {} && echo RAN", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "contains": "blocked-marker",
         "decision": {"decision": "block", "reason": "no markers today (rule 7)"}}
    ]}));
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(!marker.exists(), "the blocked command ran");
    let outputs = api.tool_outputs();
    r.check(
        outputs.len() == 1 && outputs[0].contains("no markers today (rule 7)"),
        &format!("the model did not get the reason: {outputs:?}"),
    );
    r.check(!outputs[0].contains("\nRAN"), "the command's output leaked");
    r.check(
        world.hook_saw("post_action", "PostToolUse").is_empty(),
        "a blocked command has no post_action",
    );

    // What the harness saw: Codex's tool call as an AHP pre_action, with its context.
    let pre = world.hook_saw("pre_action", "PreToolUse");
    r.check(
        pre.len() == 1,
        "one pre_action from Codex's PreToolUse hook",
    );
    let p = &pre[0]["payload"];
    assert_eq!(p["action_type"], "tool_call");
    assert_eq!(p["tool_name"], "Bash");
    assert!(text(&p["arguments"]["command"]).contains("blocked-marker"));
    assert!(p["tool_use_id"].as_str().unwrap().starts_with("call_"));
    let ws = world.ws().canonicalize().unwrap();
    assert_eq!(p["context"]["working_directory"], ws.display().to_string());
    assert_eq!(p["context"]["permission_mode"], "bypassPermissions");
    // Codex's session id travels next to ours, and every mapped hook fired.
    let codex_session = &pre[0]["metadata"]["framework_session_id"];
    assert!(codex_session.is_string(), "{}", pre[0]);
    for (event_type, hook) in [
        ("session_start", "SessionStart"),
        ("pre_prompt", "UserPromptSubmit"),
        ("post_response", "Stop"),
        ("session_end", "SessionEnd"),
    ] {
        let seen = world.hook_saw(event_type, hook);
        r.check(
            seen.len() == 1 && seen[0]["metadata"]["framework_session_id"] == *codex_session,
            &format!("{hook} did not reach the harness as {event_type}: {seen:?}"),
        );
    }
    r.check(
        !r.stderr().contains("ahp-wrap: WARNING"),
        "a supervised run should not warn",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn an_allowed_command_runs_and_its_output_reaches_the_model() {
    let world = World::new();
    let marker = world.ws().join("allowed-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(&format!("touch {} && echo OUTPUT-4471", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"default": {"decision": "allow"}}));
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(marker.exists(), "the allowed command did not run");
    let outputs = api.tool_outputs();
    r.check(
        outputs.len() == 1 && outputs[0].contains("OUTPUT-4471"),
        &format!("the output did not reach the model: {outputs:?}"),
    );
    r.check(
        r.stdout().contains("All done."),
        "codex's answer is on stdout",
    );
    // And the harness heard how it went.
    let post = world.hook_saw("post_action", "PostToolUse");
    r.check(
        post.len() == 1 && text(&post[0]["payload"]["result"]).contains("OUTPUT-4471"),
        &format!("post_action: {post:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
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
            shell(&format!("touch {}", a1.display())),
            shell(&format!("touch {}", a2.display())),
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
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        b1.exists() && b2.exists(),
        "the modified commands did not run",
    );
    r.check(!a1.exists() && !a2.exists(), "the original commands ran");
    let outputs = text(&api.tool_outputs());
    r.check(
        outputs.contains("MODIFIED-1") && outputs.contains("MODIFIED-2"),
        &format!("the model did not get the modified commands' output: {outputs}"),
    );
    // Codex reports the command it actually ran.
    let post = world.hook_saw("post_action", "PostToolUse");
    r.check(
        post.len() == 2 && text(&post[0]["payload"]["arguments"]).contains("MODIFIED-1"),
        &format!("post_action: {post:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn a_blocked_prompt_never_reaches_the_model_server() {
    let world = World::new();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "I saw it."}]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "contains": "please do",
         "decision": {"decision": "block", "reason": "prompt refused (rule P)"}}
    ]}));
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let posts: Vec<Value> = api
        .requests()
        .into_iter()
        .filter(|q| q["method"] == "POST")
        .collect();
    r.check(
        posts.is_empty(),
        &format!("the prompt reached the server: {posts:?}"),
    );
    let pre = world.hook_saw("pre_prompt", "UserPromptSubmit");
    r.check(
        pre.len() == 1 && pre[0]["payload"]["prompt"] == PROMPT,
        &format!("pre_prompt: {pre:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn context_from_the_harness_reaches_the_model() {
    let world = World::new();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "Noted."}]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "decision": {"decision": "allow",
         "additional_context": "CTX-5521: the build uses make",
         "injected_context": {"facts": [{"content": "FACT-9034", "source": "kb", "confidence": 1.0}]}}}
    ]}));
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let bodies = text(&api.main_bodies());
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
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({ "rules": [rule] }));
    let timeout = DEADLINE_MS.to_string();
    let r = wrapped(
        &world,
        &api,
        &["--harness", &harness, "--timeout", &timeout],
        &[],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(!marker.exists(), "the command ran without a decision");
    let outputs = api.tool_outputs();
    r.check(
        outputs.len() == 1
            && outputs[0].contains("ahp-wrap blocked this")
            && outputs[0].contains("fail mode: closed"),
        &format!("the model was not told why: {outputs:?}"),
    );
    r.check(
        world.hook_saw("pre_action", "PreToolUse").len() == 1,
        "the harness never got the pre_action",
    );
    // One deadline for the tool call, plus Codex's own start-up and turns.
    r.check(
        r.elapsed.as_millis() < u128::from(DEADLINE_MS) + 10_000,
        "the run took too long",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    fail_closed_run(json!({"event": "pre_action", "exit": true}), "down");
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn a_harness_that_hangs_gets_the_command_blocked_within_the_deadline() {
    // Codex's own hook timeout fails open: this proves ours answers first.
    fail_closed_run(json!({"event": "pre_action", "hang": true}), "hang");
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn an_escalation_follows_the_fail_mode() {
    let world = World::new();
    let marker = world.ws().join("escalated-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "decision": {"decision": "escalate", "reason": "ask the on-call"}}
    ]}));
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        !marker.exists(),
        "an escalated command ran with nobody to ask",
    );
    let outputs = api.tool_outputs();
    r.check(
        outputs.len() == 1
            && outputs[0].contains("ask the on-call")
            && outputs[0].contains("fail mode: closed"),
        &format!("the model was not told why: {outputs:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn the_users_hooks_keep_their_trust_and_their_files_are_untouched() {
    let world = World::new();
    let ws = world.ws();
    let marker = ws.join("tool-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let touch = |name: &str| format!("touch {}", ws.join(name).display());
    // In the user's config.toml: a hook they trusted, and one they never reviewed.
    let config = world.codex_home().join("config.toml");
    let trusted_hash = ahp_wrap_shim_codex::trust_hash(
        ahp_wrap_shim_codex::CodexEvent::PreToolUse,
        Some("*"),
        &touch("file-trusted"),
        30,
    );
    let config_text = format!(
        r#"[[hooks.PreToolUse]]
matcher = "*"
hooks = [{{ type = "command", command = "{}", timeout = 30 }}]

[[hooks.PostToolUse]]
matcher = "*"
hooks = [{{ type = "command", command = "{}", timeout = 30 }}]

[hooks.state."{}:pre_tool_use:0:0"]
trusted_hash = "{trusted_hash}"
"#,
        touch("file-trusted"),
        touch("file-untrusted"),
        config.display()
    );
    std::fs::write(&config, &config_text).unwrap();
    // On the command line: their own -c hooks, one trusted by their own -c hooks.state.
    let cli_hook = touch("cli-trusted");
    let cli_hash = ahp_wrap_shim_codex::trust_hash(
        ahp_wrap_shim_codex::CodexEvent::PostToolUse,
        Some("Bash"),
        &cli_hook,
        30,
    );
    let cli_hooks = format!(
        r#"hooks.PostToolUse=[{{matcher="Bash",hooks=[{{type="command",command="{cli_hook}",timeout=30}}]}}]"#
    );
    let cli_state = format!(
        r#"hooks.state={{"{}:post_tool_use:0:0"={{trusted_hash="{cli_hash}"}}}}"#,
        ahp_wrap_shim_codex::SESSION_FLAGS_SOURCE
    );
    let cli_untrusted = format!(
        r#"hooks.UserPromptSubmit=[{{hooks=[{{type="command",command="{}"}}]}}]"#,
        touch("cli-untrusted")
    );

    let harness = world.harness(json!({}));
    let r = wrapped(
        &world,
        &api,
        &["--harness", &harness],
        &["-c", &cli_hooks, "-c", &cli_state, "-c", &cli_untrusted],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(marker.exists(), "the tool did not run");
    for name in ["file-trusted", "cli-trusted"] {
        r.check(
            ws.join(name).exists(),
            &format!("the user's {name} hook did not run"),
        );
    }
    // Our trust entries are for our hooks only: what the user never trusted stays skipped.
    for name in ["file-untrusted", "cli-untrusted"] {
        r.check(
            !ws.join(name).exists(),
            &format!("the user's {name} hook ran"),
        );
    }
    // Ours ran too, next to theirs.
    r.check(
        world.hook_saw("pre_action", "PreToolUse").len() == 1
            && world.hook_saw("post_action", "PostToolUse").len() == 1
            && world.hook_saw("pre_prompt", "UserPromptSubmit").len() == 1,
        "our hooks did not run",
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), config_text);
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn switching_codex_hooks_off_is_refused() {
    let world = World::new();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "hello"}]));
    let harness = world.harness(json!({}));
    for off in [&["--disable", "hooks"][..], &["-c", "features.hooks=false"]] {
        let r = wrapped(&world, &api, &["--harness", &harness], off);
        r.check(
            r.output.status.code() == Some(125) && r.stderr().contains("could not be supervised"),
            "a run without hooks should not start",
        );
    }
    assert!(api.requests().is_empty(), "codex started anyway");
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn a_codex_that_never_calls_our_hooks_is_reported_loudly() {
    // A stand-in `codex` that ignores the injected hooks, as a future Codex that no longer
    // trusts them would: the run goes on, but the wrapper says it was not supervised.
    let world = World::new();
    let fake = world.dir.path().join("codex");
    std::fs::write(&fake, "#!/bin/sh\necho did-things\n").unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let harness = world.harness(json!({}));
    let mut cmd = std::process::Command::new(ahp_wrap_testkit::wrap_bin());
    cmd.args(["--harness", &harness, "--"])
        .arg(&fake)
        .args(["exec", "do it"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = run(cmd);
    r.check(
        r.output.status.code() == Some(0),
        "the exit code is the agent's",
    );
    r.check(
        r.stdout() == "did-things\n",
        "the agent's stdout is untouched",
    );
    r.check(
        r.stderr().contains("WARNING") && r.stderr().contains("SessionStart"),
        "no warning that the run was not supervised",
    );
    let errors = world.harness_saw("error");
    r.check(
        errors.len() == 1 && errors[0]["payload"]["expected_hook"] == "SessionStart",
        &format!("the harness was not told: {errors:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn hooks_switched_off_in_the_users_config_are_switched_back_on() {
    let world = World::new();
    let marker = world.ws().join("unsupervised-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    std::fs::write(
        world.codex_home().join("config.toml"),
        "[features]\nhooks = false\n",
    )
    .unwrap();
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "decision": {"decision": "block", "reason": "supervised"}}
    ]}));
    let r = wrapped(&world, &api, &["--harness", &harness], &[]);
    r.check(
        !marker.exists(),
        "features.hooks = false turned supervision off",
    );
    r.check(
        world.hook_saw("pre_action", "PreToolUse").len() == 1,
        "our PreToolUse hook did not run",
    );
}
