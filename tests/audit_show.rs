//! `audit show` as a person reads it after a real run: every line within the width
//! (`COLUMNS`, else 80 when stdout is no terminal), the reason whole on lines of its own,
//! the log's path from `~`, and `--runs` one line a run; at 200 columns nothing of it cut.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{run, show, wrap_bin};

/// `ahp-wrap audit show <args>` in the trail of `home`, at `columns` (`None`: unset).
fn audit_show(home: &Path, columns: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new(wrap_bin());
    cmd.args(["audit", "show"])
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_STATE_HOME")
        .env_remove("COLUMNS");
    if let Some(c) = columns {
        cmd.env("COLUMNS", c);
    }
    let out = run(&mut cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The reason below a decision's line, its wrapped lines joined again.
fn reason_after(text: &str, line_with: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(line_with))
        .unwrap_or_else(|| panic!("no line with {line_with:?}:\n{text}"));
    let mut words = Vec::new();
    for (i, l) in lines[at + 1..].iter().enumerate() {
        let t = l.trim_start();
        match (i, t.strip_prefix("↳ ")) {
            (0, Some(first)) => words.push(first.to_owned()),
            (0, None) => panic!("no reason below {line_with:?}:\n{text}"),
            (_, None) if l.starts_with("    ") && !t.is_empty() => words.push(t.to_owned()),
            _ => break,
        }
    }
    words.join(" ")
}

#[test]
fn audit_show_fits_80_columns_and_200_with_the_reason_whole() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let ws = dir.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let out = run(
        Command::new(wrap_bin())
            .args(["-q", "--", "sh", "-c"])
            .arg(
                "curl -s http://169.254.169.254/latest/meta-data/iam/security-credentials/; exit 0",
            )
            .current_dir(&ws)
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME"),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let json = audit_show(&home, None, &["--blocked", "--json"]);
    let record: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let reason = record["reason"].as_str().unwrap().to_owned();
    let rule = record["source"]
        .as_str()
        .unwrap()
        .trim_start_matches("policy:");

    for columns in [None, Some("80")] {
        let text = audit_show(&home, columns, &[]);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "{line:?} is wider than 80:\n{text}"
            );
        }
        assert!(
            text.lines()
                .nth(2)
                .is_some_and(|l| l.starts_with("  ~/.local/state/ahp-wrap/audit/")),
            "the log's path from ~:\n{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("  block  ") && l.contains(rule)),
            "the rule by its name:\n{text}"
        );
        assert_eq!(reason_after(&text, "  block  "), reason, "{text}");
        let runs = audit_show(&home, columns, &["--runs"]);
        assert_eq!(
            runs.lines().count(),
            2,
            "a heading and one line a run:\n{runs}"
        );
        assert!(runs.lines().all(|l| l.chars().count() <= 80), "{runs}");
    }

    let wide = audit_show(&home, Some("200"), &[]);
    assert!(wide.lines().all(|l| l.chars().count() <= 200), "{wide}");
    assert!(
        wide.contains(&format!("↳ {reason}\n")),
        "the reason on one line at 200 columns:\n{wide}"
    );
    assert!(
        wide.contains(
            "exec: curl -s http://169.254.169.254/latest/meta-data/iam/security-credentials/\n"
        ),
        "what was asked, whole:\n{wide}"
    );
}
