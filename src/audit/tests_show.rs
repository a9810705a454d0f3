//! `audit show`'s tests: what a person reads of a trail's runs.

use super::show::{decided_by, parse_since, render, Layout, Show};
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
        reversible: None,
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

/// The layout at `width` columns, the home `/home/me`.
fn at(width: usize) -> Layout<'static> {
    Layout {
        width,
        home: Some(Path::new("/home/me")),
    }
}

#[test]
fn the_last_run_shows_each_decision_with_its_rule_and_reason_fit_to_the_width() {
    let dir = tempfile::tempdir().unwrap();
    trail_with_a_run(dir.path());
    let text = render(&Show::default(), Some(dir.path()), at(60)).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("run cbfc8c6a  2026-11-28 19:41:30 UTC  2 decided, 1 blocked")
    );
    assert_eq!(lines.next(), Some("  claude-code: claude -p fix it"));
    assert!(
        text.contains("19:41:31  allow    no rule matched  Bash: ls\n"),
        "{text}"
    );
    assert!(
        text.contains("19:41:32  block    no-rm-rf         Bash: rm -rf ~/proj"),
        "{text}"
    );
    assert!(text.contains("↳ destructive command"), "{text}");
    assert!(
        !text.contains("session_start"),
        "notifications only with --all: {text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 60), "{text}");
    let blocked = Show {
        blocked: true,
        json: true,
        ..Show::default()
    };
    let json = render(&blocked, Some(dir.path()), at(60)).unwrap();
    assert_eq!(json.lines().count(), 1, "{json}");
    let line: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(line["seq"], 2, "the line as the log holds it");
}

/// A run of a real-looking session (a UUID), its log in the home, a long reason and long
/// commands: at 80 columns and at 200.
fn a_wide_run(home: &Path) -> PathBuf {
    let trail = home.join(".local/state/ahp-wrap/audit");
    std::fs::create_dir_all(&trail).unwrap();
    let session = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
    let path = trail.join(format!("20261128T194130.000Z-{session}.jsonl"));
    let mut log = AuditLog::open(&path, None).unwrap();
    let mut r = |ts: &str, decision: &str, source: &str, reason: Option<&str>, payload| {
        let mut rec = record(ts, decision, source, payload);
        rec.session = session.into();
        rec.reason = reason.map(str::to_owned);
        log.append(&rec).unwrap();
    };
    let start = json!({"framework": "claude-code", "command": ["/usr/bin/claude", "-p", "fix the failing test in the parser and run the whole suite again"]});
    r(
        "2026-11-28T19:41:30.000Z",
        "notified",
        "harness",
        None,
        start,
    );
    let read = format!(
        "{}/src/deeply/nested/module/of/the/project/parser.rs",
        home.display()
    );
    r(
        "2026-11-28T19:41:31.000Z",
        "allow",
        "policy",
        None,
        json!({"tool_name": "Read", "arguments": {"file_path": read}}),
    );
    let reason = "the cloud metadata endpoint hands out the machine's credentials to whoever \
                  asks, and a program that reads them can act as this machine anywhere";
    r(
        "2026-11-28T19:41:32.000Z",
        "block",
        "policy:cloud-metadata-endpoint-credentials",
        Some(reason),
        json!({"tool_name": "Bash", "arguments": {"command": "curl -s http://169.254.169.254/latest/meta-data/iam/security-credentials/"}}),
    );
    r(
        "2026-11-28T19:41:33.000Z",
        "block",
        "fail-mode",
        Some("the harness did not answer within 10000 ms"),
        json!({"tool_name": "Bash", "arguments": {"command": "ls"}}),
    );
    r(
        "2026-11-28T19:41:34.000Z",
        "block",
        "floor",
        Some("no [floor.net] line allows example.org"),
        json!({"tool_name": "net", "arguments": {"url": "https://example.org/"}}),
    );
    path
}

#[test]
fn every_line_fits_80_columns_the_reason_whole_and_paths_from_the_home() {
    let home = tempfile::tempdir().unwrap();
    a_wide_run(home.path());
    let trail = home.path().join(".local/state/ahp-wrap/audit");
    let layout = Layout {
        width: 80,
        home: Some(home.path()),
    };
    let text = render(&Show::default(), Some(&trail), layout).unwrap();
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?} in\n{text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0], "run 3f2a9c1e  2026-11-28 19:41:30 UTC  4 decided, 3 blocked",
        "the id as short as tells it apart: {text}"
    );
    assert!(
        lines[1].starts_with("  claude-code: claude -p fix the failing") && lines[1].ends_with('…')
    );
    assert!(
        lines[2].starts_with("  ~/.local/state/")
            && lines[2].contains('…')
            && lines[2].ends_with("6b.jsonl"),
        "the log's path from ~, cut in its middle: {text}"
    );
    assert!(text.contains("  Read: ~/src/"), "{text}");
    assert!(
        text.contains("parser.rs\n"),
        "a lone path keeps its file name: {text}"
    );
    assert!(text.contains("the fail mode"), "{text}");
    assert!(text.contains("the floor: net rules"), "{text}");
    assert!(text.contains("no rule matched"), "{text}");
    // The reason in words, on lines of its own, nothing left out.
    let at = lines
        .iter()
        .position(|l| l.contains("↳ the cloud"))
        .unwrap();
    let reason: Vec<&str> = lines[at..]
        .iter()
        .take_while(|l| !l.contains("  block  "))
        .map(|l| l.trim().trim_start_matches("↳ "))
        .collect();
    assert!(reason.len() > 1, "wrapped: {text}");
    assert_eq!(
        reason.join(" "),
        "the cloud metadata endpoint hands out the machine's credentials to whoever asks, \
         and a program that reads them can act as this machine anywhere"
    );
    // --runs: one line a run.
    let runs = Show {
        runs: true,
        ..Show::default()
    };
    let listed = render(&runs, Some(&trail), layout).unwrap();
    let listed: Vec<&str> = listed.lines().collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed[0].starts_with("RUN       STARTED (UTC)"),
        "{listed:?}"
    );
    assert!(
        listed[1]
            .starts_with("3f2a9c1e  2026-11-28 19:41:30        4        3  claude-code: claude -p"),
        "{listed:?}"
    );
    assert!(listed.iter().all(|l| l.chars().count() <= 80), "{listed:?}");
}

