//! `ahp-wrap audit show`: what runs decided, for a person to read. The last run of the
//! trail by default; a run by its id, every run since a time, or a log file named.
//!
//! Each decision is a line of columns (time, verdict, rule, what was asked), with its reason
//! wrapped on the lines below, whole. Every line fits the width (`COLUMNS`, else the
//! terminal's, else 80): the columns are cut, paths written from `~` and cut in the middle;
//! a long view is paged on a terminal.

use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::fit;
use super::line::{self, Read};
use super::trail::{self, RunLog};
use super::{AuditRecord, Summary};

mod table;
#[cfg(test)]
pub(crate) use table::decided_by;
use table::table;

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
fn select(show: &Show, dir: Option<&Path>, runs: &[RunLog]) -> Result<Vec<PathBuf>, String> {
    if let Some(log) = &show.log {
        return Ok(vec![log.clone()]);
    }
    let dir = dir.ok_or("no audit trail: set HOME or XDG_STATE_HOME, or name a log file")?;
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
        let recent = runs.iter().filter(|r| {
            std::fs::metadata(&r.path)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m >= since)
        });
        return Ok(recent.map(|r| r.path.clone()).collect());
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

/// How the view is laid out: the width its lines fit in, and the home directory that
/// paths are written from `~` in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout<'a> {
    /// The columns each line fits in (laid out as [`fit::MIN_WIDTH`] when narrower).
    pub width: usize,
    /// The user's home directory, if known.
    pub home: Option<&'a Path>,
}

/// The view `show` asks for, as text, each line within `layout`'s width (but `--json`'s).
pub(crate) fn render(show: &Show, dir: Option<&Path>, layout: Layout) -> Result<String, String> {
    let width = layout.width.max(fit::MIN_WIDTH);
    let mut out = String::new();
    let trail_runs = match dir {
        Some(dir) if show.runs || show.log.is_none() => {
            trail::runs(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        }
        _ => Vec::new(),
    };
    let sessions: Vec<&str> = trail_runs.iter().map(|r| r.session.as_str()).collect();
    let short = short_len(&sessions);
    if show.runs {
        if dir.is_none() {
            return Err("no audit trail: set HOME or XDG_STATE_HOME".into());
        }
        runs(&mut out, &trail_runs, short, width)?;
        return Ok(out);
    }
    let since = show
        .since
        .map(|t| humantime::format_rfc3339_millis(t).to_string());
    for path in select(show, dir, &trail_runs)? {
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
        let run = about(&log);
        // The whole id when the line has room for it, else as much as tells it apart.
        let whole = heading(&run, &run.session);
        let head = match whole.chars().count() <= width {
            true => whole,
            false => heading(&run, short_id(&run.session, short)),
        };
        let _ = writeln!(out, "{}", fit::cut(&head, width));
        if !run.what.is_empty() {
            let what = fit::home(&run.what, layout.home);
            let _ = writeln!(out, "  {}", fit::cut(&what, width - 2));
        }
        let file = fit::home(&log.path.display().to_string(), layout.home);
        let _ = writeln!(out, "  {}", fit::middle(&file, width - 2));
        table(&mut out, &shown, width, layout.home);
        out.push('\n');
    }
    Ok(out)
}

/// `--runs`: the trail's runs, one a line, oldest first.
fn runs(out: &mut String, runs: &[RunLog], short: usize, width: usize) -> Result<(), String> {
    let w_id = short.max("RUN".len());
    let _ = writeln!(
        out,
        "{}",
        fit::cut(
            &format!(
                "{:<w_id$}  {:<19}  DECIDED  BLOCKED  AGENT",
                "RUN", "STARTED (UTC)"
            ),
            width
        )
    );
    for r in runs {
        let log = read(&r.path)?;
        let run = about(&log);
        let what = match run.what.as_str() {
            "" => run.agent.clone(),
            what => what.to_owned(),
        };
        let line = format!(
            "{:<w_id$}  {:<19}  {:>7}  {:>7}  {what}",
            short_id(&r.session, short),
            run.when,
            run.decided,
            run.blocked
        );
        let _ = writeln!(out, "{}", fit::cut(&line, width));
    }
    Ok(())
}

/// How many characters of a session id tell the trail's runs apart: 8 (a UUID's first
/// group), or more where two runs share them.
fn short_len(sessions: &[&str]) -> usize {
    let mut unique = sessions.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let longest = unique.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let distinct = |n: usize| {
        let shorts: std::collections::HashSet<&str> =
            unique.iter().map(|s| short_id(s, n)).collect();
        shorts.len() == unique.len()
    };
    let mut n = 8;
    while n < longest && !distinct(n) {
        n += 1;
    }
    n
}

/// The first `n` characters of `session`.
fn short_id(session: &str, n: usize) -> &str {
    session
        .char_indices()
        .nth(n)
        .map_or(session, |(at, _)| &session[..at])
}

/// What a run's heading says of it.
struct Run {
    /// The session id.
    session: String,
    /// The framework, as the session's start names it.
    agent: String,
    /// `agent: command`, or the agent alone.
    what: String,
    /// When its first record was written (UTC, to the second).
    when: String,
    /// Its decisions (not notifications), and how many blocked.
    decided: u64,
    /// Its blocks.
    blocked: u64,
}

/// A run's heading: `run <id>  <when> UTC  <n> decided, <m> blocked`.
fn heading(run: &Run, id: &str) -> String {
    format!(
        "run {id}  {} UTC  {} decided, {} blocked",
        run.when, run.decided, run.blocked
    )
}

/// What the run's records say of it: its id, agent, command, start and counts.
fn about(log: &Log) -> Run {
    let mut summary = Summary::default();
    for (_, r) in &log.records {
        summary.add(r);
    }
    let session = log
        .records
        .iter()
        .map(|(_, r)| r.session.as_str())
        .find(|s| !s.is_empty())
        .unwrap_or("?")
        .to_owned();
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
        .unwrap_or("?")
        .to_owned();
    let command = start
        .and_then(|(_, r)| r.payload.get("command")?.as_array())
        .map(|parts| {
            let mut words: Vec<&str> = parts.iter().filter_map(|p| p.as_str()).collect();
            // The program by its name: its directory says little and takes the line.
            if let Some(program) = words.first_mut() {
                *program = program.rsplit('/').next().unwrap_or(program);
            }
            fit::flat(&words.join(" "))
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
    let what = match command.is_empty() {
        true => String::new(),
        false => format!("{agent}: {command}"),
    };
    Run {
        session,
        what,
        when,
        decided,
        blocked: summary.by_decision.get("block").copied().unwrap_or(0),
        agent,
    }
}

/// `2026-11-28T19:41:30.123Z` as `2026-11-28 19:41:30`, or `19:41:30` without the date.
fn time(ts: &str, date: bool) -> &str {
    match (date, ts.get(..19), ts.get(11..19)) {
        (true, Some(_), _) => ts.get(..19).map_or(ts, |t| t),
        (false, _, Some(t)) => t,
        _ => ts,
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
    ahp_wrap_floor::exit::print(text);
}
