//! `ahp-wrap audit verify` exit codes on logs written by real runs: intact, crash-cut,
//! cut after the fact (caught by the commit head a clean close leaves), recovered damage.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const PAYLOAD: &str = r#"{"payload":{"tool_name":"bash","arguments":{"command":"ls"}}}"#;

/// One wrapped run of a generic agent that calls one hook, appending to `log`.
fn wrapped_run(dir: &Path, log: &Path) -> std::process::Output {
    run(
        Command::new(wrap_bin())
            .args(["--audit-log", log.to_str().unwrap(), "--"])
            .args(gated_agent(dir, PAYLOAD, 0))
            .env("XDG_STATE_HOME", dir.join("state")),
        Duration::from_secs(60),
    )
}

fn verify(dir: &Path, log: &Path, state: bool) -> std::process::Output {
    let state = if state {
        dir.join("state")
    } else {
        dir.join("elsewhere")
    };
    run(
        Command::new(wrap_bin())
            .args(["audit", "verify", log.to_str().unwrap()])
            .env("XDG_STATE_HOME", state),
        Duration::from_secs(30),
    )
}

fn cut_last_record_in_half(log: &Path) {
    let bytes = std::fs::read(log).unwrap();
    let start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    std::fs::write(log, &bytes[..start + (bytes.len() - start) / 2]).unwrap();
}

#[test]
fn verify_tells_a_crash_from_a_cut_after_the_fact() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let out = wrapped_run(dir.path(), &log);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let v = verify(dir.path(), &log, true);
    assert_eq!(v.status.code(), Some(0), "intact: {}", show(&v));

    cut_last_record_in_half(&log);
    // On this machine the clean close left its head: the cut record had been acknowledged.
    let v = verify(dir.path(), &log, true);
    assert_eq!(v.status.code(), Some(1), "tampered: {}", show(&v));
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("acknowledged"),
        "{}",
        show(&v)
    );
    // Elsewhere (no head), the same bytes are what a crash leaves: 3, never 0.
    let v = verify(dir.path(), &log, false);
    assert_eq!(v.status.code(), Some(3), "crash-truncated: {}", show(&v));

    // The next run refuses to append to (and so paper over) the cut log.
    let out = wrapped_run(dir.path(), &log);
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was cut or edited after it was closed"),
        "{}",
        show(&out)
    );

    // With the head gone, a run recovers and goes on, and verify reports the damage (4).
    std::fs::remove_dir_all(dir.path().join("state/ahp-wrap/audit-heads")).unwrap();
    let out = wrapped_run(dir.path(), &log);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let v = verify(dir.path(), &log, true);
    assert_eq!(v.status.code(), Some(4), "recovered damage: {}", show(&v));
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("FINDING"),
        "{}",
        show(&v)
    );
}
