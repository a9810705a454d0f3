//! Tests of the audit log as a whole: tampering, crashes and recovery, keys, redaction, summaries.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::chain::{canonical, Signer};
use super::line;
use super::*;

pub(super) const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const OTHER_KEY: &[u8] = b"fedcba9876543210fedcba9876543210";

pub(super) fn record(decision: &str) -> AuditRecord {
    AuditRecord {
        ts: "2025-01-02T03:04:05.678Z".into(),
        session: "s-1".into(),
        framework_session: Some("fw-9".into()),
        agent: "claude-code".into(),
        depth: 0,
        event_type: "pre_action".into(),
        payload: json!({"tool_name": "bash", "arguments": {"command": "ls -la"}}),
        decision: decision.into(),
        reason: (decision == "block").then(|| "not allowed".into()),
        source: "rule:test".into(),
        latency_us: 250,
        observed: None,
        peer: None,
        reversible: None,
    }
}

pub(super) const DECISIONS: [&str; 5] = ["allow", "block", "allow", "notified", "modify"];

/// A log of `n` records (decisions cycling through [`DECISIONS`]).
pub(super) fn write_log(dir: &Path, n: usize, key: Option<&[u8]>) -> PathBuf {
    let path = dir.join("audit.jsonl");
    let mut log = AuditLog::open(&path, key.map(<[u8]>::to_vec)).unwrap();
    for i in 0..n {
        log.append(&record(DECISIONS[i % DECISIONS.len()])).unwrap();
    }
    path
}

pub(super) fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

pub(super) fn write_lines(path: &Path, lines: &[String]) {
    fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

pub(super) fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Line `line` (1-based) edited by `edit`, re-encoded canonically but not re-hashed.
fn edit_line(path: &Path, line: usize, edit: impl FnOnce(&mut Value)) {
    let mut all = lines(path);
    let mut value: Value = serde_json::from_str(&all[line - 1]).unwrap();
    edit(&mut value);
    all[line - 1] = String::from_utf8(canonical(&value)).unwrap();
    write_lines(path, &all);
}

/// Asserts the first problem is at `line` and of `kind`.
pub(super) fn assert_problem(report: &VerifyReport, line: u64, kind: ProblemKind) {
    let p = report
        .problem
        .as_ref()
        .unwrap_or_else(|| panic!("no problem: {report:?}"));
    assert_eq!((p.line, &p.kind), (line, &kind), "{}", report.to_text());
}

#[test]
fn an_intact_log_verifies_plain_and_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let plain = write_log(dir.path(), 5, None);
    let report = verify(&plain, None);
    assert!(report.is_ok(), "{}", report.to_text());
    assert_eq!((report.records, report.alg), (5, Some(Alg::Sha256)));

    let dir = tempfile::tempdir().unwrap();
    let keyed = write_log(dir.path(), 5, Some(KEY));
    let report = verify(&keyed, Some(KEY));
    assert!(report.is_ok(), "{}", report.to_text());
    assert_eq!((report.records, report.alg), (5, Some(Alg::HmacSha256)));
}

#[test]
fn lines_carry_the_chain_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 2, Some(KEY));
    let all = lines(&path);
    let first: Value = serde_json::from_str(&all[0]).unwrap();
    let second: Value = serde_json::from_str(&all[1]).unwrap();
    assert_eq!(first["seq"], 0);
    assert_eq!(first["prev"], chain::GENESIS);
    assert_eq!(first["alg"], "hmac-sha256");
    assert_eq!(first["kid"], chain::key_id(KEY));
    assert_eq!(first["v"], 1);
    assert_eq!(second["seq"], 1);
    assert_eq!(second["prev"], first["hash"]);
    assert_eq!(first["decision"], "allow");
    assert_eq!(first["framework_session"], "fw-9");
}

#[test]
fn hmac_and_plain_logs_differ_only_in_alg_kid_and_hashes() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let plain: Value = serde_json::from_str(&lines(&write_log(d1.path(), 1, None))[0]).unwrap();
    let keyed: Value =
        serde_json::from_str(&lines(&write_log(d2.path(), 1, Some(KEY)))[0]).unwrap();
    assert_eq!(plain["alg"], "sha256");
    assert!(plain.get("kid").is_none());
    assert_ne!(plain["hash"], keyed["hash"]);
    let strip = |mut v: Value| {
        let m = v.as_object_mut().unwrap();
        for k in ["alg", "kid", "hash"] {
            m.remove(k);
        }
        v
    };
    assert_eq!(strip(plain), strip(keyed));
}

