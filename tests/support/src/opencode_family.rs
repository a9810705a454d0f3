//! The end-to-end scenarios of the OpenCode family (OpenCode, and its fork Kilo Code), which
//! one shim serves: each suite (tests/opencode_e2e.rs, tests/kilo_e2e.rs) runs every one on
//! its real CLI, driven by the scripted fake OpenAI Chat Completions server (a provider in
//! the user's own config) and a scripted stdio harness. Each test's HOME also holds a plugin
//! of the user's, which must still load.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::llm_agents::{self as support, shell_tool, Agent, FakeLlm, World};

const PROMPT: &str = "please do the task";

/// A turn in which the model runs `command` with OpenCode's `bash` tool.
fn bash(command: &str) -> Value {
    shell_tool("bash", command)
}

fn text(v: &Value) -> String {
    v.to_string()
}

/// A test's world with a plugin of the user's in the agent's own plugin directory
/// (`~/.config/opencode/plugins/`, `~/.config/kilo/plugin/`), which writes
/// `user-plugin.log` in the test's directory: `loaded` when the agent loads it, and
/// `before <tool>` for each tool call it sees.
fn world(agent: Agent) -> (World, PathBuf) {
    let world = World::new(agent);
    let log = world.dir.path().join("user-plugin.log");
    let dir = match agent {
        Agent::Kilo => "home/.config/kilo/plugin",
        _ => "home/.config/opencode/plugins",
    };
    let plugins = world.dir.path().join(dir);
    std::fs::create_dir_all(&plugins).unwrap();
    let log_js = Value::from(log.to_str().unwrap()).to_string();
    let source = format!(
        r#"import {{ appendFileSync }} from "node:fs";
export const UserMarker = async () => {{
  appendFileSync({log_js}, "loaded\n");
  return {{ "tool.execute.before": async (input) => appendFileSync({log_js}, `before ${{input.tool}}\n`) }};
}};
"#
    );
    std::fs::write(plugins.join("user-marker.js"), source).unwrap();
    (world, log)
}

pub fn a_blocked_command_never_runs_an_allowed_one_does_and_the_users_plugin_still_loads(
    agent: Agent,
) {
    let (world, user_log) = world(agent);
    let (r, llm) = support::one_blocked_one_allowed(&world, bash, PROMPT);
    support::check_reason_then_output(&r, &llm);
    let user = std::fs::read_to_string(&user_log).unwrap_or_default();
    r.check(
        user.starts_with("loaded\n") && user.matches("before bash").count() == 2,
        &format!("the user's own plugin did not run: {user:?}"),
    );
    let pre = world.harness_saw("pre_action");
    r.check(pre.len() == 2, "two pre_actions");
    assert_eq!(pre[0]["payload"]["tool_name"], "bash");
    assert!(pre[0]["payload"]["tool_call_id"].is_string());
    let prompt = world.harness_saw("pre_prompt");
    assert!(text(&prompt[0]["payload"]["prompt"]).contains(PROMPT));
    let post = world.harness_saw("post_action");
    r.check(
        post.len() == 1 && text(&post[0]["payload"]["result"]).contains("OUTPUT-4471"),
        &format!("post_action: {post:?}"),
    );
    let response = world.harness_saw("post_response");
    r.check(
        response
            .iter()
            .any(|e| e["payload"]["response"] == "All done."),
        &format!("post_response: {response:?}"),
    );
}

pub fn a_modified_command_runs_as_modified(agent: Agent) {
    let (world, _) = world(agent);
    let (r, llm, new) = support::modified_call(&world, bash, PROMPT, |new| {
        json!([{"event": "pre_action", "decision": {"decision": "modify",
         "modified_payload": {"command": format!("touch {} && echo MODIFIED-88", new.display()),
                              "description": "rewritten"}}}])
    });
    r.check(new.exists(), "the modified command did not run");
    let results = llm.tool_results();
    r.check(
        results.len() == 1 && text(&results[0]).contains("MODIFIED-88"),
        &format!("the model did not get the modified command's output: {results:?}"),
    );
}

