//! The embedded default policy in enforce and observe mode, through the generic hook: what
//! ran on disk, what the audit log records, and the Markdown summary for CI.

use ahp_wrap_testkit::common;

use std::process::Command;
use std::time::Duration;

use common::*;

const RM_RF_ROOT: &str = r#"{"event_type":"pre_action","payload":{"tool_name":"Bash","arguments":{"command":"rm -rf /"},"context":{"cwd":"/tmp"}}}"#;

struct Outcome {
    ran: bool,
    records: Vec<serde_json::Value>,
    markdown: String,
}

fn gate(mode: &str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let md = dir.path().join("summary.md");
    let out = run(
        Command::new(wrap_bin())
            .args(["--mode", mode, "--audit-log"])
            .arg(&audit)
            .arg("--summary-md")
            .arg(&md)
            .arg("--")
            .args(gated_agent(dir.path(), RM_RF_ROOT, 0)),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    Outcome {
        // The gated agent only touches `ran` (never runs the command itself).
        ran: dir.path().join("ran").exists(),
        records: read(dir.path(), "audit.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        markdown: read(dir.path(), "summary.md"),
    }
}

fn pre_action(records: &[serde_json::Value]) -> &serde_json::Value {
    records
        .iter()
        .find(|r| r["event_type"] == "pre_action")
        .expect("the pre_action is audited")
}

#[test]
fn enforce_blocks_and_the_markdown_summary_lists_it() {
    let o = gate("enforce");
    assert!(!o.ran, "the default policy blocks rm -rf /");
    let r = pre_action(&o.records);
    assert_eq!(r["decision"], "block");
    assert!(r["source"].as_str().unwrap().starts_with("policy:"), "{r}");
    assert!(o.markdown.contains("Blocked (1)"), "{}", o.markdown);
    assert!(o.markdown.contains("rm -rf /"), "{}", o.markdown);
}

#[test]
fn observe_blocks_nothing_and_records_what_it_would_have_blocked() {
    let o = gate("observe");
    assert!(o.ran, "observe mode never blocks");
    let r = pre_action(&o.records);
    assert_eq!(r["decision"], "allow", "{r}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .starts_with("observe mode: would have decided block"),
        "{r}"
    );
    assert_eq!(
        r["observed"], "block",
        "a field, not only the reason's text: {r}"
    );
    assert!(
        o.markdown.contains("observe: not enforced"),
        "{}",
        o.markdown
    );
}

/// Asks the wrapper's hook about `command` (the agent's shell has already put real values
/// in it) and appends the hook's exit code to `rc`.
const ASK: &str = r#"ask() { printf '{"event_type":"pre_action","payload":{"tool_name":"Bash","arguments":{"command":"%s"}}}' "$1" | "$AHP_WRAP_BIN" hook generic pre_action >/dev/null 2>&1; echo $? >> rc; }"#;

#[test]
fn a_real_run_protects_the_wrappers_own_pid_and_executables() {
    // The run names them to the policy only when it starts: the pid of the wrapper (as its
    // environment gives it: on the floor the agent's parent is its PID namespace's init) and
    // the hook executable's path, as literal values.
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "cd '{}'; {ASK}; ask \"kill -9 $AHP_WRAP_PARENT_PID\"; ask \"rm -f $AHP_WRAP_HOOK_BIN\"; ask \"kill -9 $$\"; ask \"rm -f /tmp/some-other-file\"",
        dir.path().display()
    );
    let out = run(
        Command::new(wrap_bin()).args(["--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let rc: Vec<String> = read(dir.path(), "rc").lines().map(str::to_owned).collect();
    // The wrapper's pid and its hook executable: blocked (the generic hook exits 2); another
    // pid and another file: allowed.
    assert_eq!(rc, ["2", "2", "0", "0"], "{}", show(&out));
}

/// The policy's `~` also covers the home the agent itself runs with: its hook process
/// reports it (the wrapper reads the hook's environment), so writing the agent's
/// `~/.gitconfig` is refused when the agent's `HOME` is not the wrapper's, and the same path
/// is any file for an agent whose home is the wrapper's.
#[test]
fn a_real_run_covers_the_agents_own_home() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("agent-home");
    std::fs::create_dir_all(&other).unwrap();
    let ask = r#"ask() { printf '{"event_type":"pre_action","payload":{"tool_name":"Write","arguments":{"file_path":"%s/.gitconfig","content":"[core]"}}}' "$2" | HOME="$1" "$AHP_WRAP_BIN" hook generic pre_action >/dev/null 2>&1; echo $? >> rc; }"#;
    let script = format!(
        "cd '{d}'; {ask}; ask '{o}' '{o}'; ask \"$HOME\" '{o}'",
        d = dir.path().display(),
        o = other.display()
    );
    let out = run(
        Command::new(wrap_bin()).args(["--floor", "off", "--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let rc: Vec<String> = read(dir.path(), "rc").lines().map(str::to_owned).collect();
    assert_eq!(rc, ["2", "0"], "{}", show(&out));
}

/// Session taint through a live wrapper's embedded harness: a fetch from a host the rules do
/// not name is asked about (headless: refused), and leaves the session untainted; once the
/// agent reports that such a call ran (its `post_action`, a notification the harness only
/// observes), a write to a build file is asked about too (headless: refused).
#[test]
fn a_real_run_taints_the_session_once_a_fetch_ran() {
    let dir = tempfile::tempdir().unwrap();
    let ask = r#"ask() { printf '{"event_type":"%s","payload":%s}' "$1" "$2" | "$AHP_WRAP_BIN" hook generic "$1" >/dev/null 2>&1; echo $? >> rc; }"#;
    let edit = r#"{"tool_name":"Edit","arguments":{"file_path":"package.json","old_string":"a","new_string":"b"}}"#;
    let fetch =
        r#"{"tool_name":"Bash","arguments":{"command":"curl -s https://notes.example.net/setup"}}"#;
    let script = format!(
        "cd '{d}'; {ask}; ask pre_action '{edit}'; ask pre_action '{fetch}'; ask pre_action '{edit}'; \
         ask post_action '{fetch}'; ask pre_action '{edit}'",
        d = dir.path().display(),
    );
    let out = run(
        Command::new(wrap_bin()).args(["--floor", "off", "--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let rc: Vec<String> = read(dir.path(), "rc").lines().map(str::to_owned).collect();
    assert_eq!(rc, ["0", "2", "0", "0", "2"], "{}", show(&out));
    // The summary names the taint's origin in the refusal's reason.
    assert!(
        show(&out)
            .contains("https://notes.example.net/setup (read by `curl`) entered this session"),
        "{}",
        show(&out)
    );
}
