//! `audit show`'s tests: what a person reads of a trail's runs.

use super::show::{parse_since, render, Show};
use super::trail;
use super::AuditRecord;
use crate::audit::AuditLog;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

fn record(ts: &str, decision: &str, source: &str, payload: serde_json::Value) -> AuditRecord {
    AuditRecord {
        ts: ts.into(),
        session: "cbfc8c6a-e0eb".into(),
        framework_session: None,
        agent: "claude-code-1".into(),
        depth: 0,
        event_type: if decision == "notified" {
            "session_start".into()
        } else {
            "pre_action".into()
        },
        payload,
        decision: decision.into(),
        reason: (decision == "block").then(|| "destructive command".into()),
        source: source.into(),
        latency_us: 200,
        observed: None,
        peer: None,
    }
}

fn trail_with_a_run(dir: &Path) -> PathBuf {
    let path = dir.join("20261128T194130.000Z-cbfc8c6a-e0eb.jsonl");
    let mut log = AuditLog::open(&path, None).unwrap();
    let start = json!({"framework": "claude-code", "command": ["claude", "-p", "fix it"]});
    log.append(&record(
        "2026-11-28T19:41:30.000Z",
        "notified",
        "harness",
        start,
    ))
    .unwrap();
    let call = |c: &str| json!({"tool_name": "Bash", "arguments": {"command": c}});
    log.append(&record(
        "2026-11-28T19:41:31.000Z",
        "allow",
        "policy",
        call("ls"),
    ))
    .unwrap();
    log.append(&record(
        "2026-11-28T19:41:32.000Z",
        "block",
        "policy:no-rm-rf",
        call("rm -rf ~/projects/other-project/with/a/long/path/that/does/not/fit"),
    ))
    .unwrap();
    path
}

#[test]
fn the_last_run_shows_each_decision_with_its_rule_and_reason_fit_to_the_width() {
    let dir = tempfile::tempdir().unwrap();
    trail_with_a_run(dir.path());
    let text = render(&Show::default(), Some(dir.path()), Some(60)).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("run cbfc8c6a-e0eb  2026-11-28 19:41:30 UTC") && first.ends_with('…')
    );
    assert!(
        text.contains("19:41:31  allow    policy    Bash: ls\n"),
        "{text}"
    );
    assert!(
        text.contains("19:41:32  block    no-rm-rf  Bash: rm -rf"),
        "{text}"
    );
    assert!(text.contains("↳ destructive command"), "{text}");
    assert!(
        !text.contains("session_start"),
        "notifications only with --all: {text}"
    );
    let path_line = |l: &str| l.ends_with(".jsonl");
    assert!(
        text.lines()
            .all(|l| path_line(l) || l.chars().count() <= 60),
        "{text}"
    );
    // Not a terminal: nothing is cut.
    let full = render(&Show::default(), Some(dir.path()), None).unwrap();
    assert!(full.contains("that/does/not/fit"), "{full}");
    assert!(
        full.starts_with(
            "run cbfc8c6a-e0eb  2026-11-28 19:41:30 UTC  claude-code: claude -p fix it  \
             (2 decided, 1 blocked)\n"
        ),
        "{full}"
    );
    let blocked = Show {
        blocked: true,
        json: true,
        ..Show::default()
    };
    let json = render(&blocked, Some(dir.path()), None).unwrap();
    assert_eq!(json.lines().count(), 1, "{json}");
    let line: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(line["seq"], 2, "the line as the log holds it");
}

#[test]
fn a_run_is_found_by_the_start_of_its_id_or_said_to_be_retired() {
    let dir = tempfile::tempdir().unwrap();
    let path = trail_with_a_run(dir.path());
    let by_id = Show {
        run: Some("CBFC".into()),
        ..Show::default()
    };
    assert!(render(&by_id, Some(dir.path()), None)
        .unwrap()
        .contains("no-rm-rf"));
    let old = std::time::SystemTime::now() + std::time::Duration::from_secs(400 * 86_400);
    trail::prune(dir.path(), None, trail::Retention::default(), old).unwrap();
    assert!(!path.exists());
    let e = render(&by_id, Some(dir.path()), None).unwrap_err();
    assert!(e.contains("removed by the trail's retention"), "{e}");
    let e = render(
        &Show {
            run: Some("ffff".into()),
            ..Show::default()
        },
        Some(dir.path()),
        None,
    )
    .unwrap_err();
    assert!(e.contains("never there"), "{e}");
    let e = render(&Show::default(), Some(dir.path()), None).unwrap_err();
    assert!(e.contains("no run has been recorded"), "{e}");
}

#[test]
fn since_reads_an_age_or_a_utc_time() {
    let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_895_000);
    assert_eq!(
        parse_since("2h", now).unwrap(),
        now - std::time::Duration::from_secs(7200)
    );
    let day = parse_since("2026-11-28", now).unwrap();
    assert_eq!(
        humantime::format_rfc3339_millis(day).to_string(),
        "2026-11-28T00:00:00.000Z"
    );
    assert!(parse_since("2026-11-28T09:00:00Z", now).is_ok());
    assert!(parse_since("yesterday", now)
        .unwrap_err()
        .contains("give an age"));
}
