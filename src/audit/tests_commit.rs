//! Tests of telling a crash from a cut: commit heads, verify outcomes, refusing to recover
//! an acknowledged record.

use std::fs;
use std::path::{Path, PathBuf};

use super::tests::{append_bytes, assert_problem, lines, record, write_lines, DECISIONS, KEY};
use super::*;

/// A log written by a writer that closes cleanly, leaving its commit head in `heads`.
fn committed_log(dir: &Path, heads: &Path, n: usize) -> PathBuf {
    let path = dir.join("audit.jsonl");
    let mut log = AuditLog::open_with_heads(&path, Some(KEY.to_vec()), Some(heads)).unwrap();
    for i in 0..n {
        log.append(&record(DECISIONS[i % DECISIONS.len()])).unwrap();
    }
    drop(log);
    path
}

fn cut_last_record_in_half(path: &Path) {
    let bytes = fs::read(path).unwrap();
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    fs::write(path, &bytes[..last_start + (bytes.len() - last_start) / 2]).unwrap();
}

#[test]
fn an_acknowledged_record_cut_before_the_next_run_is_tampering_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let heads = dir.path().join("heads");
    let path = committed_log(dir.path(), &heads, 4);
    let head_file = head::head_path(&heads, &path);
    let committed = head::read(&head_file).expect("a clean close leaves a head");
    assert_eq!(committed.seq, 3);
    assert!(verify_with_head(&path, Some(KEY), Some(&committed)).is_ok());

    cut_last_record_in_half(&path);
    // Verify on this machine: the cut record had been acknowledged.
    let report = verify_with_head(&path, Some(KEY), Some(&committed));
    assert_problem(&report, 4, ProblemKind::CommittedCut { committed: 3 });
    assert_eq!(report.outcome(), Integrity::Tampered);
    // Without the head it is what a crash leaves, and says so; never intact.
    assert_eq!(
        verify(&path, Some(KEY)).outcome(),
        Integrity::CrashTruncated
    );

    // The next run refuses to paper over it.
    let before = fs::read(&path).unwrap();
    let err = AuditLog::open_with_heads(&path, Some(KEY.to_vec()), Some(&heads)).unwrap_err();
    assert!(matches!(err, AuditError::Committed { .. }), "{err}");
    assert!(err.to_string().contains("acknowledged"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before, "nothing was written");

    // Whole records dropped at the end are caught the same way.
    let dir = tempfile::tempdir().unwrap();
    let path = committed_log(dir.path(), &heads, 4);
    let committed = head::read(&head::head_path(&heads, &path)).unwrap();
    let mut all = lines(&path);
    all.pop();
    write_lines(&path, &all);
    let report = verify_with_head(&path, Some(KEY), Some(&committed));
    assert_eq!(
        report.outcome(),
        Integrity::Tampered,
        "{}",
        report.to_text()
    );
    assert!(AuditLog::open_with_heads(&path, Some(KEY.to_vec()), Some(&heads)).is_err());
}

#[test]
fn a_cut_record_recovered_without_evidence_is_a_finding_never_intact() {
    // The head was deleted too (or the log was copied elsewhere): the writer recovers, and
    // verify reports the damage with its own outcome.
    let dir = tempfile::tempdir().unwrap();
    let heads = dir.path().join("heads");
    let path = committed_log(dir.path(), &heads, 4);
    cut_last_record_in_half(&path);
    fs::remove_dir_all(&heads).unwrap();
    let mut log = AuditLog::open_with_heads(&path, Some(KEY.to_vec()), Some(&heads)).unwrap();
    log.append(&record("allow")).unwrap();
    drop(log);
    let report = verify(&path, Some(KEY));
    assert_eq!(
        report.outcome(),
        Integrity::RecoveredDamage,
        "{}",
        report.to_text()
    );
    assert_eq!(report.recoveries.len(), 1);
}

#[test]
fn a_crash_after_the_last_clean_close_is_recovered_and_reported_as_damage() {
    let dir = tempfile::tempdir().unwrap();
    let heads = dir.path().join("heads");
    let path = committed_log(dir.path(), &heads, 2);
    // A run that never closed (a crash: no new head), cut mid-record.
    let mut log = AuditLog::open(&path, Some(KEY.to_vec())).unwrap();
    log.append(&record("allow")).unwrap();
    drop(log);
    append_bytes(&path, br#"{"agent":"claude-code","alg":"hm"#);
    let committed = head::read(&head::head_path(&heads, &path)).unwrap();
    assert_eq!(
        verify_with_head(&path, Some(KEY), Some(&committed)).outcome(),
        Integrity::CrashTruncated
    );
    let log = AuditLog::open_with_heads(&path, Some(KEY.to_vec()), Some(&heads)).unwrap();
    assert_eq!(log.summary().recovered, 1);
    drop(log);
    let committed = head::read(&head::head_path(&heads, &path)).unwrap();
    assert_eq!(
        committed.seq, 3,
        "the recovery record is acknowledged by this close"
    );
    let report = verify_with_head(&path, Some(KEY), Some(&committed));
    assert_eq!(
        report.outcome(),
        Integrity::RecoveredDamage,
        "{}",
        report.to_text()
    );
}

#[test]
fn a_replaced_acknowledged_record_is_caught_by_its_head() {
    let dir = tempfile::tempdir().unwrap();
    let heads = dir.path().join("heads");
    let path = committed_log(dir.path(), &heads, 3);
    let committed = head::read(&head::head_path(&heads, &path)).unwrap();
    // Rewritten from scratch with the key (an insider with the key, or a stale copy).
    fs::remove_file(&path).unwrap();
    let mut log = AuditLog::open(&path, Some(KEY.to_vec())).unwrap();
    for _ in 0..3 {
        log.append(&record("allow")).unwrap();
    }
    drop(log);
    let report = verify_with_head(&path, Some(KEY), Some(&committed));
    assert_problem(&report, 3, ProblemKind::CommittedChanged { seq: 2 });
    let err = AuditLog::open_with_heads(&path, Some(KEY.to_vec()), Some(&heads)).unwrap_err();
    assert!(matches!(err, AuditError::Committed { .. }), "{err}");
}

/// Notifications are written without waiting for the disk; the close syncs them before it
/// leaves its head, so a log of notifications only is acknowledged like any other.
#[test]
fn a_log_of_notifications_only_is_synced_and_acknowledged_at_its_close() {
    let dir = tempfile::tempdir().unwrap();
    let heads = dir.path().join("heads");
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open_with_heads(&path, None, Some(&heads)).unwrap();
    for _ in 0..3 {
        log.append(&record("notified")).unwrap();
    }
    drop(log);
    let committed = head::read(&head::head_path(&heads, &path)).expect("a head at the close");
    assert_eq!(committed.seq, 2);
    assert!(verify_with_head(&path, None, Some(&committed)).is_ok());
}
