//! The floor's refusals the agent met, as its own tools reported them (see
//! [`crate::floor::explain`]): explained to the agent in the context its framework takes after
//! a tool call, and counted for the person's summary. This works without the kernel's audit
//! log; where that log is readable the run still reads it too.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use crate::floor::explain::{Lines, Met, Why};

/// How many distinct refusals the summary names; the rest are counted.
const NAMED: usize = 5;
/// How much of a tool result is looked at.
const MAX_TEXT: usize = 256 << 10;

/// The refusals of this run's floor its agent met.
#[derive(Default)]
pub struct FloorMet {
    lines: OnceLock<Lines>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    total: u64,
    distinct: Vec<Met>,
}

impl FloorMet {
    /// The lines this run's floor draws (once it has one).
    pub fn draw(&self, lines: Lines) {
        let _ = self.lines.set(lines);
    }

    /// The floor's refusals that the tool result in `payload` (a `post_action`'s, its
    /// `result`) reports, for a tool run in `cwd`; each is counted.
    pub fn met(&self, payload: &Value, cwd: &Path) -> Vec<Met> {
        let Some(lines) = self.lines.get() else {
            return Vec::new();
        };
        let Some(result) = payload.get("result") else {
            return Vec::new();
        };
        let mut text = String::new();
        strings(result, &mut text, 0);
        if text.is_empty() {
            return Vec::new();
        }
        let met = lines.find(&text, cwd);
        if !met.is_empty() {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.total += met.len() as u64;
            for m in &met {
                if !seen.distinct.contains(m) {
                    seen.distinct.push(m.clone());
                }
            }
        }
        met
    }

    /// What the agent is told about `met`: what was refused, that this run's floor forbids
    /// it, and what the user can change.
    pub fn explain(&self, met: &[Met]) -> String {
        let roots = self.lines.get().map(Lines::writable).unwrap_or_default();
        let mut out = String::from(
            "ahp-wrap (the supervisor of this session): the refusal above came from this run's \
             floor, not from a fault of the machine. ",
        );
        for m in met {
            let _ = write!(out, "{} ({}): ", m.path.display(), m.refusal.text());
            match m.why {
                Why::Outside => {
                    let shown: Vec<String> = roots
                        .iter()
                        .take(4)
                        .map(|r| r.display().to_string())
                        .collect();
                    let more = roots.len().saturating_sub(shown.len());
                    let _ = write!(
                        out,
                        "this run may write only beneath its writable roots ({}{}). ",
                        shown.join(", "),
                        if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        }
                    );
                }
                Why::Protected => out.push_str(
                    "this path is protected in this run (files a later session obeys or runs, \
                     and the supervisor's own, are not written by the agent). ",
                ),
            }
        }
        out.push_str(
            "Trying again, or another way to write there, will be refused the same way. If the \
             change is needed, tell the user: they can allow the path in the policy's [floor] \
             (`writable`, or `keep` for a protected path), or run without the floor \
             (`--floor off`).",
        );
        out
    }

    /// The summary's line: how many times the agent met the floor, and where.
    pub fn summary(&self) -> Option<String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.total == 0 {
            return None;
        }
        let named: Vec<String> = seen
            .distinct
            .iter()
            .take(NAMED)
            .map(|m| {
                let why = match m.why {
                    Why::Outside => "outside the writable roots",
                    Why::Protected => "protected",
                };
                format!("{} ({}, {why})", m.path.display(), m.refusal.text())
            })
            .collect();
        let more = seen.distinct.len().saturating_sub(NAMED);
        let times = if seen.total == 1 { "once" } else { "times" };
        let count = match seen.total {
            1 => String::new(),
            n => format!("{n} "),
        };
        Some(format!(
            "the agent met the floor {count}{times} (its tools reported the refusal, and the agent \
             was told why): {}{}",
            named.join("; "),
            if more > 0 { format!("; and {more} more") } else { String::new() }
        ))
    }
}

/// The strings of `value`, one a line, up to [`MAX_TEXT`] bytes.
fn strings(value: &Value, out: &mut String, depth: usize) {
    if out.len() >= MAX_TEXT || depth > 8 {
        return;
    }
    match value {
        Value::String(s) => {
            let room = MAX_TEXT - out.len();
            let cut = match s.char_indices().find(|(i, _)| *i >= room) {
                Some((i, _)) => &s[..i],
                None => s,
            };
            out.push_str(cut);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| strings(v, out, depth + 1)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_result_naming_a_refused_path_is_explained_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let met = FloorMet::default();
        let payload = json!({"tool_name": "Bash", "result": {"status": "error",
            "error": format!("Exit code 1\ntouch: cannot touch '{}/elsewhere': Permission denied", dir.path().display())}});
        assert!(met.met(&payload, &ws).is_empty(), "no floor drawn: nothing");
        met.draw(Lines::from_parts(vec![ws.clone()], vec![], None));
        let found = met.met(&payload, &ws);
        assert_eq!(found.len(), 1);
        let told = met.explain(&found);
        assert!(told.contains("elsewhere (Permission denied)"), "{told}");
        assert!(
            told.contains(&format!("writable roots ({})", ws.display())),
            "{told}"
        );
        assert!(told.contains("--floor off"), "{told}");
        met.met(&payload, &ws);
        let summary = met.summary().unwrap();
        assert!(
            summary.starts_with("the agent met the floor 2 times"),
            "{summary}"
        );
        assert_eq!(summary.matches("elsewhere").count(), 1, "{summary}");
        let ok = json!({"result": {"output": "touch: cannot touch 'x': Permission denied"}});
        assert!(
            met.met(&ok, &ws).is_empty(),
            "in the workspace: not the floor's"
        );
    }
}
