//! End to end on the real GitHub Copilot CLI (the version pinned in tests/copilot/VERSION,
//! installed by tests/copilot/setup.sh), offline (`COPILOT_OFFLINE` plus a BYOK provider
//! pointing at a scripted fake Chat Completions server on 127.0.0.1) with a scripted stdio
//! harness. Each run takes about 4 s (the binary unpacks itself into the test's HOME).

use ahp_wrap_testkit::llm_agents as support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use support::{Agent, World};

const PROMPT: &str = "please do the task";

/// A scripted turn in which the model runs one command with Copilot's `bash` tool.
fn bash(command: &str) -> Value {
    json!({"tool_calls": [{"name": "bash",
        "args": {"command": command, "description": "test step"}}]})
}

fn text(v: &Value) -> String {
    v.to_string()
}

/// Every path under `dir` with, for files, their contents (symlinks as their target).
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let what = if meta.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display())
            } else if meta.is_dir() {
                todo.push(p.clone());
                "dir".into()
            } else {
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned()
            };
            out.push((p.strip_prefix(dir).unwrap().to_owned(), what));
        }
    }
    out.sort();
    out
}

#[test]
#[cfg_attr(
    skip_e2e = "copilot",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the copilot setup"
)]
fn a_blocked_command_never_runs_an_allowed_one_does_and_the_users_home_is_kept() {
    let world = World::new(Agent::Copilot);
    // The user's real Copilot home: their own preToolUse hook, a config, session state.
    let real = world.dir.path().join("home/.copilot");
    let user_log = world.dir.path().join("user-hook.log");
    std::fs::create_dir_all(real.join("hooks")).unwrap();
    std::fs::create_dir_all(real.join("session-state")).unwrap();
    let user_hook = json!({"version": 1, "hooks": {"preToolUse": [{"type": "command",
        "bash": format!("cat >> {}; echo >> {}", user_log.display(), user_log.display()),
        "timeoutSec": 30}]}});
    std::fs::write(real.join("hooks/user.json"), user_hook.to_string()).unwrap();
    let hooks_before = snapshot(&real.join("hooks"));

    let (r, llm) = support::one_blocked_one_allowed(&world, bash, PROMPT);
    support::check_reason_then_output(&r, &llm);
    let pre = world.harness_saw("pre_action");
    r.check(pre.len() == 2, "two pre_actions");
    assert_eq!(pre[0]["payload"]["tool_name"], "bash");
    assert!(text(&pre[0]["payload"]["arguments"]).contains("blocked-marker"));
    assert_eq!(
        world.harness_saw("pre_prompt")[0]["payload"]["prompt"],
        PROMPT
    );
    // Copilot's session id travels next to ours, and its session hooks reached the
    // harness beside the wrapper's own session events.
    let session = &pre[0]["metadata"]["framework_session_id"];
    assert!(session.is_string(), "{}", pre[0]);
    for event_type in ["session_start", "session_end", "post_response"] {
        let seen = world.harness_saw(event_type);
        r.check(
            seen.iter()
                .any(|e| e["metadata"]["framework_session_id"] == *session),
            &format!("Copilot's {event_type} did not reach the harness: {seen:?}"),
        );
    }
    r.check(
        !r.stderr().contains("ahp-wrap: WARNING"),
        "a supervised run should not warn",
    );
    let post = world.harness_saw("post_action");
    r.check(
        post.len() == 1 && text(&post[0]["payload"]["arguments"]).contains("allowed-marker"),
        &format!("post_action: {post:?}"),
    );

    // The user's own hook ran for both calls, from their real home.
    let user_calls = std::fs::read_to_string(&user_log).unwrap_or_default();
    r.check(
        user_calls.contains("blocked-marker") && user_calls.contains("allowed-marker"),
        &format!("the user's own preToolUse hook did not run for both calls: {user_calls}"),
    );
    // Their hooks are as they were (nothing of ours), and the session state Copilot wrote
    // landed in their real home.
    r.check(
        snapshot(&real.join("hooks")) == hooks_before,
        "the user's hooks directory changed",
    );
    r.check(
        !snapshot(&real)
            .iter()
            .any(|(p, _)| p.to_string_lossy().contains("ahp-wrap")),
        "an ahp-wrap file was left in the user's Copilot home",
    );
    r.check(
        std::fs::read_dir(real.join("session-state"))
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| !e.file_name().to_string_lossy().starts_with('.')),
        "the session state did not land in the user's real Copilot home",
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "copilot",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the copilot setup"
)]
fn a_modified_command_and_a_rewritten_prompt_are_what_runs() {
    let world = World::new(Agent::Copilot);
    // A whole pre_action payload, as a harness echoes it back with new arguments.
    let (r, llm, new) = support::modified_call(&world, bash, PROMPT, |new| {
        json!([
            {"event": "pre_prompt", "decision": {"decision": "modify",
             "modified_payload": {"prompt": "REWRITTEN-PROMPT-77"}}},
            {"event": "pre_action", "decision": {"decision": "modify",
             "modified_payload": {"tool_name": "bash", "arguments":
                {"command": format!("touch {} && echo MODIFIED-88", new.display()),
                 "description": "modified"}}}}
        ])
    });
    r.check(new.exists(), "the modified command did not run");
    let results = llm.tool_results();
    r.check(
        results.len() == 1 && text(&results[0]).contains("MODIFIED-88"),
        &format!("the model did not get the modified command's output: {results:?}"),
    );
    // The rewritten prompt is what reached the model, never the original.
    let first = text(&llm.main_bodies()[0]["messages"]);
    r.check(
        first.contains("REWRITTEN-PROMPT-77") && !first.contains(PROMPT),
        &format!("the model did not get the rewritten prompt: {first}"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "copilot",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the copilot setup"
)]
fn a_harness_that_goes_down_gets_the_command_blocked() {
    let world = World::new(Agent::Copilot);
    let (r, llm) = support::harness_goes_down(&world, bash, PROMPT);
    let results = llm.tool_results();
    r.check(
        results.len() == 1 && text(&results[0]).contains("ahp-wrap blocked this"),
        &format!("the model was not told why: {results:?}"),
    );
}
