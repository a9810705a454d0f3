//! Memory of what the agent wrote: within a session, the text each write of a file tool or
//! of a shell command put in a file, so that a later command that runs or sources that file
//! is decided on what the agent wrote, even when the file on disk is gone, cannot be read,
//! or holds something else (the stricter of the two readings wins: both are walked).
//!
//! What is remembered, per file: the text after the session's last write whose text is
//! known (a `Write`/`write_file`/`create` tool's content, an edit applied to the text
//! before it, a patch's added lines, `echo`/`printf`/here-document redirections and `tee`,
//! a copy of a remembered file), or only that the session wrote it, in a way whose text
//! cannot be followed (an interpreter's write, `sed -i`, a download). A write whose text is
//! unknown never erases a known text: the file may still hold it. Deleting a file forgets
//! nothing, so a script deleted and recreated empty is still judged on what was written.
//!
//! Bounded: [`SESSION_BUDGET`] bytes of text and [`SESSION_FILES`] files per session, the
//! oldest writes forgotten first; [`SESSIONS`] sessions, the one written to least recently
//! forgotten first. Only the file an edit applies to is read from disk (bounded as code is).
//!
//! Must not: decide anything (the rules do, on what the walker reads from here), nor keep
//! what a refused call would have written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::extract::Facts;
use super::paths::Resolver;
use super::shell::{Command, Stdin};

/// Bytes of remembered text per session; past it, the oldest writes are forgotten first.
pub(crate) const SESSION_BUDGET: usize = 8 << 20;

/// Files remembered per session (each costs its path, even when its text is unknown).
pub(crate) const SESSION_FILES: usize = 4096;

/// Sessions remembered at once (a `serve` harness decides for many).
pub(crate) const SESSIONS: usize = 64;

/// Largest text remembered for one file: what the walker would read of it on disk. A larger
/// one is remembered as written, its text unknown (and never copied).
const MAX_TEXT: usize = super::shell::MAX_CODE_FILE as usize;

/// One file the session wrote.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Written {
    /// The text it holds after the session's last write whose text is known; `None` when
    /// no write's text could be followed.
    pub text: Option<Arc<str>>,
    /// How it was last written, for reasons: `the Write tool`, `a shell redirection`, …
    pub how: String,
    /// When, in the session's order of writes (the oldest is forgotten first).
    seq: u64,
}

/// The files a session wrote, by absolute path.
pub(crate) type Files = HashMap<PathBuf, Written>;

/// Every session's files.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    sessions: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<String, Session>,
    /// Counts the events that wrote, across sessions (which session wrote last).
    clock: u64,
}

#[derive(Debug, Default)]
struct Session {
    /// The clock when it last wrote.
    last: u64,
    /// Where content from the network first entered the session (a fetch, a browser, a
    /// URL a command read), for reasons; `None` while none has.
    taint: Option<Arc<str>>,
    /// Shared with the decisions reading them; copied on write only while one does.
    files: Arc<Files>,
    /// Bytes of text held.
    bytes: usize,
    /// The next write's number.
    seq: u64,
}

/// What one write puts in a file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Content {
    /// The whole text.
    Whole(String),
    /// Text added after what the file held.
    Appended(String),
    /// `old` replaced by `new` (each occurrence when `all`) in what the file held.
    Edit { old: String, new: String, all: bool },
    /// What the file `from` holds (a copy or a move).
    CopyOf(PathBuf),
    /// Text the write cannot be followed to.
    Unknown,
    /// A whole text over [`MAX_TEXT`]: written, and replacing what was known, but not kept.
    TooLarge,
}

impl Content {
    /// `text` written over the file's, or after it when `appends`; unknown without it.
    fn of(text: Option<&str>, appends: bool) -> Content {
        match text {
            Some(t) if appends => Content::Appended(t.to_owned()),
            Some(t) => Content::Whole(t.to_owned()),
            None => Content::Unknown,
        }
    }
}

/// One write of an event, in its order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Write {
    pub path: PathBuf,
    pub content: Content,
    pub how: String,
}