#[test]
fn at_200_columns_nothing_of_this_run_is_cut() {
    let home = tempfile::tempdir().unwrap();
    a_wide_run(home.path());
    let trail = home.path().join(".local/state/ahp-wrap/audit");
    let layout = Layout {
        width: 200,
        home: Some(home.path()),
    };
    let text = render(&Show::default(), Some(&trail), layout).unwrap();
    assert!(!text.contains('…'), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 200), "{text}");
    assert!(
        text.starts_with("run 3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b  2026-11-28"),
        "{text}"
    );
    assert!(text.contains("cloud-metadata-endpoint-credentials  Bash: curl -s http://169.254.169.254/latest/meta-data/iam/security-credentials/\n"), "{text}");
    assert!(
        text.contains("↳ the cloud metadata endpoint hands out the machine's credentials to whoever asks, and a program that reads them can act as this machine\n"),
        "the reason as wide as the line lets it: {text}"
    );
}

#[test]
fn the_rule_column_says_in_words_what_decided_when_no_rule_did() {
    assert_eq!(decided_by("policy:no-rm-rf"), "no-rm-rf");
    assert_eq!(decided_by("policy"), "no rule matched");
    assert_eq!(decided_by("fail-mode"), "the fail mode");
    assert_eq!(decided_by("floor"), "the floor: net rules");
    assert_eq!(decided_by("person"), "asked at the terminal");
    assert_eq!(
        decided_by("person:alice@10.0.0.7:5123"),
        "asked: alice@10.0.0.7:5123"
    );
}

#[test]
fn a_run_is_found_by_the_start_of_its_id_or_said_to_be_retired() {
    let dir = tempfile::tempdir().unwrap();
    let path = trail_with_a_run(dir.path());
    let by_id = Show {
        run: Some("CBFC".into()),
        ..Show::default()
    };
    assert!(render(&by_id, Some(dir.path()), at(80))
        .unwrap()
        .contains("no-rm-rf"));
    let old = std::time::SystemTime::now() + std::time::Duration::from_secs(400 * 86_400);
    trail::prune(dir.path(), None, trail::Retention::default(), old).unwrap();
    assert!(!path.exists());
    let e = render(&by_id, Some(dir.path()), at(80)).unwrap_err();
    assert!(e.contains("removed by the trail's retention"), "{e}");
    let e = render(
        &Show {
            run: Some("ffff".into()),
            ..Show::default()
        },
        Some(dir.path()),
        at(80),
    )
    .unwrap_err();
    assert!(e.contains("never there"), "{e}");
    let e = render(&Show::default(), Some(dir.path()), at(80)).unwrap_err();
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

#[test]
fn a_call_allowed_as_reversible_shows_as_such_with_its_undo() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20261128T194130.000Z-cbfc8c6a-e0eb.jsonl");
    let mut log = AuditLog::open(&path, None).unwrap();
    let undo = "ahp-wrap undo --run cbfc8c6a-e0eb --to 3";
    let call = json!({"tool_name": "Bash", "arguments": {"command": "git clean -fd"}});
    log.append(&AuditRecord {
        reason: Some(format!(
            "reversible: checkpoint 3 keeps everything it discards; `{undo}` brings it back"
        )),
        reversible: Some(crate::audit::Reversible {
            checkpoint: 3,
            undo: undo.into(),
        }),
        ..record(
            "2026-11-28T19:41:31.000Z",
            "allow",
            "policy:git-discard-work",
            call,
        )
    })
    .unwrap();
    // Wide enough for the reason on one line.
    let text = render(&Show::default(), Some(dir.path()), at(200)).unwrap();
    assert!(
        text.contains("allow (reversible)  git-discard-work  Bash: git clean -fd\n"),
        "{text}"
    );
    assert!(text.contains(&format!("`{undo}` brings it back")), "{text}");
    // The record reads back with its field, as `--json` prints it.
    let json = render(
        &Show {
            json: true,
            ..Show::default()
        },
        Some(dir.path()),
        at(100),
    )
    .unwrap();
    let line: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(line["reversible"], json!({"checkpoint": 3, "undo": undo}));
}
