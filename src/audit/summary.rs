//! The run summary: decisions by kind and by event type, and the blocked records, as text or Markdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde_json::Value;

use super::line::{self, Read, RECOVERED_EVENT};
use super::redact::redact_str;
use super::{AuditError, AuditRecord};

/// How many blocked records a summary keeps; the rest are only counted.
const MAX_BLOCKED: usize = 200;
/// How many blocked records the text form lists.
const TEXT_BLOCKED: usize = 10;
/// How many blocked records the Markdown form lists.
const MARKDOWN_BLOCKED: usize = 50;
/// How long a description of what was blocked may be, in characters.
const WHAT_LEN: usize = 80;

/// Counts of decisions, built record by record ([`Summary::add`]) or read from a log
/// ([`summary`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records counted, recovery records included.
    pub records: u64,
    /// Records per `decision` (`allow`, `block`, `notified`, …).
    pub by_decision: BTreeMap<String, u64>,
    /// Records per `event_type`.
    pub by_event: BTreeMap<String, u64>,
    /// Decisions taken by the fail mode (harness unreachable, late or invalid).
    pub fail_mode: u64,
    /// Crash recoveries recorded in the log.
    pub recovered: u64,
    /// The first blocked records (up to 200).
    pub blocked: Vec<Blocked>,
    /// Blocked records beyond those kept.
    pub blocked_omitted: u64,
    /// Lines of the file that were not records (only when read from a file).
    pub unreadable_lines: u64,
    /// The slowest decision's `latency_us`, in microseconds.
    pub max_latency_us: u64,
    /// Records that observe mode let through but would have blocked.
    pub observed: u64,
    /// Refusals of the agent's routine probes (`arguments.routine` says what): counted,
    /// not listed.
    pub routine: u64,
}

/// Observe mode lets everything through but records what it would have done.
fn observed(record: &AuditRecord) -> bool {
    record.decision != "block" && record.observed.as_deref() == Some("block")
}

/// A blocked record, as the summary lists it (secrets redacted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The record's `ts` (RFC 3339).
    pub ts: String,
    /// The record's `event_type`.
    pub event_type: String,
    /// A short description of the command or tool call, from the payload.
    pub what: String,
    /// The record's reason, redacted, on one line, cut after 200 characters (`…`).
    pub reason: Option<String>,
    /// Who decided, as the record's `source` says it (`policy:<rule>`, `harness`, …).
    pub source: String,
    /// False for what observe mode would have blocked but let through.
    pub enforced: bool,
}

impl Summary {
    /// Counts one record.
    pub(crate) fn add(&mut self, record: &AuditRecord) {
        self.records += 1;
        *self.by_decision.entry(record.decision.clone()).or_default() += 1;
        *self.by_event.entry(record.event_type.clone()).or_default() += 1;
        if record.source == "fail-mode" {
            self.fail_mode += 1;
        }
        if record.event_type == RECOVERED_EVENT {
            self.recovered += 1;
        }
        self.max_latency_us = self.max_latency_us.max(record.latency_us);
        let observed = observed(record);
        if observed {
            self.observed += 1;
        }
        if !Summary::keeps(record) {
            return;
        }
        if record.payload["arguments"]["routine"].is_string() {
            self.routine += 1;
            return;
        }
        if self.blocked.len() >= MAX_BLOCKED {
            self.blocked_omitted += 1;
            return;
        }
        self.blocked.push(Blocked {
            ts: record.ts.clone(),
            event_type: record.event_type.clone(),
            what: describe(&record.payload),
            reason: record
                .reason
                .as_deref()
                .map(|r| one_line(&redact_str(r), 200)),
            source: record.source.clone(),
            enforced: !observed,
        });
    }

    /// Adds the counts of `other` (what another handle of the same log recorded).
    pub(crate) fn absorb(&mut self, other: Summary) {
        self.records += other.records;
        for (d, n) in other.by_decision {
            *self.by_decision.entry(d).or_default() += n;
        }
        for (e, n) in other.by_event {
            *self.by_event.entry(e).or_default() += n;
        }
        self.fail_mode += other.fail_mode;
        self.recovered += other.recovered;
        self.blocked.extend(other.blocked);
        self.blocked_omitted += other.blocked_omitted;
        self.unreadable_lines += other.unreadable_lines;
        self.max_latency_us = self.max_latency_us.max(other.max_latency_us);
        self.observed += other.observed;
        self.routine += other.routine;
    }

    /// Whether [`Summary::add`] keeps more of the record than counts: its payload and
    /// reason, when it was blocked (or observe mode would have blocked it).
    pub(crate) fn keeps(record: &AuditRecord) -> bool {
        record.decision == "block" || observed(record)
    }

    fn blocked_total(&self) -> u64 {
        self.blocked.len() as u64 + self.blocked_omitted
    }