#[test]
fn an_edited_field_is_a_hash_mismatch_on_its_line() {
    for key in [None, Some(KEY)] {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path(), 5, key);
        edit_line(&path, 2, |v| v["decision"] = "allow".into());
        let report = verify(&path, key);
        assert_problem(&report, 2, ProblemKind::HashMismatch);
        assert_eq!(report.records, 1);
    }
}

#[test]
fn an_edit_that_leaves_the_canonical_form_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 3, None);
    let mut all = lines(&path);
    all[1] = all[1].replacen(",\"decision\":", ", \"decision\":", 1);
    write_lines(&path, &all);
    assert_problem(&verify(&path, None), 2, ProblemKind::NonCanonical);
}

#[test]
fn a_rehashed_edit_breaks_the_chain_at_the_next_line() {
    // Without a key anyone can recompute one line's hash; the next line still points at
    // the old one.
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 4, None);
    edit_line(&path, 2, |v| {
        v["decision"] = "allow".into();
        let m = v.as_object_mut().unwrap();
        m.remove("hash");
        let hash = Signer::new(None).hash(&canonical(v));
        v["hash"] = hash.into();
    });
    assert_problem(&verify(&path, None), 3, ProblemKind::ChainBroken);
}

#[test]
fn a_deleted_line_is_reported_as_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 5, Some(KEY));
    let mut all = lines(&path);
    all.remove(2);
    write_lines(&path, &all);
    let report = verify(&path, Some(KEY));
    let dropped = ProblemKind::Dropped {
        expected: 2,
        found: 3,
    };
    assert_problem(&report, 3, dropped);
    assert_eq!(report.records, 2);
}

#[test]
fn swapped_lines_are_reported_as_reordered() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 5, Some(KEY));
    let mut all = lines(&path);
    all.swap(1, 2);
    write_lines(&path, &all);
    let reordered = ProblemKind::Reordered {
        expected: 1,
        found: 2,
    };
    assert_problem(&verify(&path, Some(KEY)), 2, reordered);
}

#[test]
fn a_last_line_cut_mid_way_is_a_truncation_not_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 4, Some(KEY));
    let bytes = fs::read(&path).unwrap();
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + 30;
    fs::write(&path, &bytes[..cut]).unwrap();
    let report = verify(&path, Some(KEY));
    assert_problem(&report, 4, ProblemKind::Truncated { bytes: 30 });
    assert_eq!(report.problem.as_ref().unwrap().offset, last_start as u64);
    assert_eq!(report.outcome(), Integrity::CrashTruncated);
    assert!(report.problem.unwrap().kind.is_crash());
    assert_eq!(report.records, 3);
}

#[test]
fn a_line_forged_without_the_key_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 3, Some(KEY));
    let prev = serde_json::from_str::<Value>(&lines(&path)[2]).unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    let forged = record("allow");
    let forgeries = [
        // Plain SHA-256, honest about it.
        (line::encode(&forged, 3, &prev, &Signer::new(None)).0, {
            let (expected, found) = (Alg::HmacSha256, Alg::Sha256);
            ProblemKind::AlgChanged { expected, found }
        }),
        // Another key.
        (
            line::encode(&forged, 3, &prev, &Signer::new(Some(OTHER_KEY))).0,
            ProblemKind::WrongKey,
        ),
        // Another key, claiming the real key's id.
        (
            {
                let (l, _) = line::encode(&forged, 3, &prev, &Signer::new(Some(OTHER_KEY)));
                let mut v: Value = serde_json::from_slice(&l).unwrap();
                v["kid"] = chain::key_id(KEY).into();
                let mut l = canonical(&v);
                l.push(b'\n');
                l
            },
            ProblemKind::HashMismatch,
        ),
    ];
    let original = fs::read(&path).unwrap();
    for (line, kind) in forgeries {
        fs::write(&path, &original).unwrap();
        append_bytes(&path, &line);
        let report = verify(&path, Some(KEY));
        assert_problem(&report, 4, kind);
        assert_eq!(report.records, 3);
    }
}

