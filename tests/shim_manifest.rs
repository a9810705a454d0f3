//! A shim written as a manifest, as its author meets it: `ahp-wrap shim check` on a good and
//! a broken manifest, and a run with `--shim FILE` of an agent that has Claude-style command
//! hooks and no shim in the binary (tests/support/hook_agent.py), where what the harness
//! blocked never ran on disk, and a hook whose wrapper is gone still answers in the agent's
//! own terms, from the manifest the run handed on.

use ahp_wrap_testkit::{common, root};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::run_with_input;
use common::*;
use serde_json::json;

/// The agent's manifest (tests/support/toy_shim.toml).
fn toy() -> String {
    std::fs::read_to_string(support("toy_shim.toml")).unwrap()
}

fn shim_check(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(wrap_bin())
        .arg("shim")
        .arg("check")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn shim_check_tries_a_manifest_on_its_samples_and_refuses_a_broken_one_by_line_and_field() {
    let qwen = root().join("shims/qwen/shim.toml");
    let (code, out) = shim_check(&[qwen.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("PreToolUse -> pre_action run_shell_command"),
        "{out}"
    );
    assert!(out.contains("permissionDecision\":\"deny"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&qwen)
        .unwrap()
        .replace("shape = \"tool_call\"", "shape = \"tool_cal\"");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, &text).unwrap();
    let line = text.lines().position(|l| l.contains("tool_cal\"")).unwrap() + 1;
    let (code, out) = shim_check(&[
        bad.to_str().unwrap(),
        "--samples",
        root().join("shims/qwen/samples").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!("{}:{line}: ", bad.display())) && out.contains("tool_cal"),
        "the line and the field: {out}"
    );
    // A manifest with no recorded payloads is not called checked.
    std::fs::write(&bad, toy()).unwrap();
    let (code, out) = shim_check(&[bad.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no recorded payloads"), "{out}");
}

#[test]
fn an_agent_described_by_a_manifest_is_supervised_and_its_hook_fails_closed_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let manifest = d.join("toy.toml");
    std::fs::write(&manifest, toy()).unwrap();
    let (blocked, allowed) = (d.join("blocked-marker"), d.join("allowed-marker"));
    std::fs::write(
        d.join("script.json"),
        json!({"commands": [
            format!("touch {}", blocked.display()),
            format!("touch {}", allowed.display()),
        ]})
        .to_string(),
    )
    .unwrap();
    let harness = script_harness(
        d,
        json!({"rules": [{"event": "pre_action", "contains": "blocked-marker",
                           "decision": {"decision": "block", "reason": "not that one"}}]}),
    );
    let mut cmd = Command::new(wrap_bin());
    cmd.args(["--shim", manifest.to_str().unwrap(), "--framework", "toy"])
        .args(["--harness", &harness, "--"])
        .arg(support("hook_agent.py"))
        .arg(d.join("script.json"))
        .current_dir(d);
    let r = run_with_input(&mut cmd, b"", Duration::from_secs(60));
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    r.check(!blocked.exists(), "the blocked command ran");
    r.check(allowed.exists(), "the allowed command did not run");
    r.check(
        r.stdout().contains("DENIED not that one"),
        "the agent read the harness's reason in its own terms",
    );
    let events = harness_events(d);
    let pre: Vec<_> = events
        .iter()
        .filter(|e| e["event_type"] == "pre_action")
        .collect();
    r.check(pre.len() == 2, "two pre_actions reached the harness");
    assert_eq!(pre[0]["payload"]["tool_name"], "shell");
    assert_eq!(pre[0]["payload"]["id"], 0);
    assert!(events.iter().any(|e| e["event_type"] == "session_start"));

    // A hook whose wrapper is gone: the manifest comes from AHP_WRAP_SHIM, as a run hands it
    // on, and the answer is the agent's own deny form.
    let hook = |shim: Option<&Path>| {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["hook", "toy", "BeforeTool"])
            .env_remove("AHP_WRAP_SHIM")
            .env("AHP_WRAP_RUN", "0123456789abcdef")
            .env("XDG_CONFIG_HOME", d);
        if let Some(file) = shim {
            cmd.env("AHP_WRAP_SHIM", file);
        }
        run_with_input(
            &mut cmd,
            br#"{"tool":{"name":"shell"}}"#,
            Duration::from_secs(20),
        )
    };
    let alone = hook(Some(&manifest));
    let out: serde_json::Value = serde_json::from_str(alone.stdout().trim())
        .unwrap_or_else(|e| panic!("{e}: {}", alone.stdout()));
    assert_eq!(out["decision"], "deny", "{out}");
    assert!(
        out["reason"].as_str().unwrap().contains("fails closed"),
        "{out}"
    );
    assert_eq!(alone.output.status.code(), Some(0));
    // Without the manifest, the hook knows no such agent: it still blocks, by exit code.
    let unknown = hook(None);
    assert_eq!(unknown.output.status.code(), Some(2));
    assert!(
        unknown.stderr().contains("unknown framework"),
        "{}",
        unknown.stderr()
    );
}

/// `--shim` with a manifest that does not load stops the run before the agent starts: the
/// wrapper's own failure (125), the line and the field said, the agent never run.
#[test]
fn a_run_with_a_broken_manifest_stops_before_the_agent_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = toy().replace("shape = \"tool_call\"", "shape = \"tool_cal\"");
    let line = text.lines().position(|l| l.contains("tool_cal\"")).unwrap() + 1;
    let manifest = d.join("broken.toml");
    std::fs::write(&manifest, &text).unwrap();
    let marker = d.join("agent-ran");
    let mut cmd = Command::new(wrap_bin());
    cmd.args(["--shim", manifest.to_str().unwrap(), "--"])
        .args(["touch", marker.to_str().unwrap()])
        .current_dir(d);
    let r = run_with_input(&mut cmd, b"", Duration::from_secs(30));
    r.check(
        r.output.status.code() == Some(125),
        "the wrapper's own failure",
    );
    r.check(!marker.exists(), "the agent ran");
    r.check(
        r.stderr().contains(&format!("broken.toml:{line}: shape: ")),
        "the line and the field were not said",
    );
}
