//! `ahp-wrap audit show`: what runs decided, for a person to read. The last run of the
//! trail by default; a run by its id, every run since a time, or a log file named.
//!
//! Each decision is a line of columns (time, verdict, rule, what was asked), with its reason
//! on the line below; the columns fit the terminal's width when the output is one (else
//! nothing is cut), and a long view is paged.

use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::line::{self, Read};
use super::summary::{describe_full, one_line};
use super::trail::{self, RunLog};
use super::{AuditRecord, Summary};

/// What to show (`ahp-wrap audit show`'s options).
#[derive(Debug, Default, clap::Args)]
pub struct Show {
    /// A log file to read instead of the trail (one --audit-log wrote).
    #[arg(conflicts_with_all = ["run", "runs"])]
    pub log: Option<PathBuf>,
    /// The run whose id starts with ID (`--runs` lists them).
    #[arg(long, value_name = "ID", conflicts_with_all = ["since", "runs"])]
    pub run: Option<String>,
    /// Every run since WHEN: an age (2h, 3d) or a UTC time (2026-11-28,
    /// 2026-11-28T09:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = since_now)]
    pub since: Option<SystemTime>,
    /// Only what was blocked (or observe mode would have blocked).
    #[arg(long)]
    pub blocked: bool,
    /// Notifications too (the session's start and end, warnings), not only decisions.
    #[arg(long)]
    pub all: bool,
    /// The records as the log holds them: JSON, one a line.
    #[arg(long, conflicts_with = "runs")]
    pub json: bool,
    /// List the trail's runs, one a line, oldest first.
    #[arg(long)]
    pub runs: bool,
}

/// [`parse_since`] from now.
fn since_now(s: &str) -> Result<SystemTime, String> {
    parse_since(s, SystemTime::now())
}

/// `--since`: an age back from `now` (`2h`, `3d`) or a time (`2026-11-28`,
/// `2026-11-28T09:00:00Z`).
pub(crate) fn parse_since(s: &str, now: SystemTime) -> Result<SystemTime, String> {
    if let Ok(age) = humantime::parse_duration(s) {
        return now
            .checked_sub(age)
            .ok_or_else(|| format!("{s:?} goes back past the epoch"));
    }
    let full;
    let t = match s.len() {
        10 => {
            full = format!("{s}T00:00:00Z");
            &full
        }
        _ => s,
    };
    humantime::parse_rfc3339_weak(t.trim_end_matches('Z')).map_err(|_| {
        format!(
            "--since {s:?}: give an age (2h, 3d) or a UTC time (2026-11-28, 2026-11-28T09:00:00Z)"
        )
    })
}

/// One log's records, each with its line as the log holds it.
struct Log {
    path: PathBuf,
    records: Vec<(Vec<u8>, AuditRecord)>,
}

