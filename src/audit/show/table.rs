//! `audit show`'s table: a run's decisions in columns fitted to the width, each reason
//! wrapped whole below its line.

use std::fmt::Write as _;
use std::path::Path;

use super::super::fit;
use super::super::summary::describe_full;
use super::super::AuditRecord;
use super::time;

/// Who decided, as the RULE column says it: the rule's name, or in words what decided
/// when no rule did (`source` as the audit log writes it: `policy:<rule>`, `policy`,
/// `fail-mode`, `floor`, …).
pub(crate) fn decided_by(source: &str) -> String {
    if let Some(rule) = source.strip_prefix("policy:") {
        return rule.to_owned();
    }
    if let Some(who) = source.strip_prefix("person:") {
        return format!("asked: {who}");
    }
    match source {
        "policy" => "no rule matched",
        "fail-mode" => "the fail mode",
        "floor" => "the floor: net rules",
        "harness" => "the harness",
        "person" => "asked at the terminal",
        "cancelled" => "nobody: cancelled",
        other => other,
    }
    .to_owned()
}

/// What was asked, for the WHAT column: the home written `~`, and a lone path (`Read:
/// /a/b/c.rs`) cut in the middle so that its file name stays, anything else at its end.
fn what_fit(what: &str, n: usize) -> String {
    match what.split_once(": ") {
        Some((tool, detail))
            if !detail.contains(' ') && detail.contains('/') && tool.len() + 2 < n =>
        {
            format!("{tool}: {}", fit::middle(detail, n - tool.len() - 2))
        }
        _ => fit::cut(what, n),
    }
}

/// The decisions as columns: time, verdict, rule, what; the reason below what, wrapped,
/// whole. Each line fits in `width` (at least [`fit::MIN_WIDTH`]).
pub(super) fn table(
    out: &mut String,
    records: &[&(Vec<u8>, AuditRecord)],
    width: usize,
    home: Option<&Path>,
) {
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
                (d, _) if r.reversible.is_some() => format!("{d} (reversible)"),
                (d, _) => d.to_owned(),
            },
            rule: decided_by(&r.source),
            what: match describe_full(&r.payload) {
                w if w.is_empty() => r.event_type.clone(),
                w => fit::home(&w, home),
            },
            reason: r.reason.as_deref().map(fit::flat),
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
    // The rule's column takes at most a quarter of the line, the rest goes to what.
    let mut w_rule = widest(|r| &r.rule, "RULE").min((width / 4).clamp(10, 40));
    let fixed = 2 + w_time + 2 + w_verdict + 2;
    // Never less than a readable strip for what: the rule's column gives way first.
    w_rule = w_rule.min(width.saturating_sub(fixed + 2 + 16)).max(4);
    let indent = fixed + w_rule + 2;
    let rest = width.saturating_sub(indent).max(1);
    // The reason below what, or from the left where what's column is too narrow for it.
    let at = match width.saturating_sub(indent + 2) >= 30 {
        true => indent,
        false => 4,
    };
    let _ = writeln!(
        out,
        "  {:<w_time$}  {:<w_verdict$}  {:<w_rule$}  WHAT",
        "TIME", "VERDICT", "RULE"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "  {:<w_time$}  {:<w_verdict$}  {:<w_rule$}  {}",
            fit::cut(&row.time, w_time),
            fit::cut(&row.verdict, w_verdict),
            fit::cut(&row.rule, w_rule),
            what_fit(&row.what, rest)
        );
        if let Some(reason) = row.reason {
            for (i, line) in fit::wrap(&reason, width - at - 2).iter().enumerate() {
                let mark = if i == 0 { "↳ " } else { "  " };
                let _ = writeln!(out, "{:at$}{mark}{line}", "");
            }
        }
    }
}
