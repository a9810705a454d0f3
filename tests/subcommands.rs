//! The subcommands' exits as a script sees them: a reader that went away does not make
//! ahp-wrap panic, and each outcome has its documented code.

use ahp_wrap_testkit::common;

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// Runs `ahp-wrap <args>` with its stdout a pipe whose reading end is already closed, as
/// `ahp-wrap policy default | head -0` leaves it; returns its exit code and stderr.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
    drop(read);
    let out = Command::new(wrap_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    // The default policy (33 KiB) is written in one go: every byte meets the closed pipe.
    let (code, stderr) = with_stdout_closed(&["policy", "default"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(&policy, "").unwrap();
    let (code, stderr) = with_stdout_closed(&["policy", "check", policy.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn each_outcome_has_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nid = 3\n").unwrap();
    let code = |args: &[&str]| {
        Command::new(wrap_bin())
            .args(args)
            .output()
            .unwrap()
            .status
            .code()
    };
    // A check that finds a problem: 1; a command that cannot run: 2; the wrapper refusing
    // to run: 125; a missing agent: 127.
    assert_eq!(code(&["policy", "check", bad.to_str().unwrap()]), Some(1));
    assert_eq!(
        code(&["audit", "summary", "/nonexistent/audit.jsonl"]),
        Some(2)
    );
    assert_eq!(code(&["--framework", "nope", "--", "true"]), Some(125));
    assert_eq!(code(&["--", "/nonexistent/agent"]), Some(127));
    // A mistyped option is the wrapper refusing (not clap's 2, which an agent may return,
    // and not an agent named `--polcy`); help is not an error.
    assert_eq!(code(&["--polcy", "p.toml", "--", "true"]), Some(125));
    assert_eq!(code(&["serve", "--listn", "stdio"]), Some(125));
    assert_eq!(code(&["--help"]), Some(0));
    // The agent's own 2 passes through.
    assert_eq!(code(&["-q", "--", "sh", "-c", "exit 2"]), Some(2));
}

/// Nothing of ours written to a pipe (CI logs, `2> file`) carries a terminal escape: a
/// warning, the start notes, a refusal, the summary, a usage error, the help.
#[test]
fn nothing_we_write_into_a_pipe_has_an_escape_byte() {
    let dir = tempfile::tempdir().unwrap();
    let runs: [&[&str]; 5] = [
        &["--", "sh", "-c", "curl -s http://169.254.169.254/; exit 0"],
        &["--summary", "always", "--", "true"],
        &["--polcy", "x", "--", "true"],
        &["--help"],
        &["policy", "check", "/nonexistent.toml"],
    ];
    for args in runs {
        let out = run(
            Command::new(wrap_bin()).args(args).current_dir(dir.path()),
            Duration::from_secs(30),
        );
        let said = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        assert!(!said.is_empty(), "{args:?} said nothing to check");
        assert!(
            !said.contains(&0x1b),
            "{args:?}: an escape byte in a pipe:\n{}",
            show(&out)
        );
    }
}

/// Log lines written to a pipe (CI logs, `2> file`) carry no terminal colour codes.
#[test]
fn warnings_into_a_pipe_have_no_colour_codes() {
    let out = run(
        Command::new(wrap_bin()).args([
            "--harness",
            "stdio:/nonexistent/harness",
            "--summary",
            "never",
            "--",
            "true",
        ]),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WARN"),
        "no log line to check:\n{}",
        show(&out)
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a pipe:\n{stderr:?}"
    );
}

/// `policy eval` says its decision in its exit code, as a script tests it: 0 allowed, 1
/// blocked, 3 escalated; the decision is printed too.
#[test]
fn policy_eval_exits_with_its_decision() {
    for (command, code, decision) in [
        ("ls -la", 0, "allow"),
        ("rm -rf ~", 1, "block"),
        ("rm -rf $TARGET", 3, "escalate"),
    ] {
        let event = serde_json::json!({
            "event_type": "pre_action",
            "payload": {"tool_name": "Bash", "arguments": {"command": command},
                        "context": {"working_directory": "/home/user/project"}},
        });
        let out = policy_with(&["eval"], &event);
        let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(printed["decision"], decision, "{command}: {printed}");
        assert_eq!(out.status.code(), Some(code), "{command}: {printed}");
    }
}

/// An audit key signs the run's file in the trail when no --audit-log is given; with
/// `--audit-log none` it has nowhere to sign, which is said, not ignored: the option is refused
/// (125) before the agent runs; the variable is warned about.
#[test]
fn an_audit_key_signs_the_trail_and_is_refused_with_no_log() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "0123456789abcdef").unwrap();
    let state = dir.path().join("state");
    let ran = dir.path().join("ran");
    // What `--audit-log none` runs must leave: no trail.
    let no_trail = || {
        assert!(
            !state.join("ahp-wrap/audit").exists(),
            "--audit-log none wrote to the trail"
        )
    };
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .arg("--audit-key-file")
            .arg(&key)
            .args(["--audit-log", "none", "--", "touch"])
            .arg(&ran),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot go with --audit-log none"),
        "{}",
        show(&out)
    );
    assert!(!ran.exists(), "the agent ran");
    no_trail();
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .env("AHP_WRAP_AUDIT_KEY", "0123456789abcdef")
            .args(["--audit-log", "none", "--summary", "never", "--", "true"]),
        Duration::from_secs(30),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("AHP_WRAP_AUDIT_KEY is set but --audit-log none keeps no log"),
        "{}",
        show(&out)
    );
    no_trail();
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .arg("--audit-key-file")
            .arg(&key)
            .args(["--", "touch"])
            .arg(&ran),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let trail: Vec<_> = std::fs::read_dir(state.join("ahp-wrap/audit"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(trail.len(), 1, "one file for the run: {trail:?}");
    let first = std::fs::read_to_string(&trail[0]).unwrap();
    assert!(first.contains(r#""alg":"hmac-sha256""#), "{first}");
    let verify = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .args(["audit", "verify"])
            .arg(&trail[0])
            .arg("--key-file")
            .arg(&key),
        Duration::from_secs(30),
    );
    assert_eq!(verify.status.code(), Some(0), "{}", show(&verify));
}

/// `policy explain` says which rule decided and why, every rule that matched, and the rules
/// that came closest with the condition that failed; it exits as `policy eval` does.
#[test]
fn policy_explain_names_the_deciding_rule_and_the_near_misses() {
    let ci = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/policies/ci.toml");
    let explain = |policy: Option<&str>, command: &str| {
        let event = serde_json::json!({
            "event_type": "pre_action",
            "payload": {"tool_name": "Bash", "arguments": {"command": command}},
        });
        let args: Vec<&str> = ["explain"].into_iter().chain(policy).collect();
        let out = policy_with(&args, &event);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, said) = explain(Some(ci), "git push origin main");
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.starts_with("decision: block by rule ci-no-push: this CI job does not push"),
        "{said}"
    );
    assert!(
        said.contains("  ci-no-push (block): command.program, command.args_any"),
        "{said}"
    );
    // Nothing matched: the rules about git that did not apply, and what they lacked.
    let (code, said) = explain(None, "git status");
    assert_eq!(code, Some(0), "{said}");
    assert!(said.starts_with("decision: no rule matched"), "{said}");
    assert!(
        said.contains(
            "force-push-default-branch (block): held command.program; not command.args_any"
        ),
        "{said}"
    );
    assert!(!said.contains("\nmatched ("), "{said}");
}

/// `ahp-wrap policy ARGS` with `event` on stdin.
fn policy_with(args: &[&str], event: &serde_json::Value) -> std::process::Output {
    let mut cmd = Command::new(wrap_bin());
    cmd.arg("policy").args(args);
    common::process::run_with_input(
        &mut cmd,
        event.to_string().as_bytes(),
        Duration::from_secs(60),
    )
    .output
}

/// `-q` (and `--log error`) silence the notes before the run and the automatic summary
/// after it; the refusal itself is still said. Without them both are there.
#[test]
fn quiet_keeps_the_refusal_and_drops_the_notes_and_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let agent = ["--", "sh", "-c", "curl -s http://169.254.169.254/; exit 0"];
    let said = |extra: &[&str]| {
        let out = run(
            Command::new(wrap_bin())
                .args(extra)
                .args(agent)
                .current_dir(dir.path()),
            Duration::from_secs(30),
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let loud = said(&[]);
    assert!(loud.contains("ahp-wrap: note: "), "{loud}");
    assert!(loud.contains("audited event"), "{loud}");
    for quiet in [&["-q"][..], &["--log", "error"]] {
        let text = said(quiet);
        assert!(text.contains("curl: blocked: "), "{quiet:?}: {text}");
        assert!(!text.contains("note: "), "{quiet:?}: {text}");
        assert!(!text.contains("audited event"), "{quiet:?}: {text}");
    }
}

/// The embedded default policy is built on a thread of its own once the agent has run a
/// moment (20 ms), before any event asks for it, so that the agent's first tool call does
/// not wait for it: a run whose agent does nothing but wait says so in its debug log.
#[test]
fn the_embedded_policy_is_built_ahead_of_the_first_event() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        Command::new(wrap_bin())
            .args(["--log", "debug", "--", "sh", "-c", "sleep 0.5"])
            .current_dir(dir.path()),
        Duration::from_secs(30),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the embedded policy was built ahead of the first event"),
        "{said}"
    );
}

/// A command that fails says why once, on one `ahp-wrap:` line with the whole cause chain,
/// and exits with the failure's own code: the one place that prints is `main`.
#[test]
fn a_failure_is_said_once_with_its_cause_and_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let missing = missing.to_str().unwrap();
    let cases: [(&[&str], i32, &str); 3] = [
        // A typed error with a source: the cause comes after the context.
        (
            &["policy", "check", missing],
            1,
            "No such file or directory",
        ),
        // Text, from an option check.
        (
            &["serve", "--listen", "bogus"],
            2,
            "unknown --listen \"bogus\"",
        ),
        // The run's own failure: the agent cannot be found, as a shell says it.
        (
            &["-q", "--", "/nonexistent/agent"],
            127,
            "command not found",
        ),
    ];
    for (args, code, why) in cases {
        let out = Command::new(wrap_bin())
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("ahp-wrap: ") && l.contains(why))
            .collect();
        assert_eq!(said.len(), 1, "{args:?}: said once, not {said:?}: {stderr}");
    }
    // The cause chain: the context, then what the system said.
    let out = Command::new(wrap_bin())
        .args(["policy", "check", missing])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{missing}: No such file or directory")),
        "{stderr}"
    );
}

/// `ahp-wrap --help` is the summary, under 120 lines, one line a command; each command's
/// own `--help` and the manual page say the rest.
#[test]
fn the_help_is_a_summary_under_120_lines_with_one_line_a_command() {
    let help = |args: &[&str]| {
        let out = run(Command::new(wrap_bin()).args(args), Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = help(&["--help"]);
    assert_eq!(text, help(&["-h"]), "--help and -h are the same summary");
    assert!(
        text.lines().count() <= 120,
        "{} lines:\n{text}",
        text.lines().count()
    );
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(commands.len() > 10, "{text}");
    for line in commands {
        assert!(
            line.chars().count() <= 80,
            "a command's line past 80 columns: {line:?}"
        );
    }
    assert!(text.contains("man ahp-wrap"), "{text}");
    assert!(
        !text.contains("README"),
        "no document that is not installed: {text}"
    );
    // The details: the command's own help, the manual page.
    assert!(help(&["audit", "show", "--help"]).contains("--runs"));
    assert!(help(&["man"]).contains("workspace the agent may write"));
}
