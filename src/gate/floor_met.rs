//! The floor's refusals the agent met, as its own tools reported them: explained to the agent
//! in the context its framework takes after a tool call, and counted for the person's summary.
//! Writes are found by [`crate::floor::explain`]; connections by the hosts (and path sockets)
//! this run's network floor refused: a result line that reports a failed connection or lookup
//! and names such a host (or a call that named it and got such a line). This works without
//! the kernel's audit log; where that log is readable the run still reads it too.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use crate::floor::explain::{self, Lines, Met, Why};

/// How many distinct refusals the summary names; the rest are counted.
const NAMED: usize = 5;
/// How much of a tool result is looked at.
const MAX_TEXT: usize = 256 << 10;
/// How many refused hosts and sockets are kept to be recognised in tool results.
const MAX_TARGETS: usize = 256;

/// What a tool prints when a connection or a lookup failed (ASCII case aside).
const NET_FAILED: &[&str] = &[
    "could not resolve",
    "name or service not known",
    "temporary failure in name resolution",
    "no address associated",
    "enotfound",
    "eai_noname",
    "getaddrinfo",
    "connection refused",
    "econnrefused",
    "permission denied",
    "eacces",
    "failed to connect",
    "could not connect",
    "tunnel failed",
    "response 403",
    "403 forbidden",
    "network is unreachable",
    // The egress proxy's own answer to a connection it refused.
    "refused this connection",
];

/// The refusals of this run's floor its agent met.
#[derive(Default)]
pub struct FloorMet {
    lines: OnceLock<Lines>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    total: u64,
    distinct: Vec<Told>,
    /// Hosts and path sockets the network floor refused in this run, with its reason.
    refused: Vec<(String, String)>,
    /// What the agent is to be told after its next tool call, once.
    notices: Vec<String>,
}

/// A refusal of the floor a tool call met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// A write (see [`crate::floor::explain`]).
    Write(Met),
    /// A connection to a host, or a path socket, the network floor refused, and why.
    Net {
        /// The host name, or the path socket's path, as the egress proxy noted it.
        target: String,
        /// The refusal's reason, e.g. `evil.test is denied by [floor.net]`.
        reason: String,
    },
}

impl FloorMet {
    /// The lines this run's floor draws (once it has one).
    pub(crate) fn draw(&self, lines: Lines) {
        let _ = self.lines.set(lines);
    }

    /// Something the agent is told after its next tool call (in the context its framework
    /// takes then), once: where a server its tree started can be reached, say.
    pub(crate) fn notice(&self, text: String) {
        if let Ok(mut seen) = self.seen.lock() {
            if seen.notices.len() < 16 && !seen.notices.contains(&text) {
                seen.notices.push(text);
            }
        }
    }

    /// The notices not told yet (and now taken).
    pub(crate) fn take_notices(&self) -> Vec<String> {
        self.seen
            .lock()
            .map(|mut s| std::mem::take(&mut s.notices))
            .unwrap_or_default()
    }