pub fn a_harness_that_goes_down_gets_the_command_blocked(agent: Agent) {
    let (world, _) = world(agent);
    let (r, llm) = support::harness_goes_down(&world, bash, PROMPT);
    let results = llm.tool_results();
    r.check(
        results.len() == 1
            && text(&results[0]).contains("ahp-wrap blocked this")
            && text(&results[0]).contains("fail mode: closed"),
        &format!("the model was not told why: {results:?}"),
    );
}

pub fn a_blocked_prompt_never_reaches_the_model(agent: Agent) {
    let (world, _) = world(agent);
    let marker = world.ws().join("prompt-marker");
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "decision": {"decision": "block", "reason": "no prompts (rule 9)"}}
    ]}));
    let r = world.wrapped(&llm, &["--harness", &harness], PROMPT, &[]);
    r.check(
        r.output.status.code() != Some(0),
        "the agent should fail the run",
    );
    r.check(
        llm.requests().iter().all(|q| q["kind"] == "other"),
        "a model request went out",
    );
    r.check(!marker.exists(), "the command ran");
    r.check(
        r.stderr().contains("no prompts (rule 9)"),
        "the user was not told why",
    );
}

pub fn a_rewritten_prompt_is_what_the_model_gets(agent: Agent) {
    let (world, _) = world(agent);
    let llm = FakeLlm::start(world.dir.path(), json!([{"text": "All done."}]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_prompt", "decision": {"decision": "modify",
         "modified_payload": {"prompt": "the rewritten task R-5150"}}}
    ]}));
    let r = world.wrapped(
        &llm,
        &["--harness", &harness],
        "the original task O-2323",
        &[],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let bodies: Vec<String> = llm.requests().iter().map(|q| text(&q["body"])).collect();
    r.check(
        llm.main_bodies().len() == 1 && text(&llm.main_bodies()[0]).contains("R-5150"),
        &format!("the model did not get the rewritten prompt: {bodies:?}"),
    );
    r.check(
        bodies.iter().all(|b| !b.contains("O-2323")),
        &format!("the original prompt reached the model server: {bodies:?}"),
    );
}

/// The plugin a wrapped run writes, left behind while the wrapper is gone (a run killed, the
/// agent started again by hand with the same config content): each hook call finds no
/// wrapper, and blocks. The prompt is the first call: it never reaches the model, and the
/// person reads why.
pub fn a_hook_whose_wrapper_is_gone_blocks(agent: Agent) {
    let (world, _) = world(agent);
    let marker = world.ws().join("orphan-marker");
    let llm = FakeLlm::start(
        world.dir.path(),
        json!([bash(&format!("touch {}", marker.display())), {"text": "All done."}]),
    );
    let (framework, name, env) = match agent {
        Agent::Kilo => ("kilo", "Kilo Code", "KILO_CONFIG_CONTENT"),
        _ => ("opencode", "OpenCode", "OPENCODE_CONFIG_CONTENT"),
    };
    // The plugin as the shim fills it in (shims/opencode/src/config.rs).
    let literal = |s: &str| Value::from(s).to_string();
    let source = std::fs::read_to_string(crate::root().join("shims/opencode/src/plugin.js"))
        .unwrap()
        .replace(
            "\"__AHP_WRAP_HOOK_EXE__\"",
            &literal(crate::wrap_bin().to_str().unwrap()),
        )
        .replace("\"__AHP_WRAP_FRAMEWORK__\"", &literal(framework))
        .replace("\"__AHP_WRAP_AGENT__\"", &literal(name))
        .replace("__AHP_WRAP_TIMEOUT_MS__", "20000");
    let plugin = world.dir.path().join("left-behind.js");
    std::fs::write(&plugin, source).unwrap();
    let content = json!({"plugin": [format!("file://{}", plugin.display())]}).to_string();
    let r = world.unwrapped(&llm, PROMPT, &[(env, Path::new(&content))]);
    r.check(!marker.exists(), "the command ran with no wrapper to ask");
    r.check(
        llm.requests().iter().all(|q| q["kind"] == "other"),
        "a model request went out with no wrapper to ask",
    );
    r.check(
        r.stderr().contains("the hook fails closed"),
        "the person was not told why",
    );
}
