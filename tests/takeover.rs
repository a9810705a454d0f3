//! The wrapper cannot be switched off from inside: an agent that replaces the control
//! socket with its own listener still gets the harness's decision (or, with a path socket,
//! the run ends loudly), and a hook call from outside the agent's tree is audited as such.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

const BLOCKED: &str = r#"{"event_type":"pre_action","payload":{"tool_name":"bash","arguments":{"command":"BLOCK_ME"}}}"#;

/// A scripted harness that blocks BLOCK_ME and logs every message to `dir/harness.jsonl`.
fn harness(dir: &Path) -> String {
    let rules = serde_json::json!({
        "rules": [{"event": "pre_action", "contains": "BLOCK_ME",
                   "decision": {"decision": "block", "reason": "the harness blocks BLOCK_ME"}}],
    });
    script_harness(dir, rules)
}

/// An agent that starts the impostor, waits until it has tried, then asks the hook about
/// BLOCK_ME (see [`gated_agent`]), and stops the impostor.
fn hijacking_agent(dir: &Path) -> Vec<String> {
    let mut gated = gated_agent(dir, BLOCKED, 0);
    let script = format!(
        r#"cd '{d}'
python3 '{imp}' '{d}/impostor' & echo $! > impostor_pid
while [ ! -s impostor ]; do sleep 0.01; done
{gated}"#,
        d = dir.display(),
        imp = support("impostor.py").display(),
        gated = gated
            .pop()
            .unwrap()
            .replace("exit 0", "kill $(cat impostor_pid); exit 0"),
    );
    vec!["sh".into(), "-c".into(), script]
}

#[test]
fn a_replaced_control_socket_does_not_silence_the_harness() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let out = run(
        Command::new(wrap_bin())
            .args(["--harness", &harness(dir.path()), "--audit-log"])
            .arg(&audit)
            .arg("--")
            .args(hijacking_agent(dir.path())),
        Duration::from_secs(60),
    );
    let attempt = read(dir.path(), "impostor");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\nimpostor: {attempt}",
        show(&out)
    );
    // The hook reached the wrapper: blocked, as the harness decided...
    assert!(
        !dir.path().join("ran").exists(),
        "the blocked command ran (impostor: {attempt})"
    );
    assert_eq!(read(dir.path(), "hook_rc").trim(), "2");
    // ...since the impostor could not take the wrapper's address.
    assert!(attempt.starts_with("refused:"), "impostor: {attempt}");
    let reason = read(dir.path(), "reason.txt");
    assert!(reason.contains("the harness blocks BLOCK_ME"), "{reason}");
    // The harness saw the call, and the audit log has it, from the agent's own tree.
    let seen = harness_events(dir.path());
    assert!(
        seen.iter()
            .any(|e| e["event_type"] == "pre_action" && e.to_string().contains("BLOCK_ME")),
        "{seen:?}"
    );
    let records = json_lines(dir.path(), "audit.jsonl");
    let record = records
        .iter()
        .find(|r| r["event_type"] == "pre_action" && r["payload"].to_string().contains("BLOCK_ME"))
        .unwrap_or_else(|| panic!("not audited: {records:?}"));
    assert_eq!(record["decision"], "block");
    assert_eq!(record["peer"]["descends_from_agent"], true, "{record}");
}

/// The hijacking agent, where no abstract socket exists and the control socket is a path
/// an agent can try to replace; `args` go before the harness.
fn hijack_path_socket(args: &[&str]) -> (tempfile::TempDir, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let out = run(
        Command::new(wrap_bin())
            .env("AHP_WRAP_CONTROL", "path")
            .args(args)
            .args(["--harness", &harness(dir.path()), "--audit-log"])
            .arg(&audit)
            .arg("--")
            .args(hijacking_agent(dir.path())),
        Duration::from_secs(60),
    );
    (dir, out)
}