impl Memory {
    /// The files `session` wrote, if it wrote any.
    pub(crate) fn files(&self, session: &str) -> Option<Arc<Files>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .by_id
            .get(session)
            .filter(|s| !s.files.is_empty())
            .map(|s| s.files.clone())
    }

    /// Where content from the network first entered `session`, if it has.
    pub(crate) fn taint(&self, session: &str) -> Option<Arc<str>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.by_id.get(session).and_then(|s| s.taint.clone())
    }

    /// Remembers `writes`, in order, for `session`, and `taint` (where content from the
    /// network entered it in this event) unless an earlier one is known.
    pub(crate) fn record(&self, session: &str, writes: Vec<Write>, taint: Option<String>) {
        if writes.is_empty() && taint.is_none() {
            return;
        }
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let sessions = &mut *sessions;
        if !sessions.by_id.contains_key(session) && sessions.by_id.len() >= SESSIONS {
            let stalest = sessions
                .by_id
                .iter()
                .min_by_key(|(_, s)| s.last)
                .map(|(id, _)| id.clone());
            if let Some(id) = stalest {
                sessions.by_id.remove(&id);
            }
        }
        sessions.clock += 1;
        let s = sessions.by_id.entry(session.to_owned()).or_default();
        s.last = sessions.clock;
        if s.taint.is_none() {
            s.taint = taint.map(Arc::from);
        }
        for w in writes {
            s.write(w);
        }
        s.trim();
    }
}

impl Session {
    fn write(&mut self, w: Write) {
        let before = self.files.get(&w.path).cloned();
        let base = |path: &Path, before: &Option<Written>| -> Option<String> {
            match before {
                Some(b) => b.text.as_deref().map(str::to_owned),
                None => on_disk(path),
            }
        };
        let text: Option<String> = match w.content {
            Content::Whole(t) => Some(t),
            Content::Appended(t) => base(&w.path, &before).map(|b| b + &t).or(Some(t)),
            Content::Edit { old, new, all } => match base(&w.path, &before) {
                Some(b) if !old.is_empty() && b.contains(&old) => Some(if all {
                    b.replace(&old, &new)
                } else {
                    b.replacen(&old, &new, 1)
                }),
                // An edit that does not apply to what we know: the file holds what we know
                // and the new text somewhere (both are read).
                Some(b) => Some(format!("{b}\n{new}")),
                None => Some(new),
            },
            Content::CopyOf(from) => match self.files.get(&from) {
                Some(src) => src.text.as_deref().map(str::to_owned),
                // A file the walker reads from disk; what we knew may still be read too.
                None => before
                    .as_ref()
                    .and_then(|b| b.text.as_deref().map(str::to_owned)),
            },
            Content::TooLarge => None,
            // The file may still hold what we knew.
            Content::Unknown => before
                .as_ref()
                .and_then(|b| b.text.as_deref().map(str::to_owned)),
        };
        let text: Option<Arc<str>> = text.filter(|t| t.len() <= MAX_TEXT).map(Arc::from);
        self.bytes -= before
            .as_ref()
            .map_or(0, |b| b.text.as_ref().map_or(0, |t| t.len()));
        self.bytes += text.as_ref().map_or(0, |t| t.len());
        self.seq += 1;
        Arc::make_mut(&mut self.files).insert(
            w.path,
            Written {
                text,
                how: w.how,
                seq: self.seq,
            },
        );
    }

    /// Forgets the oldest writes until the session is within its budget.
    fn trim(&mut self) {
        while self.bytes > SESSION_BUDGET || self.files.len() > SESSION_FILES {
            let Some(oldest) = self
                .files
                .iter()
                .min_by_key(|(_, w)| w.seq)
                .map(|(p, _)| p.clone())
            else {
                return;
            };
            if let Some(w) = Arc::make_mut(&mut self.files).remove(&oldest) {
                self.bytes -= w.text.map_or(0, |t| t.len());
            }
        }
    }
}