    /// A few lines for stderr at the end of a run.
    pub(crate) fn to_text(&self) -> String {
        let plural = if self.records == 1 { "" } else { "s" };
        let mut out = format!("ahp-wrap: {} audited event{plural}", self.records);
        if !self.by_decision.is_empty() {
            let counts: Vec<String> = self
                .by_decision
                .iter()
                .map(|(d, n)| format!("{n} {d}"))
                .collect();
            let _ = write!(out, ": {}", counts.join(", "));
        }
        if self.fail_mode > 0 {
            let _ = write!(out, " ({} by fail-mode)", self.fail_mode);
        }
        out.push('\n');
        if self.recovered > 0 {
            let _ = writeln!(
                out,
                "  audit log: {} crash recoveries (run `ahp-wrap audit verify`)",
                self.recovered
            );
        }
        if self.unreadable_lines > 0 {
            let _ = writeln!(
                out,
                "  audit log: {} unreadable lines",
                self.unreadable_lines
            );
        }
        for b in self.blocked.iter().take(TEXT_BLOCKED) {
            let verb = if b.enforced {
                "blocked"
            } else {
                "would block (observe)"
            };
            let _ = write!(out, "  {verb} {} {}", short_time(&b.ts), b.event_type);
            if !b.what.is_empty() {
                let _ = write!(out, " {}", b.what);
            }
            if let Some(reason) = &b.reason {
                let _ = write!(out, " — {reason}");
            }
            out.push('\n');
        }
        let listed = self.blocked.len().min(TEXT_BLOCKED) as u64;
        if self.blocked_total() > listed {
            let _ = writeln!(
                out,
                "  … and {} more blocked",
                self.blocked_total() - listed
            );
        }
        if self.routine > 0 {
            let _ = writeln!(
                out,
                "  ({} of the agent's routine probes refused, as on every run: `ahp-wrap audit show --blocked` lists them)",
                self.routine
            );
        }
        out
    }

    /// Markdown for a CI job summary: tables of decisions, event types and blocked records.
    pub(crate) fn to_markdown(&self) -> String {
        let mut out = String::from("### ahp-wrap audit\n\n");
        let plural = if self.records == 1 { "" } else { "s" };
        let _ = write!(out, "{} audited event{plural}", self.records);
        if self.fail_mode > 0 {
            let _ = write!(out, ", {} decided by fail-mode", self.fail_mode);
        }
        if self.recovered > 0 {
            let _ = write!(out, ", {} crash recoveries in the log", self.recovered);
        }
        out.push_str(".\n\n");
        count_table(&mut out, "Decision", &self.by_decision);
        count_table(&mut out, "Event type", &self.by_event);
        if self.blocked.is_empty() {
            return out;
        }
        // Observe mode blocked nothing: what it would have blocked is not called blocked.
        let enforced = self.blocked_total().saturating_sub(self.observed);
        let _ = match (enforced, self.observed) {
            (n, 0) => writeln!(out, "#### Blocked ({n})\n"),
            (0, m) => writeln!(
                out,
                "#### Would have been blocked (observe mode: let through) ({m})\n"
            ),
            (n, m) => writeln!(
                out,
                "#### Blocked ({n}), and would have been blocked ({m}, observe mode)\n"
            ),
        };
        out.push_str("| Time | Event | What | Reason | Source |\n|---|---|---|---|---|\n");
        for b in self.blocked.iter().take(MARKDOWN_BLOCKED) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                md(&b.ts),
                md(&b.event_type),
                md(&b.what),
                md(b.reason.as_deref().unwrap_or("")),
                md(&if b.enforced {
                    b.source.clone()
                } else {
                    format!("{} (observe: not enforced)", b.source)
                })
            );
        }
        let listed = self.blocked.len().min(MARKDOWN_BLOCKED) as u64;
        if self.blocked_total() > listed {
            let _ = writeln!(out, "\n… and {} more.", self.blocked_total() - listed);
        }
        out
    }
}

fn count_table(out: &mut String, title: &str, counts: &BTreeMap<String, u64>) {
    if counts.is_empty() {
        return;
    }
    let _ = writeln!(out, "| {title} | Count |\n|---|---:|");
    for (name, n) in counts {
        let _ = writeln!(out, "| {} | {n} |", md(name));
    }
    out.push('\n');
}

/// Escapes text for a Markdown table cell: no line breaks, no table or inline markup, no HTML.
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `HH:MM:SS` of an RFC 3339 timestamp, or the timestamp as it is.
fn short_time(ts: &str) -> &str {
    ts.split_once('T')
        .and_then(|(_, t)| t.get(..8))
        .unwrap_or(ts)
}

/// Newlines and tabs as spaces, at most `max` characters (then `…`).
pub(super) fn one_line(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max.saturating_add(1))
        .collect();
    if out.chars().count() > max {
        out = out.chars().take(max).collect();
        out.push('…');
    }
    out
}

/// A short, redacted description of a tool call or command: `bash: rm -rf /`.
fn describe(payload: &Value) -> String {
    one_line(&describe_full(payload), WHAT_LEN)
}

