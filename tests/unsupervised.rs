//! Honesty about what is not supervised: a generic agent that never calls a hook is told
//! about at start and at exit, and `--require-hooks` turns such a run into a failure.

use ahp_wrap_testkit::common;

use std::process::Command;
use std::time::Duration;

use common::*;

const PAYLOAD: &str = r#"{"payload":{"tool_name":"bash","arguments":{"command":"ls"}}}"#;

fn wrapped(flags: &[&str], agent: &[String]) -> std::process::Output {
    run(
        Command::new(wrap_bin()).args(flags).arg("--").args(agent),
        Duration::from_secs(60),
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_generic_agent_that_calls_no_hook_is_called_unsupervised_at_start_and_exit() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("id_rsa");
    std::fs::write(&secret, "PRIVATE-KEY-BYTES\n").unwrap();
    let agent = vec![
        "bash".to_owned(),
        "-c".to_owned(),
        format!("cat '{}'; exit 7", secret.display()),
    ];
    let out = wrapped(&[], &agent);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(7),
        "the agent's code: {}",
        show(&out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "PRIVATE-KEY-BYTES\n");
    // At start, in a few words: what is and is not asked about, and how to fix it.
    let notice = err.lines().next().unwrap_or_default().to_owned();
    for what in [
        "framework generic",
        "are asked about (PATH shims)",
        "ahp-wrap hook generic",
        "--framework",
    ] {
        assert!(
            notice.contains(what),
            "start notice lacks {what:?}: {}",
            show(&out)
        );
    }
    // At exit: that nothing was supervised, and the way to make CI fail on it.
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("never called `ahp-wrap hook`")
            && last.contains("none of its actions went through the policy"),
        "{}",
        show(&out)
    );
    assert!(last.contains("--require-hooks"), "{}", show(&out));
}

#[test]
fn require_hooks_fails_a_run_without_hooks_and_passes_the_code_through_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let silent = vec!["sh".to_owned(), "-c".to_owned(), "exit 7".to_owned()];
    let out = wrapped(&["--require-hooks"], &silent);
    assert_eq!(out.status.code(), Some(122), "{}", show(&out));
    assert!(
        stderr(&out).contains("exiting 122 (--require-hooks) instead of the agent's 7"),
        "{}",
        show(&out)
    );
    // Success of the agent does not hide it either.
    let ok = vec!["true".to_owned()];
    assert_eq!(wrapped(&["--require-hooks"], &ok).status.code(), Some(122));

    // An agent that calls a hook keeps its own code, and no warning is printed.
    let audit = dir.path().join("audit.jsonl");
    let gated = gated_agent(dir.path(), PAYLOAD, 7);
    let out = wrapped(
        &["--require-hooks", "--audit-log", audit.to_str().unwrap()],
        &gated,
    );
    assert_eq!(out.status.code(), Some(7), "{}", show(&out));
    assert_eq!(read(dir.path(), "hook_rc").trim(), "0", "{}", show(&out));
    assert!(!stderr(&out).contains("never called"), "{}", show(&out));

    // Without the flag, a silent agent's code passes through unchanged.
    assert_eq!(wrapped(&[], &silent).status.code(), Some(7));
}

#[test]
fn the_no_hooks_warning_is_audited_and_in_the_markdown_summary() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let md = dir.path().join("summary.md");
    let silent = vec!["true".to_owned()];
    let out = wrapped(
        &[
            "--audit-log",
            audit.to_str().unwrap(),
            "--summary-md",
            md.to_str().unwrap(),
        ],
        &silent,
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("\"event_type\":\"error\"") && l.contains("never called")),
        "{log}"
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("none of its actions went through the policy"),
        "{md}"
    );
}

#[test]
fn a_generic_agent_whose_commands_went_through_path_shims_is_not_called_unsupervised() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk"), "x").unwrap();
    let agent = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("rm '{}'", dir.path().join("junk").display()),
    ];
    let out = wrapped(&[], &agent);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!dir.path().join("junk").exists(), "the allowed rm ran");
    assert!(
        !stderr(&out).contains("never called `ahp-wrap hook`"),
        "its rm was supervised: {}",
        show(&out)
    );
    // --require-hooks still asks for hooks: a PATH shim is not one.
    let out = wrapped(&["--require-hooks"], &agent);
    assert_eq!(out.status.code(), Some(122), "{}", show(&out));
}

#[test]
fn a_generic_agent_whose_connections_were_audited_is_not_said_to_have_had_none() {
    // A direct connection to an address outside: the floor refuses and audits it.
    let agent = vec![
        "python3".to_owned(),
        "-c".to_owned(),
        "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), 5)\nexcept OSError as e:\n    print('refused', e.errno)".to_owned(),
    ];
    let out = wrapped(&["--summary", "never"], &agent);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("refused 13"),
        "EACCES: {}",
        show(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains("only its tree's network connections (1) went through the policy"),
        "{}",
        show(&out)
    );
    assert!(!err.contains("none of its actions"), "{}", show(&out));
}