fn read(path: &Path) -> Result<Log, String> {
    let file = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut records = Vec::new();
    loop {
        match line::read_line(&mut reader, &mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        {
            Read::Eof | Read::TooLong => break,
            Read::Line | Read::Cut => {
                if let Ok(record) = serde_json::from_slice::<AuditRecord>(&buf) {
                    records.push((buf.clone(), record));
                }
            }
        }
    }
    Ok(Log {
        path: path.to_owned(),
        records,
    })
}

/// The logs `show` asks for, in the trail at `dir` (when there is one).
fn select(show: &Show, dir: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    if let Some(log) = &show.log {
        return Ok(vec![log.clone()]);
    }
    let dir = dir.ok_or("no audit trail: set HOME or XDG_STATE_HOME, or name a log file")?;
    let runs = trail::runs(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    if let Some(id) = &show.run {
        let id = id.to_ascii_lowercase();
        let found: Vec<&RunLog> = runs.iter().filter(|r| r.session.starts_with(&id)).collect();
        return match found[..] {
            [one] => Ok(vec![one.path.clone()]),
            [] => Err(missing(dir, &id)),
            _ => Err(format!(
                "{} runs' ids start with {id:?}: give more of it",
                found.len()
            )),
        };
    }
    if let Some(since) = show.since {
        let recent = runs.into_iter().filter(|r| {
            std::fs::metadata(&r.path)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= since)
        });
        return Ok(recent.map(|r| r.path).collect());
    }
    match runs.last() {
        Some(last) => Ok(vec![last.path.clone()]),
        None => Err(format!("no run has been recorded in {} yet", dir.display())),
    }
}

/// Why there is no run `id` in the trail at `dir`: retention removed it, or nothing says.
fn missing(dir: &Path, id: &str) -> String {
    let retired = trail::retired(dir);
    let Some(r) = retired.iter().rev().find(|r| r.session.starts_with(id)) else {
        return format!(
            "no run {id} in {} (nor in its {}: it was never there, or was removed by \
             something else than retention)",
            dir.display(),
            trail::RETIRED
        );
    };
    let chain = match &r.head {
        Some(h) => format!("; its chain ended at record {} (hash {})", h.seq, h.hash),
        None => String::new(),
    };
    format!(
        "run {} was removed by the trail's retention at {} ({}){chain}",
        r.session, r.removed, r.why
    )
}

/// The view `show` asks for, as text (`width`: the terminal's columns, when it is one).
pub(crate) fn render(
    show: &Show,
    dir: Option<&Path>,
    width: Option<usize>,
) -> Result<String, String> {
    let mut out = String::new();
    if show.runs {
        let dir = dir.ok_or("no audit trail: set HOME or XDG_STATE_HOME")?;
        let runs = trail::runs(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for run in runs {
            let log = read(&run.path)?;
            let _ = writeln!(out, "{}", heading(&run.session, &log));
        }
        return Ok(out);
    }
    let since = show
        .since
        .map(|t| humantime::format_rfc3339_millis(t).to_string());
    for path in select(show, dir)? {
        let log = read(&path)?;
        let shown: Vec<&(Vec<u8>, AuditRecord)> = log
            .records
            .iter()
            .filter(|(_, r)| show.all || r.decision != "notified")
            .filter(|(_, r)| !show.blocked || Summary::keeps(r))
            .filter(|(_, r)| since.as_deref().is_none_or(|s| r.ts.as_str() >= s))
            .collect();
        if show.json {
            for (line, _) in shown {
                out.push_str(&String::from_utf8_lossy(line));
                out.push('\n');
            }
            continue;
        }
        let session = log
            .records
            .iter()
            .map(|(_, r)| r.session.as_str())
            .find(|s| !s.is_empty())
            .unwrap_or("?")
            .to_owned();
        let head = heading(&session, &log);
        let _ = writeln!(
            out,
            "{}",
            width.map_or(head.clone(), |w| one_line(&head, w - 1))
        );
        // The path whole, even where it is wider than the terminal: cut, it names nothing.
        let _ = writeln!(out, "  {}", log.path.display());
        table(&mut out, &shown, width);
        out.push('\n');
    }
    Ok(out)
}

/// A run in one line: its id, agent, when, and what was decided.
fn heading(session: &str, log: &Log) -> String {
    let mut summary = Summary::default();
    for (_, r) in &log.records {
        summary.add(r);
    }
    let start = log
        .records
        .iter()
        .find(|(_, r)| r.event_type == "session_start");
    // The framework, as the session's start names it; else as the agent's id does
    // (`generic-<id>`, for a run whose agent never started).
    let agent = start
        .and_then(|(_, r)| r.payload.get("framework")?.as_str())
        .or_else(|| {
            let (_, first) = log.records.first()?;
            Some(
                first
                    .agent
                    .rsplit_once('-')
                    .map_or(first.agent.as_str(), |(f, _)| f),
            )
        })
        .unwrap_or("?");
    let command = start
        .and_then(|(_, r)| r.payload.get("command")?.as_array())
        .map(|parts| {
            let mut words: Vec<&str> = parts.iter().filter_map(|p| p.as_str()).collect();
            // The program by its name: its directory says little and takes the line.
            if let Some(program) = words.first_mut() {
                *program = program.rsplit('/').next().unwrap_or(program);
            }
            one_line(&words.join(" "), 60)
        })
        .unwrap_or_default();
    let when = log
        .records
        .first()
        .map_or(String::new(), |(_, r)| time(&r.ts, true).replace('T', " "));
    let decided: u64 = summary
        .by_decision
        .iter()
        .filter(|(d, _)| *d != "notified")
        .map(|(_, n)| n)
        .sum();
    let blocked = summary.by_decision.get("block").copied().unwrap_or(0);
    let what = match command.is_empty() {
        true => agent.to_owned(),
        false => format!("{agent}: {command}"),
    };
    format!("run {session}  {when} UTC  {what}  ({decided} decided, {blocked} blocked)")
}

/// `2026-11-28T19:41:30.123Z` as `2026-11-28 19:41:30`, or `19:41:30` without the date.
fn time(ts: &str, date: bool) -> &str {
    match (date, ts.get(..19), ts.get(11..19)) {
        (true, Some(_), _) => ts.get(..19).map_or(ts, |t| t),
        (false, _, Some(t)) => t,
        _ => ts,
    }
}

/// The decisions as columns: time, verdict, rule, what; the reason below what.
fn table(out: &mut String, records: &[&(Vec<u8>, AuditRecord)], width: Option<usize>) {
    struct Row {
        time: String,
        verdict: String,
        rule: String,
        what: String,
        reason: Option<String>,
    }
    let rows: Vec<Row> = records
        .iter()
        .map(|(_, r)| Row {
            time: time(&r.ts, false).to_owned(),
            verdict: match (r.decision.as_str(), r.observed.as_deref()) {
                (d, Some(o)) if d != o => format!("{d} (would {o})"),
                (d, _) => d.to_owned(),
            },
            rule: r
                .source
                .strip_prefix("policy:")
                .unwrap_or(&r.source)
                .to_owned(),
            what: match describe_full(&r.payload) {
                w if w.is_empty() => r.event_type.clone(),
                w => w,
            },
            reason: r.reason.as_deref().map(|s| one_line(s, usize::MAX)),
        })
        .collect();
    if rows.is_empty() {
        out.push_str("  (nothing to show)\n");
        return;
    }
    let widest = |column: fn(&Row) -> &str, header: &str| {
        rows.iter()
            .map(|r| column(r).chars().count())
            .chain([header.len()])
            .max()
            .unwrap_or(0)
    };
    let w_time = widest(|r| &r.time, "TIME");
    let w_verdict = widest(|r| &r.verdict, "VERDICT");
    let w_rule = widest(|r| &r.rule, "RULE").min(32);
    let indent = 2 + w_time + 2 + w_verdict + 2 + w_rule + 2;
    // What is left for the last column; never less than a readable strip.
    let rest = width.map(|w| w.saturating_sub(indent).max(24));
    let _ = writeln!(
        out,
        "  {:<w_time$}  {:<w_verdict$}  {:<w_rule$}  WHAT",
        "TIME", "VERDICT", "RULE"
    );
    for row in rows {
        let fit = |s: &str, n: Option<usize>| match n {
            Some(n) => one_line(s, n.saturating_sub(1).max(1)),
            None => s.to_owned(),
        };
        let _ = writeln!(
            out,
            "  {:<w_time$}  {:<w_verdict$}  {:<w_rule$}  {}",
            row.time,
            row.verdict,
            fit(&row.rule, Some(w_rule + 1)),
            fit(&row.what, rest)
        );
        if let Some(reason) = row.reason {
            let _ = writeln!(out, "{:indent$}↳ {}", "", fit(&reason, rest.map(|n| n - 2)));
        }
    }
}

/// Prints `text`: through a pager (`$PAGER`, else `less -FRX`) when stdout is a terminal
/// and `text` is taller than it, else directly.
pub(crate) fn page(text: &str, height: Option<usize>) {
    let tall = height.is_some_and(|h| text.lines().count() + 1 > h);
    if tall {
        let pager = std::env::var("PAGER")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| "less -FRX".to_owned());
        let mut words = pager.split_whitespace();
        if let Some(program) = words.next() {
            let child = std::process::Command::new(program)
                .args(words)
                .stdin(std::process::Stdio::piped())
                .spawn();
            if let Ok(mut child) = child {
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = std::io::Write::write_all(&mut stdin, text.as_bytes());
                }
                let _ = child.wait();
                return;
            }
        }
    }
    ahp_wrap_confine::exit::print(text);
}