#[test]
fn a_replaced_path_socket_fails_the_hook_closed_and_ends_the_run() {
    // Off the floor: on it, the run directory cannot be written at all (see
    // `on_the_floor_the_path_socket_cannot_be_replaced`).
    let (dir, out) = hijack_path_socket(&["--floor", "off"]);
    let attempt = read(dir.path(), "impostor");
    assert_eq!(attempt.trim(), "listening", "{}", show(&out));
    assert!(!dir.path().join("ran").exists(), "the blocked command ran");
    // The hook either met the impostor and refused its answer, or the run ended first.
    let rc = read(dir.path(), "hook_rc");
    if !rc.is_empty() {
        assert_eq!(rc.trim(), "2");
        let reason = read(dir.path(), "reason.txt");
        assert!(reason.contains("rather than by the wrapper"), "{reason}");
    }
    // The wrapper noticed, said so loudly, told the harness and the audit log, and ended
    // the run, the impostor included.
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("was replaced while the agent ran"),
        "{stderr}"
    );
    assert!(!stderr.contains("lost track"), "{stderr}");
    let error = |e: &Value| {
        e["event_type"] == "error"
            && e["payload"]["message"]
                .to_string()
                .contains("control socket")
    };
    let seen = harness_events(dir.path());
    assert!(seen.iter().any(error), "{seen:?}");
    assert!(json_lines(dir.path(), "audit.jsonl").iter().any(error));
    let impostor = read(dir.path(), "impostor_pid").trim().to_owned();
    assert!(
        !Path::new(&format!("/proc/{impostor}/cmdline")).exists()
            || std::fs::read_to_string(format!("/proc/{impostor}/stat"))
                .unwrap_or_default()
                .contains(") Z"),
        "the impostor {impostor} outlived the run"
    );
}

#[test]
fn a_hook_call_from_outside_the_agents_tree_is_audited_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    // The agent publishes its environment (as /proc/<agent>/environ would) and waits.
    let script = format!(
        r#"cd '{}'
env | grep '^AHP_WRAP_' > env.tmp && mv env.tmp env
while [ ! -e done ]; do sleep 0.01; done"#,
        dir.path().display()
    );
    let mut wrapper = Command::new(wrap_bin())
        .args(["--harness", &harness(dir.path()), "--audit-log"])
        .arg(&audit)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !dir.path().join("env").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // This test process is not in the agent's tree; with the token it can still call.
    let mut hook = Command::new(wrap_bin());
    hook.args(["hook", "generic", "pre_action"]);
    for line in read(dir.path(), "env").lines() {
        let (k, v) = line.split_once('=').unwrap();
        hook.env(k, v);
    }
    let mut child = hook
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let outsider = child.id() as i64;
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(BLOCKED.as_bytes())
        .unwrap();
    let answer = child.wait_with_output().unwrap();
    std::fs::write(dir.path().join("done"), "").unwrap();
    let status = wrapper.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(answer.status.code(), Some(2), "{}", show(&answer));
    let records = json_lines(dir.path(), "audit.jsonl");
    // The outsider's generic hook call (the agent's own `mv` goes through a PATH shim).
    let record = records
        .iter()
        .find(|r| r["event_type"] == "pre_action" && r["payload"]["tool_name"] != "exec")
        .unwrap_or_else(|| panic!("not audited: {records:?}"));
    assert_eq!(record["peer"]["pid"], outsider, "{record}");
    assert_eq!(record["peer"]["descends_from_agent"], false, "{record}");
    // The harness is told too.
    let seen = harness_events(dir.path());
    let event = seen
        .iter()
        .find(|e| e["event_type"] == "pre_action" && e["payload"]["tool_name"] != "exec")
        .unwrap();
    assert_eq!(
        event["metadata"]["sender"]["descends_from_agent"], false,
        "{event}"
    );
}

#[test]
fn on_the_floor_the_path_socket_cannot_be_replaced() {
    let (dir, out) = hijack_path_socket(&[]);
    let attempt = read(dir.path(), "impostor");
    assert!(attempt.starts_with("refused"), "{attempt}\n{}", show(&out));
    assert!(!dir.path().join("ran").exists(), "the blocked command ran");
    assert_eq!(read(dir.path(), "hook_rc").trim(), "2", "{}", show(&out));
}