#[test]
fn the_wrong_key_or_a_missing_key_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = write_log(dir.path(), 2, Some(KEY));
    assert_problem(&verify(&keyed, Some(OTHER_KEY)), 1, ProblemKind::WrongKey);
    assert_problem(&verify(&keyed, None), 1, ProblemKind::KeyRequired);

    let dir = tempfile::tempdir().unwrap();
    let plain = write_log(dir.path(), 2, None);
    assert_problem(&verify(&plain, Some(KEY)), 1, ProblemKind::NotKeyed);
}

#[test]
fn garbage_in_the_middle_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 3, None);
    let mut all = lines(&path);
    all.insert(1, "{\"agent\":\"x\"".into());
    write_lines(&path, &all);
    let report = verify(&path, None);
    assert_problem(&report, 2, ProblemKind::CutInTheMiddle);
    assert_eq!(report.outcome(), Integrity::Tampered);
}

#[test]
fn a_crash_mid_write_verifies_up_to_the_last_record_and_reopening_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 3, Some(KEY));
    let clean_len = fs::metadata(&path).unwrap().len();
    let partial = br#"{"agent":"claude-code","alg":"hmac-sha2"#;
    append_bytes(&path, partial);

    let report = verify(&path, Some(KEY));
    assert_eq!(report.records, 3);
    let truncated = ProblemKind::Truncated {
        bytes: partial.len() as u64,
    };
    assert_problem(&report, 4, truncated);

    let mut log = AuditLog::open(&path, Some(KEY.to_vec())).unwrap();
    assert_eq!(log.summary().recovered, 1);
    assert_eq!(log.next_seq(), Some(4));
    log.append(&record("allow")).unwrap();
    log.append(&record("block")).unwrap();
    drop(log);

    // Recovered, but never called intact: a cut before this reopening looks the same.
    let report = verify(&path, Some(KEY));
    assert!(report.problem.is_none(), "{}", report.to_text());
    assert_eq!(report.outcome(), Integrity::RecoveredDamage);
    assert!(report.to_text().contains("FINDING: a record was cut"));
    assert_eq!(report.records, 6);
    let recovery = Recovery {
        line: 5,
        damaged_offset: clean_len,
        damaged_bytes: partial.len() as u64 + 1,
    };
    assert_eq!(report.recoveries, [recovery]);
    // The damaged bytes are still there: nothing was rewritten.
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[clean_len as usize..][..partial.len()], partial);
}

#[test]
fn a_crash_during_recovery_and_zero_filled_blocks_are_recovered_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 2, None);
    let clean_len = fs::metadata(&path).unwrap().len();
    // First crash: zeros (a block allocated but never written); second crash: the
    // recovery write itself cut short after its newline and a few bytes.
    append_bytes(&path, b"\0\0\0\0\0\0\0\0\n{\"agent\":\"ahp-w");
    let damaged = fs::metadata(&path).unwrap().len() - clean_len;
    let mut log = AuditLog::open(&path, None).unwrap();
    log.append(&record("allow")).unwrap();
    drop(log);
    let report = verify(&path, None);
    assert_eq!(
        report.outcome(),
        Integrity::RecoveredDamage,
        "{}",
        report.to_text()
    );
    assert_eq!(report.records, 4);
    assert_eq!(report.recoveries[0].damaged_offset, clean_len);
    assert_eq!(report.recoveries[0].damaged_bytes, damaged + 1);
}

#[test]
fn a_crash_that_lost_only_the_newline_keeps_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 3, None);
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let mut log = AuditLog::open(&path, None).unwrap();
    assert_eq!(log.next_seq(), Some(3));
    log.append(&record("allow")).unwrap();
    drop(log);
    let report = verify(&path, None);
    assert!(report.is_ok(), "{}", report.to_text());
    assert_eq!((report.records, report.recoveries.len()), (4, 0));
}

