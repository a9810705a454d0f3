//! The floor under the real Claude Code CLI: the model writes a script that deletes a
//! directory outside the workspace, then runs it in the next call. The policy reads the
//! script before it runs (a plain `rm -rf` there is refused with a reason), but this one
//! reaches the deletion through reflection (`getattr(shutil, 'rmtree')`), which a scan of
//! the code does not see through; so both calls are allowed and the kernel refuses the
//! delete. The directory survives and the model gets the error. With `--floor off` the same
//! run deletes it, which shows the test can fail.

use ahp_wrap_testkit::claude_code as support;
use ahp_wrap_testkit::common::dirs;

use serde_json::json;
use support::{bash, run, FakeApi, World};

/// Runs the two-step attack; returns whether the outside directory survived and the
/// second tool result's text.
fn attack(floor: &str) -> (bool, String) {
    let world = World::new();
    // Outside the workspace and outside the temp directories (which the floor lets the
    // agent write).
    let keep = tempfile::Builder::new()
        .prefix("claude-floor-")
        .tempdir_in(dirs::outside_temp())
        .unwrap();
    let outside = keep.path().join("important");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("data.txt"), "keep me").unwrap();
    let script = world.ws().join("clean.py");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            support::write(
                &script,
                &format!(
                    "import shutil\ngetattr(shutil, 'rmtree')('{}')\n",
                    outside.display()
                ),
            ),
            bash("python3 clean.py"),
            {"text": "Cleaned."}
        ]),
    );
    let r = run(world.command(
        &api,
        Some(&["--floor", floor, "--summary", "never"]),
        &["-p", "clean up", "--allowedTools", "Bash,Write"],
    ));
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    let results = api.tool_results();
    r.check(
        results.len() == 2,
        "two tool results should reach the model",
    );
    r.check(
        script.exists(),
        "the script should have been written in the workspace",
    );
    let second = results[1]["content"].to_string();
    (outside.join("data.txt").exists(), second)
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_script_written_then_run_cannot_delete_outside_the_workspace() {
    let (survived, result) = attack("on");
    assert!(
        survived,
        "the floor let the script delete the directory; the model saw: {result}"
    );
    assert!(
        result.contains("Permission denied") || result.contains("PermissionError"),
        "the model should get the kernel's refusal, got: {result}"
    );
    let (survived, result) = attack("off");
    assert!(
        !survived,
        "without the floor the script should have deleted the directory (else this test \
         proves nothing); the model saw: {result}"
    );
}

/// A write the floor refuses, as the agent's own tool reports it ("Permission denied"): the
/// agent is told, in the context Claude Code takes after a tool call, that this run's floor
/// refused it and what the user can change; the person's summary counts it; the audit log
/// records it. The run cannot read the kernel's audit log: this needs none. With the floor
/// off the same write is made and nothing is explained.
#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_refusal_of_the_floor_is_explained_to_the_agent_and_counted() {
    let refused = |floor: &str| {
        let world = World::new();
        let keep = tempfile::Builder::new()
            .prefix("claude-floor-met-")
            .tempdir_in(dirs::outside_temp())
            .unwrap();
        let target = keep.path().join("notes.txt");
        let audit = world.dir.path().join("audit.jsonl");
        let api = FakeApi::start(
            world.dir.path(),
            "api",
            json!([
                bash(&format!("echo note > {}", target.display())),
                {"text": "Done."}
            ]),
        );
        let cmd = world.command(
            &api,
            Some(&[
                "--floor",
                floor,
                "--summary",
                "always",
                "--audit-log",
                audit.to_str().unwrap(),
            ]),
            &["-p", "write a note", "--allowedTools", "Bash"],
        );
        // The kernel's audit log unreadable by the run; the environment the test set, alone.
        let r = run(ahp_wrap_testkit::common::without_audit_read(&cmd, true));
        r.check(
            r.output.status.code() == Some(0),
            "the run should end normally",
        );
        let requests: String = api.requests().iter().map(|b| b.to_string()).collect();
        let stderr = String::from_utf8_lossy(&r.output.stderr).into_owned();
        let records = ahp_wrap_testkit::agents::read_jsonl(&audit);
        (target.exists(), requests, stderr, records, target, keep)
    };
    let (written, requests, stderr, records, target, _keep) = refused("on");
    assert!(!written, "the floor let the write through");
    let told = "the refusal above came from this run's floor";
    assert!(
        requests.contains(told) && requests.contains(&target.display().to_string()),
        "the model was not told why (the end of what it was sent): {}",
        &requests[requests.len().saturating_sub(3000)..]
    );
    assert!(
        requests.contains("--floor off"),
        "nor what the user can change: {requests}"
    );
    assert!(
        stderr.contains(&format!(
            "the agent met the floor once (its tools reported the refusal, and the agent was told why): {} (Permission denied, outside the writable roots)",
            target.display()
        )),
        "the summary does not count it: {stderr}"
    );
    let explained: Vec<_> = records
        .iter()
        .filter(|r| r["event_type"] == "error" && r["payload"]["source"] == "floor")
        .filter(|r| r["payload"]["refused"][0]["path"] == target.display().to_string())
        .collect();
    assert_eq!(explained.len(), 1, "audited once: {records:?}");
    assert!(
        !records.iter().any(|r| r["reason"]
            .as_str()
            .is_some_and(|s| s.starts_with("refused by the kernel"))),
        "the kernel's audit log was read after all: {records:?}"
    );
    let (written, requests, stderr, ..) = refused("off");
    assert!(
        written,
        "without the floor the write is made (else this proves nothing)"
    );
    assert!(!requests.contains(told) && !stderr.contains("met the floor"));
}

/// Headless, a host nobody names is refused (nobody can answer the question it would be);
/// the model is told which host, that the floor refused it, and the line that would allow it,
/// and the run's summary says so to the person.
#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn an_unknown_host_refused_headless_is_explained_to_the_model_with_the_setting() {
    let world = World::new();
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("curl -sS https://unknown.example/ || echo fetch-failed"),
            {"text": "Done."}
        ]),
    );
    let r = run(world.command(
        &api,
        Some(&["--summary", "always"]),
        &["-p", "fetch it", "--allowedTools", "Bash"],
    ));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(
        results.len() == 1 && results[0].to_string().contains("fetch-failed"),
        "the fetch failed",
    );
    let requests: String = api.main_bodies().iter().map(|b| b.to_string()).collect();
    let last = &requests[requests.len().saturating_sub(4000)..];
    r.check(
        requests.contains("the refusal above came from this run's floor")
            && requests.contains("unknown.example")
            && requests.contains(r#"allow = [\"unknown.example\"]"#),
        &format!("the model is told the host and the setting: {last}"),
    );
    let stderr = String::from_utf8_lossy(&r.output.stderr);
    r.check(
        stderr.contains("unknown.example") && stderr.contains("allow = [\"unknown.example\"]"),
        "the summary says it to the person",
    );
}
