//! End to end on the real Qwen Code CLI (the version pinned in tests/qwen/VERSION, installed
//! by tests/qwen/setup.sh), driven by a scripted fake OpenAI Chat Completions server on
//! 127.0.0.1 and a scripted stdio harness. Qwen runs are slow (5–18 s), so there are three.

use ahp_wrap_testkit::llm_agents as support;

use serde_json::{json, Value};
use support::{shell, Agent, World};

const PROMPT: &str = "please do the task";

fn text(v: &Value) -> String {
    v.to_string()
}

#[test]
#[cfg_attr(
    skip_e2e = "qwen",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the qwen setup"
)]
fn a_blocked_command_never_runs_and_an_allowed_one_does() {
    let world = World::new(Agent::Qwen);
    let (r, llm) = support::one_blocked_one_allowed(&world, shell, PROMPT);
    support::check_reason_then_output(&r, &llm);
    let pre = world.harness_saw("pre_action");
    r.check(pre.len() == 2, "two pre_actions");
    assert_eq!(pre[0]["payload"]["tool_name"], "run_shell_command");
    assert!(pre[0]["payload"]["tool_call_id"].is_string());
    assert_eq!(
        world.harness_saw("pre_prompt")[0]["payload"]["prompt"],
        PROMPT
    );
    let post = world.harness_saw("post_action");
    r.check(
        post.len() == 1 && text(&post[0]["payload"]["result"]).contains("OUTPUT-4471"),
        &format!("post_action: {post:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "qwen",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the qwen setup"
)]
fn a_modified_command_runs_in_neither_form_because_qwen_cannot_apply_it() {
    let world = World::new(Agent::Qwen);
    let (r, llm, new) = support::modified_call(&world, shell, PROMPT, |new| {
        json!([{"event": "pre_action", "decision": {"decision": "modify",
         "modified_payload": {"command": format!("touch {}", new.display())}}}])
    });
    r.check(
        !new.exists(),
        "the modified command ran (update the Qwen README and render)",
    );
    let results = llm.tool_results();
    r.check(
        results.len() == 1 && text(&results[0]).contains("cannot run a modified tool call"),
        &format!("the model was not told why: {results:?}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "qwen",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the qwen setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    let world = World::new(Agent::Qwen);
    let (r, llm) = support::harness_goes_down(&world, shell, PROMPT);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    // The continuation prompt is a blocking event too, so it is refused as well: the
    // conversation stops there, and the reason is in the run's output.
    r.check(
        llm.main_bodies().len() == 1,
        "a model request went out without a decision",
    );
    r.check(
        r.stdout().contains("ahp-wrap blocked this") && r.stdout().contains("fail mode: closed"),
        "the user was not told why",
    );
}