    /// Notes a host or path socket the network floor refused, for `reason`: a tool result
    /// that then reports a failed connection to it is explained.
    pub(crate) fn refused_target(&self, target: &str, reason: &str) {
        if target.len() < 3 {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.refused.len() < MAX_TARGETS && !seen.refused.iter().any(|(t, _)| t == target) {
            seen.refused.push((target.to_owned(), reason.to_owned()));
        }
    }

    /// The floor's refusals that the tool call in `payload` (a `post_action`'s: its
    /// `arguments` and its `result`) met, for a tool run in `cwd`; each is counted.
    pub(crate) fn met(&self, payload: &Value, cwd: &Path) -> Vec<Told> {
        let Some(lines) = self.lines.get() else {
            return Vec::new();
        };
        let Some(result) = payload.get("result") else {
            return Vec::new();
        };
        // Only the strings that name a refusal or a failed connection are read further:
        // most results name none, and cost a scan, no copy and no lock.
        let mut text = String::new();
        strings(result, &mut text, 0, &|s| {
            explain::names_refusal(s) || net_failed(s)
        });
        if text.is_empty() {
            return Vec::new();
        }
        let mut told: Vec<Told> = lines
            .find(&text, cwd)
            .into_iter()
            .map(Told::Write)
            .collect();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.refused.is_empty() {
            let mut asked = String::new();
            if let Some(arguments) = payload.get("arguments") {
                strings(arguments, &mut asked, 0, &|_| true);
            }
            let net = net_refusals(&text, &asked, &seen.refused);
            // A path socket's refused connection reads as a refused write too: said once, as
            // what it was.
            told.retain(|t| {
                match t {
                Told::Write(m) => !net.iter().any(|n| {
                    matches!(n, Told::Net { target, .. } if m.path.as_os_str() == target.as_str())
                }),
                Told::Net { .. } => true,
            }
            });
            told.extend(net);
        }
        seen.total += told.len() as u64;
        for t in &told {
            if !seen.distinct.contains(t) {
                seen.distinct.push(t.clone());
            }
        }
        told
    }

    /// What the agent is told about `told`: what was refused, that this run's floor forbids
    /// it, and what the user can change.
    pub(crate) fn explain(&self, told: &[Told]) -> String {
        let roots = self.lines.get().map(Lines::writable).unwrap_or_default();
        let mut out = String::from(
            "ahp-wrap (the supervisor of this session): the refusal above came from this run's \
             floor, not from a fault of the machine or the network. ",
        );
        let mut net = false;
        for t in told {
            match t {
                Told::Write(m) => {
                    let _ = write!(out, "{} ({}): ", m.path.display(), m.refusal.text());
                    match m.why {
                        Why::Outside => {
                            let shown: Vec<String> = roots
                                .iter()
                                .take(4)
                                .map(|r| r.display().to_string())
                                .collect();
                            let more = match roots.len().saturating_sub(shown.len()) {
                                0 => String::new(),
                                n => format!(" and {n} more"),
                            };
                            let _ = write!(
                                out,
                                "this run may write only beneath its writable roots ({}{more}). ",
                                shown.join(", ")
                            );
                        }
                        Why::Protected => out.push_str(
                            "this path is protected in this run (files a later session obeys or \
                             runs, and the supervisor's own, are not written by the agent). ",
                        ),
                    }
                }
                Told::Net { target, reason } => {
                    net = true;
                    let _ = write!(
                        out,
                        "{target}: the run's network floor refused it ({reason}). "
                    );
                }
            }
        }
        out.push_str(
            "Trying again, or another program or way to do it, will be refused the same way. If \
             it is needed, tell the user: they can allow it in the policy's [floor]",
        );
        out.push_str(if net {
            " (`[floor.net]` `allow` for a host, `[floor.unix]` for a socket; `writable`, or \
             `keep` for a protected path)"
        } else {
            " (`writable`, or `keep` for a protected path)"
        });
        out.push_str(", or run without the floor (`--floor off`).");
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
            .map(|t| match t {
                Told::Write(m) => {
                    let why = match m.why {
                        Why::Outside => "outside the writable roots",
                        Why::Protected => "protected",
                    };
                    format!("{} ({}, {why})", m.path.display(), m.refusal.text())
                }
                Told::Net { target, .. } => format!("{target} (a connection the floor refused)"),
            })
            .collect();
        let more = match seen.distinct.len().saturating_sub(NAMED) {
            0 => String::new(),
            n => format!("; and {n} more"),
        };
        let times = match seen.total {
            1 => "once".to_owned(),
            n => format!("{n} times"),
        };
        Some(format!(
            "the agent met the floor {times} (its tools reported the refusal, and the agent \
             was told why): {}{more}",
            named.join("; ")
        ))
    }
}

/// The refused hosts and sockets of `refused` that a result line reporting a failed
/// connection names, or that the call itself named (`asked`; a proxy's refusal, `CONNECT
/// tunnel failed, response 403`, does not repeat the host).
fn net_refusals(result: &str, asked: &str, refused: &[(String, String)]) -> Vec<Told> {
    let mut told = Vec::new();
    for line in result.lines() {
        if !net_failed(line) {
            continue;
        }
        for (target, reason) in refused {
            let t = Told::Net {
                target: target.clone(),
                reason: reason.clone(),
            };
            if (names(line, target) || names(asked, target)) && !told.contains(&t) {
                told.push(t);
            }
        }
    }
    told
}

/// Whether `text` reports a failed connection or lookup.
fn net_failed(text: &str) -> bool {
    NET_FAILED
        .iter()
        .any(|p| explain::find_ascii_ci(text, p).is_some())
}

/// Whether `text` names `target` as a whole (`evil.test` in `https://evil.test/x`, not in
/// `notevil.test` or `evil.test.example`).
fn names(text: &str, target: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(target).any(|(at, _)| {
        let end = at + target.len();
        let before = text[..at].chars().next_back();
        let mut after = text[end..].chars();
        let next = after.next();
        let label_follows = next == Some('.') && after.next().is_some_and(part);
        !before.is_some_and(|c| part(c) || c == '.') && !next.is_some_and(part) && !label_follows
    })
}

/// The strings of `value` that `keep` accepts, one a line, up to [`MAX_TEXT`] bytes.
fn strings(value: &Value, out: &mut String, depth: usize, keep: &dyn Fn(&str) -> bool) {
    if out.len() >= MAX_TEXT || depth > 8 {
        return;
    }
    match value {
        Value::String(s) if !keep(s) => {}
        Value::String(s) => {
            let room = MAX_TEXT - out.len();
            let cut = match s.char_indices().find(|(i, _)| *i >= room) {
                Some((i, _)) => &s[..i],
                None => s,
            };
            out.push_str(cut);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| strings(v, out, depth + 1, keep)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out, depth + 1, keep)),
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

    #[test]
    fn a_failed_connection_to_a_host_the_floor_refused_is_explained() {
        let met = FloorMet::default();
        met.draw(Lines::from_parts(vec!["/ws".into()], vec![], None));
        met.refused_target("evil.test", "evil.test is denied by [floor.net]");
        let call = |command: &str, output: &str| json!({"arguments": {"command": command}, "result": {"output": output}});
        let lookup = call(
            "curl -s https://evil.test/x",
            "curl: (6) Could not resolve host: evil.test",
        );
        let told = met.met(&lookup, Path::new("/ws"));
        assert_eq!(told.len(), 1, "{told:?}");
        let text = met.explain(&told);
        assert!(
            text.contains("evil.test: the run's network floor refused it (evil.test is denied"),
            "{text}"
        );
        assert!(text.contains("[floor.net]"), "{text}");
        // Through the proxy the error does not name the host; the call did.
        let proxied = call(
            "curl -s https://evil.test/x",
            "curl: (56) CONNECT tunnel failed, response 403",
        );
        assert_eq!(met.met(&proxied, Path::new("/ws")).len(), 1);
        // Another host, a longer name, or no failure: nothing.
        for (command, output) in [
            (
                "curl -s https://notevil.test/",
                "curl: (6) Could not resolve host: notevil.test",
            ),
            (
                "curl -s https://evil.test.example/",
                "curl: (6) Could not resolve host: evil.test.example",
            ),
            ("curl -s https://evil.test/", "<html>ok</html>"),
        ] {
            let told = met.met(&call(command, output), Path::new("/ws"));
            assert!(told.is_empty(), "{command}: {told:?}");
        }
        let summary = met.summary().unwrap();
        assert!(
            summary.contains("evil.test (a connection the floor refused)"),
            "{summary}"
        );
    }

    #[test]
    fn a_refused_path_socket_is_told_once_as_a_connection() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("outside/tmux.sock");
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let met = FloorMet::default();
        met.draw(Lines::from_parts(vec![dir.path().join("ws")], vec![], None));
        met.refused_target(
            &socket.display().to_string(),
            "not a socket the floor lets through",
        );
        let payload = json!({"arguments": {"command": "tmux run-shell x"},
            "result": {"output": format!("error connecting to {} (Permission denied)", socket.display())}});
        let told = met.met(&payload, dir.path());
        assert!(
            matches!(&told[..], [Told::Net { target, .. }] if *target == socket.display().to_string()),
            "{told:?}"
        );
    }
}