#[test]
fn reopening_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 2, Some(KEY));
    let mut log = AuditLog::open(&path, Some(KEY.to_vec())).unwrap();
    assert_eq!(log.next_seq(), Some(2));
    log.append(&record("block")).unwrap();
    assert_eq!(
        log.summary().records,
        1,
        "the summary covers this handle's records"
    );
    drop(log);
    let report = verify(&path, Some(KEY));
    assert!(report.is_ok(), "{}", report.to_text());
    assert_eq!(report.records, 3);
}

#[test]
fn open_refuses_another_key_a_foreign_file_and_a_second_writer() {
    let dir = tempfile::tempdir().unwrap();
    let keyed = write_log(dir.path(), 1, Some(KEY));
    for key in [None, Some(OTHER_KEY.to_vec())] {
        let err = AuditLog::open(&keyed, key).unwrap_err();
        assert!(matches!(err, AuditError::KeyMismatch { .. }), "{err}");
    }

    let readme = dir.path().join("README.md");
    fs::write(&readme, "# Not a log\n").unwrap();
    let err = AuditLog::open(&readme, None).unwrap_err();
    assert!(matches!(err, AuditError::NotAnAuditLog { .. }), "{err}");
    assert_eq!(fs::read_to_string(&readme).unwrap(), "# Not a log\n");

    let _first = AuditLog::open(&keyed, Some(KEY.to_vec())).unwrap();
    let err = AuditLog::open(&keyed, Some(KEY.to_vec())).unwrap_err();
    assert!(matches!(err, AuditError::Locked { .. }), "{err}");
}

#[test]
fn a_new_log_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 1, None);
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn secrets_are_redacted_before_they_reach_the_file_or_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, None).unwrap();
    let mut rec = record("block");
    let secret = "ghp_0123456789abcdefghijABCDEFGHIJ0123";
    rec.payload = json!({"tool_name": "bash", "arguments": {
        "command": format!("curl -H 'Authorization: Bearer {secret}' https://api"),
        "env": {"GITHUB_TOKEN": secret}}});
    rec.reason = Some(format!("leaks {secret}"));
    log.append(&rec).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains(secret), "{text}");
    assert!(text.contains("Authorization: Bearer [REDACTED:bearer]' https://api"));
    let summary_text = log.summary().to_text();
    assert!(!summary_text.contains(secret), "{summary_text}");
    assert!(verify(&path, None).is_ok());
}

#[test]
fn oversized_payloads_are_replaced_by_their_digest() {
    let mut rec = record("allow");
    rec.payload = json!({"content": "a".repeat(5000)});
    let (l, _) = line::encode_within(&rec, 0, chain::GENESIS, &Signer::new(None), 4096);
    assert!(l.len() < 1024);
    let v: Value = serde_json::from_slice(&l).unwrap();
    assert_eq!(v["payload"]["bytes"], 5000 + 14);
    assert_eq!(v["payload"]["sha256"].as_str().map(str::len), Some(64));
    assert!(line::parse(&l[..l.len() - 1]).is_ok());
}

#[test]
fn what_observe_mode_let_through_is_a_field_the_summary_counts_and_verify_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut log = AuditLog::open(&path, None).unwrap();
    let mut seen = record("allow");
    seen.observed = Some("block".into());
    seen.reason = Some("observe mode: would have decided block: rm -rf /".into());
    log.append(&seen).unwrap();
    // The reason's words alone do not make a record an observed block.
    let mut words = record("allow");
    words.reason = Some("observe mode: would have decided block".into());
    log.append(&words).unwrap();
    let mut modify = record("allow");
    modify.observed = Some("modify".into());
    log.append(&modify).unwrap();
    let summary = log.summary();
    assert_eq!(summary.observed, 1);
    assert_eq!(summary.blocked.len(), 1);
    assert!(!summary.blocked[0].enforced);
    // Nothing was blocked: the Markdown does not say so beside its count of allows.
    let md = summary.to_markdown();
    assert!(!md.contains("#### Blocked"), "{md}");
    assert!(
        md.contains("Would have been blocked (observe mode: let through) (1)"),
        "{md}"
    );
    let text = fs::read_to_string(&path).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["observed"], "block");
    let second: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert!(second.get("observed").is_none(), "{second}");
    assert!(verify(&path, None).is_ok());
}