/// [`describe`], whole (on one line, redacted).
pub(super) fn describe_full(payload: &Value) -> String {
    let field = |v: &Value, names: &[&str]| -> Option<String> {
        names.iter().find_map(|n| match v.get(n)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Array(parts) if !parts.is_empty() => Some(
                parts
                    .iter()
                    .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
    };
    const DETAIL: [&str; 7] = [
        "command",
        "cmd",
        "file_path",
        "path",
        "url",
        "query",
        "pattern",
    ];
    let tool = field(payload, &["tool_name", "tool", "name", "action_type"]);
    let args = ["arguments", "input", "tool_input", "params", "args"]
        .iter()
        .find_map(|n| payload.get(n));
    let detail = args
        .and_then(|a| field(a, &DETAIL))
        .or_else(|| field(payload, &DETAIL))
        .or_else(|| field(payload, &["prompt", "action_summary", "message"]));
    let text = match (tool, detail) {
        (Some(t), Some(d)) => format!("{t}: {d}"),
        (Some(t), None) => t,
        (None, Some(d)) => d,
        (None, None) => return String::new(),
    };
    one_line(&redact_str(&text), usize::MAX)
}

/// Reads the summary of a log file. It does not verify the chain ([`super::verify()`] does);
/// lines that are not records are counted as unreadable.
pub fn summary(path: &Path) -> Result<Summary, AuditError> {
    let file = File::open(path).map_err(|source| AuditError::Open {
        path: path.display().to_string(),
        source,
    })?;
    let mut reader = BufReader::new(file);
    let mut summary = Summary::default();
    let mut buf = Vec::new();
    loop {
        let read = line::read_line(&mut reader, &mut buf).map_err(|source| AuditError::Open {
            path: path.display().to_string(),
            source,
        })?;
        match read {
            Read::Eof => return Ok(summary),
            Read::Line | Read::Cut | Read::TooLong => {
                match serde_json::from_slice::<AuditRecord>(&buf) {
                    Ok(record) => summary.add(&record),
                    Err(_) => summary.unreadable_lines += 1,
                }
                if read == Read::TooLong {
                    // The rest of an overlong line is not worth reading.
                    return Ok(summary);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::tests::{append_bytes, record, write_log};
    use crate::audit::AuditLog;
    use serde_json::json;

    #[test]
    fn summary_counts_decisions_events_and_blocked_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditLog::open(&path, None).unwrap();
        let mut memory = AuditLog::without_file();
        let mut notice = record("notified");
        notice.event_type = "post_action".into();
        let mut failed = record("block");
        failed.source = "fail-mode".into();
        failed.reason = Some("harness unreachable".into());
        failed.payload = json!({"tool_name": "Write", "tool_input": {"file_path": "/etc/hosts"}});
        for r in [
            record("allow"),
            record("block"),
            notice,
            failed,
            record("allow"),
        ] {
            log.append(&r).unwrap();
            memory.append(&r).unwrap();
        }
        let s = log.summary();
        assert_eq!(s, memory.summary());
        assert_eq!(&summary(&path).unwrap(), s);
        assert_eq!(s.records, 5);
        let by_decision: Vec<_> = s
            .by_decision
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(by_decision, [("allow", 2), ("block", 2), ("notified", 1)]);
        assert_eq!(s.by_event["pre_action"], 4);
        assert_eq!(s.by_event["post_action"], 1);
        assert_eq!(s.fail_mode, 1);
        assert_eq!(s.blocked.len(), 2);
        assert_eq!(s.blocked[0].what, "bash: ls -la");
        assert_eq!(s.blocked[1].what, "Write: /etc/hosts");
        assert_eq!(s.blocked[1].reason.as_deref(), Some("harness unreachable"));

        let text = s.to_text();
        assert!(
            text.starts_with(
                "ahp-wrap: 5 audited events: 2 allow, 2 block, 1 notified (1 by fail-mode)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("blocked 03:04:05 pre_action Write: /etc/hosts — harness unreachable"),
            "{text}"
        );
        let md = s.to_markdown();
        assert!(
            md.contains("| Decision | Count |\n|---|---:|\n| allow | 2 |\n| block | 2 |"),
            "{md}"
        );
        assert!(md.contains("#### Blocked (2)"), "{md}");
        assert!(
            md.contains("| pre\\_action | bash: ls -la | not allowed | rule:test |"),
            "{md}"
        );
    }

    #[test]
    fn a_routine_probes_refusal_is_counted_not_listed() {
        let mut s = Summary::default();
        let mut r = record("block");
        r.payload = serde_json::json!({"tool_name": "net", "arguments": {
            "url": "unix:/tmp/tmux-0/default", "routine": "the agent asked your tmux server"}});
        s.add(&r);
        assert!(s.blocked.is_empty());
        assert_eq!(s.routine, 1);
        assert_eq!(s.by_decision["block"], 1);
        let text = s.to_text();
        assert!(
            text.contains("1 of the agent's routine probes refused"),
            "{text}"
        );
        assert!(!text.contains("blocked "), "{text}");
    }

    #[test]
    fn summary_of_a_file_counts_unreadable_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_log(dir.path(), 2, None);
        append_bytes(&path, b"{\"partial");
        let s = summary(&path).unwrap();
        assert_eq!((s.records, s.unreadable_lines), (2, 1));
    }
}