/// The text a file holds now, when it is a regular file small enough to be code.
fn on_disk(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_TEXT as u64 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The writes of one event: its file tool's (with the text the tool writes) and its shell
/// commands' (with the text of those whose text the command line holds).
pub(crate) fn writes(args: &Value, facts: &Facts, resolver: &Resolver, cwd: &Path) -> Vec<Write> {
    let mut out = Vec::new();
    let how = match &facts.tool {
        Some(t) => format!("the {t} tool"),
        None => "a tool".to_owned(),
    };
    // A patch (`apply_patch`, however the agent passes it: an argument of its own, its
    // `command`) is all the event writes.
    if let Value::Object(map) = args {
        let texts = map.values().flat_map(|v| match v {
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            v => v.as_str().into_iter().collect::<Vec<_>>(),
        });
        for patch in texts.filter(|t| t.contains("*** Begin Patch")) {
            patch_writes(patch, resolver, cwd, &how, &mut out);
        }
    }
    if !out.is_empty() {
        return out;
    }
    if facts.shell.is_empty() {
        tool_writes(args, facts, resolver, cwd, &how, &mut out);
    }
    for c in &facts.commands {
        command_writes(&c.cmd, &c.writes, resolver, &mut out);
    }
    out
}

/// Keys that hold a whole file's new text.
const TEXT_KEYS: &[&str] = &["content", "contents", "file_text", "text"];

/// A file tool's writes: every path it writes, with the text when its arguments hold it.
fn tool_writes(
    args: &Value,
    facts: &Facts,
    resolver: &Resolver,
    cwd: &Path,
    how: &str,
    out: &mut Vec<Write>,
) {
    let how = how.to_owned();
    let str_of = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
    };
    // The file the tool writes (a reading tool names one too: it is not among the writes).
    let target = str_of(&[
        "file_path",
        "path",
        "filename",
        "file",
        "target_file",
        "target",
    ])
    .map(|p| resolver.resolve(p, cwd).abs)
    .filter(|t| facts.writes.iter().any(|w| &w.abs == t));
    if let Some(path) = target.clone() {
        let edit = |e: &Value| {
            let s = |keys: &[&str]| keys.iter().find_map(|k| e.get(*k).and_then(Value::as_str));
            Some(Content::Edit {
                old: s(&["old_string", "old_str"])?.to_owned(),
                new: s(&["new_string", "new_str"]).unwrap_or_default().to_owned(),
                all: e
                    .get("replace_all")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        };
        let contents: Vec<Content> = if let Some(text) = str_of(TEXT_KEYS) {
            vec![if text.len() <= MAX_TEXT {
                Content::Whole(text.to_owned())
            } else {
                Content::TooLarge
            }]
        } else if let Some(edits) = args.get("edits").and_then(Value::as_array) {
            edits
                .iter()
                .map(|e| edit(e).unwrap_or(Content::Unknown))
                .collect()
        } else {
            vec![edit(args).unwrap_or(Content::Unknown)]
        };
        out.extend(contents.into_iter().map(|content| Write {
            path: path.clone(),
            content,
            how: how.clone(),
        }));
    }
    // Every other path the tool writes (a move's destination, a download's file).
    for w in &facts.writes {
        if Some(&w.abs) != target.as_ref() {
            out.push(Write {
                path: w.abs.clone(),
                content: Content::Unknown,
                how: how.clone(),
            });
        }
    }
}

/// An `apply_patch` patch's files: an added file's whole text, an updated one's added lines
/// (after what it held: both are read).
fn patch_writes(patch: &str, resolver: &Resolver, cwd: &Path, how: &str, out: &mut Vec<Write>) {
    let mut current: Option<(PathBuf, bool, String)> = None;
    let flush = |current: &mut Option<(PathBuf, bool, String)>, out: &mut Vec<Write>| {
        if let Some((path, whole, text)) = current.take() {
            out.push(Write {
                path,
                content: if whole {
                    Content::Whole(text)
                } else {
                    Content::Appended(text)
                },
                how: how.to_owned(),
            });
        }
    };
    for line in patch.lines() {
        let trimmed = line.trim_start();
        if let Some(p) = trimmed.strip_prefix("*** Add File: ") {
            flush(&mut current, out);
            current = Some((resolver.resolve(p.trim(), cwd).abs, true, String::new()));
        } else if let Some(p) = trimmed
            .strip_prefix("*** Update File: ")
            .or_else(|| trimmed.strip_prefix("*** Move to: "))
        {
            flush(&mut current, out);
            current = Some((resolver.resolve(p.trim(), cwd).abs, false, "\n".to_owned()));
        } else if trimmed.starts_with("*** ") {
            flush(&mut current, out);
        } else if let (Some(added), Some((_, _, text))) = (line.strip_prefix('+'), &mut current) {
            text.push_str(added);
            text.push('\n');
        }
    }
    flush(&mut current, out);
}

/// Programs whose writes leave a file's text as it was (its mode, owner, times).
const KEEP_TEXT: &[&str] = &["chmod", "chown", "chgrp", "touch", "chattr", "setfacl"];

/// A shell command's writes: a redirection of `echo`, `printf` or a here-document, `tee` of
/// a text known now, a copy of a file the session wrote; any other write with its text
/// unknown.
fn command_writes(
    cmd: &Command,
    writes: &[super::paths::ResolvedPath],
    resolver: &Resolver,
    out: &mut Vec<Write>,
) {
    if KEEP_TEXT.contains(&cmd.program.as_str()) {
        return;
    }
    let literal_stdin = match &cmd.stdin {
        Stdin::Literal(t) => Some(t.clone()),
        _ => None,
    };
    let output: Option<String> = match cmd.program.as_str() {
        "echo" => {
            let words: Vec<&str> = cmd
                .args
                .iter()
                .map(String::as_str)
                .skip_while(|a| matches!(*a, "-n" | "-e" | "-E" | "-ne" | "-en"))
                .collect();
            Some(format!("{}\n", words.join(" ")))
        }
        // The format and its arguments: what a reader of the file sees, near enough.
        "printf" => Some(cmd.args.join(" ")),
        "cat" if cmd.args.is_empty() => literal_stdin.clone(),
        _ => None,
    };
    let mut done: Vec<PathBuf> = Vec::new();
    for r in cmd.redirects.iter().filter(|r| r.writes && !r.reads) {
        if super::shell::is_unknown(&r.target) || r.target.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let path = resolver.resolve_word(&r.target, &cmd.cwd).abs;
        let content = Content::of(output.as_deref(), r.appends);
        done.push(path.clone());
        out.push(Write {
            path,
            content,
            how: "a shell redirection".to_owned(),
        });
    }
    if cmd.program == "tee" {
        let append = cmd.args.iter().any(|a| a == "-a" || a == "--append");
        for a in cmd.args.iter().filter(|a| !a.starts_with('-')) {
            let path = resolver.resolve_word(a, &cmd.cwd).abs;
            let content = Content::of(literal_stdin.as_deref(), append);
            done.push(path.clone());
            out.push(Write {
                path,
                content,
                how: "tee".to_owned(),
            });
        }
    }
    if matches!(cmd.program.as_str(), "cp" | "mv" | "install") {
        let operands: Vec<&String> = cmd.args.iter().filter(|a| !a.starts_with('-')).collect();
        if let [from, to] = operands[..] {
            if !super::shell::is_unknown(from) && !super::shell::is_unknown(to) {
                let from = resolver.resolve_word(from, &cmd.cwd).abs;
                let mut to = resolver.resolve_word(to, &cmd.cwd).abs;
                if to.is_dir() {
                    if let Some(name) = from.file_name() {
                        to = to.join(name);
                    }
                }
                done.push(to.clone());
                out.push(Write {
                    path: to,
                    content: Content::CopyOf(from),
                    how: format!("`{}`", cmd.program),
                });
            }
        }
    }
    for w in writes {
        if !done.contains(&w.abs) {
            out.push(Write {
                path: w.abs.clone(),
                content: Content::Unknown,
                how: format!(
                    "`{}`",
                    if cmd.program.is_empty() {
                        "a command"
                    } else {
                        &cmd.program
                    }
                ),
            });
        }
    }
}
