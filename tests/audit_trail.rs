//! The default audit trail through real runs: its retention at a run's start (and what
//! `audit show` then says of a removed run), a trail that cannot be written (the run goes
//! on, said), and `--audit-log none` (said, nothing written).

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::{run, show, wrap_bin};

/// A run's file in the trail at `dir`, last written `age` ago.
fn old_run(dir: &Path, session: &str, age: Duration) -> std::path::PathBuf {
    let path = dir.join(format!("20260101T000000.000Z-{session}.jsonl"));
    std::fs::write(&path, "{}\n").unwrap();
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
    path
}

#[test]
fn a_run_prunes_the_trail_and_audit_show_says_what_retention_removed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let trail = state.join("ahp-wrap/audit");
    std::fs::create_dir_all(&trail).unwrap();
    let day = Duration::from_secs(86_400);
    let old = old_run(&trail, "0ld0ld00-aaaa", 40 * day);
    let recent = old_run(&trail, "4ecent00-bbbb", day);
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .args(["-q", "--", "true"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        !old.exists(),
        "a run 40 days old is past the default 30 days"
    );
    assert!(recent.exists(), "a run a day old is kept");
    let runs: Vec<_> = std::fs::read_dir(&trail)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") && n != "retired.jsonl")
        .collect();
    assert_eq!(runs.len(), 2, "the recent run and this one: {runs:?}");
    let retired = std::fs::read_to_string(trail.join("retired.jsonl")).unwrap();
    assert!(retired.contains("0ld0ld00-aaaa"), "{retired}");
    let shown = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .args(["audit", "show", "--run", "0ld0ld00"]),
        Duration::from_secs(30),
    );
    assert_ne!(shown.status.code(), Some(0), "{}", show(&shown));
    assert!(
        String::from_utf8_lossy(&shown.stderr).contains("removed by the trail's retention"),
        "{}",
        show(&shown)
    );
    // A smaller size limit removes the recent one too, at the next run.
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .args(["-q", "--audit-retention", "30d,1B", "--", "true"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!recent.exists(), "past the size limit");
}

#[test]
fn a_trail_that_cannot_be_written_does_not_stop_the_run_and_none_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A state directory beneath a file: nothing can be made there.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let ran = dir.path().join("ran");
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", file.join("state"))
            .args(["--", "touch"])
            .arg(&ran),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(ran.exists(), "the agent ran");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("this run keeps no audit file"),
        "{}",
        show(&out)
    );
    let state = dir.path().join("state");
    let out = run(
        Command::new(wrap_bin())
            .env("XDG_STATE_HOME", &state)
            .args(["--audit-log", "none", "--", "true"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--audit-log none: this run keeps no audit log"),
        "{}",
        show(&out)
    );
    assert!(!state.join("ahp-wrap/audit").exists());
}
