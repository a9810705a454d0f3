//! End to end on the real Gemini CLI (the version pinned in tests/gemini/VERSION, installed
//! by tests/gemini/setup.sh), driven by a scripted fake Gemini API on 127.0.0.1
//! (`GOOGLE_GEMINI_BASE_URL`) and a scripted stdio harness. Each test proves its point by
//! what happens on disk and by what the model server receives.

use ahp_wrap_testkit::llm_agents as support;

use std::path::Path;

use serde_json::{json, Value};
use support::{shell, Agent, FakeLlm, World};

const PROMPT: &str = "please do the task";

fn text(v: &Value) -> String {
    v.to_string()
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn a_blocked_command_never_runs_and_an_allowed_one_does() {
    let world = World::new(Agent::Gemini);
    let (r, llm) = support::one_blocked_one_allowed(&world, shell, PROMPT);
    let results = llm.tool_results();
    r.check(
        results.len() == 2,
        &format!("two tool results: {results:?}"),
    );
    r.check(
        text(&results[0]["error"]).contains("no markers today (rule 7)")
            && !text(&results[0]).contains("RAN"),
        &format!("the model did not get the reason: {}", results[0]),
    );
    r.check(
        text(&results[1]).contains("OUTPUT-4471"),
        &format!(
            "the allowed command's output did not reach the model: {}",
            results[1]
        ),
    );

    // What the harness saw: the tool calls as AHP pre_actions, with their context.
    let pre = world.harness_saw("pre_action");
    r.check(pre.len() == 2, "two pre_actions");
    let p = &pre[0]["payload"];
    assert_eq!(p["action_type"], "tool_call");
    assert_eq!(p["tool_name"], "run_shell_command");
    assert!(text(&p["arguments"]["command"]).contains("blocked-marker"));
    let ws = world.ws().canonicalize().unwrap();
    assert_eq!(p["context"]["working_directory"], ws.display().to_string());
    // Gemini's session id travels next to ours.
    let gemini_session = &pre[0]["metadata"]["framework_session_id"];
    assert!(gemini_session.is_string(), "{}", pre[0]);
    assert!(world
        .harness_saw("session_start")
        .iter()
        .any(|s| s["payload"]["framework_session_id"] == *gemini_session));
    // The prompt, then every model request, as pre_prompt; the result as post_action.
    let prompts = world.harness_saw("pre_prompt");
    let stages: Vec<&Value> = prompts.iter().map(|e| &e["payload"]["stage"]).collect();
    assert_eq!(stages[0], "user_prompt", "{stages:?}");
    assert_eq!(prompts[0]["payload"]["prompt"], PROMPT);
    assert_eq!(
        stages.iter().filter(|s| **s == "model_request").count(),
        3,
        "{stages:?}"
    );
    let post = world.harness_saw("post_action");
    r.check(
        post.len() == 1 && text(&post[0]["payload"]["result"]).contains("OUTPUT-4471"),
        &format!("post_action: {post:?}"),
    );
    assert_eq!(world.harness_saw("post_response").len(), 1);
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn a_modified_command_is_the_one_that_runs() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws();
    let (a1, b1, a2, b2) = (
        ws.join("orig-1"),
        ws.join("new-1"),
        ws.join("orig-2"),
        ws.join("new-2"),
    );
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([
            shell(&format!("touch {}", a1.display())),
            shell(&format!("touch {}", a2.display())),
            {"text": "All done."}
        ]),
    );
    // Both shapes a harness may send: a whole pre_action payload, or just the arguments.
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "contains": "orig-1", "decision": {"decision": "modify",
         "modified_payload": {"action_type": "tool_call", "tool_name": "run_shell_command",
           "arguments": {"command": format!("touch {} && echo MODIFIED-1", b1.display())}}}},
        {"event": "pre_action", "contains": "orig-2", "decision": {"decision": "modify",
         "modified_payload": {"command": format!("touch {} && echo MODIFIED-2", b2.display())}}}
    ]}));
    let r = world.wrapped(&llm, &["--harness", &harness], PROMPT, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        b1.exists() && b2.exists(),
        "the modified commands did not run",
    );
    r.check(!a1.exists() && !a2.exists(), "the original commands ran");
    let results = text(&json!(llm.tool_results()));
    r.check(
        results.contains("MODIFIED-1") && results.contains("MODIFIED-2"),
        &format!("the model did not get the modified commands' output: {results}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn a_blocked_prompt_never_reaches_the_model_server() {
    let world = World::new(Agent::Gemini);
    let llm = FakeLlm::start(world.dir.path(), json!([{"text": "I saw it."}]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "contains": "please do",
         "decision": {"decision": "block", "reason": "prompt refused (rule P)"}}
    ]}));
    let r = world.wrapped(&llm, &["--harness", &harness], PROMPT, &[]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let bodies = llm.main_bodies();
    r.check(
        bodies.is_empty(),
        &format!("the prompt reached the server: {bodies:?}"),
    );
    r.check(
        r.stdout().contains("prompt refused (rule P)"),
        "the user is not told why",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    let world = World::new(Agent::Gemini);
    let (r, llm) = support::harness_goes_down(&world, shell, PROMPT);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    // The next model request is a blocking event too, so it is refused as well: the
    // conversation stops there, and the user is told why.
    r.check(
        llm.main_bodies().len() == 1,
        "a model request went out without a decision",
    );
    r.check(
        r.stdout().contains("ahp-wrap blocked this") && r.stdout().contains("fail mode: closed"),
        "the user was not told why",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn system_settings_are_merged_and_user_settings_cannot_switch_hooks_off() {
    let world = World::new(Agent::Gemini);
    let ws = world.ws();
    let marker = ws.join("tool-marker");
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([shell(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    // The machine's own system settings, with a hook of their own, in a place Gemini
    // trusts (root-owned, writable by root alone: not under /tmp).
    // The target dir is not such a place when the checkout is under /tmp: use /run then.
    let base = [Path::new(env!("CARGO_TARGET_TMPDIR")), Path::new("/run")]
        .into_iter()
        .find(|p| is_root_only(p))
        .unwrap_or(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let system_dir = tempfile::Builder::new()
        .prefix("gemini-system-")
        .tempdir_in(base)
        .unwrap();
    assert!(
        is_root_only(system_dir.path()),
        "this test needs {} to be writable by root alone (run the suite as root)",
        system_dir.path().display()
    );
    let system = system_dir.path().join("settings.json");
    let system_text = json!({"hooks": {"BeforeTool": [{"matcher": ".*", "hooks": [
        {"type": "command", "command": format!("touch {}", ws.join("system-hook").display())}
    ]}]}})
    .to_string();
    std::fs::write(&system, &system_text).unwrap();
    // The user's settings switch hooks off: supervision must stay on.
    world.user_settings(json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "hooksConfig": {"enabled": false}
    }));
    let user_text = std::fs::read_to_string(world.user_settings_file()).unwrap();
    let harness = world.harness(json!({}));
    let r = world.wrapped(
        &llm,
        &["--harness", &harness],
        PROMPT,
        &[("GEMINI_CLI_SYSTEM_SETTINGS_PATH", &system)],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(marker.exists(), "the tool did not run");
    r.check(
        ws.join("system-hook").exists(),
        "the system settings' hook did not run",
    );
    r.check(
        world.harness_saw("pre_action").len() == 1,
        "our hooks did not run",
    );
    assert_eq!(std::fs::read_to_string(&system).unwrap(), system_text);
    assert_eq!(
        std::fs::read_to_string(world.user_settings_file()).unwrap(),
        user_text
    );
}

/// Gemini's rule for system settings: every directory up to `/` is owned by root and
/// writable by no one else.
fn is_root_only(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    dir.ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}
