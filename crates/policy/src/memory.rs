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

use crate::command::MAX_CODE_FILE;

/// Bytes of remembered text per session; past it, the oldest writes are forgotten first.
pub(crate) const SESSION_BUDGET: usize = 8 << 20;

/// Files remembered per session (each costs its path, even when its text is unknown).
pub(crate) const SESSION_FILES: usize = 4096;

/// Sessions remembered at once (a `serve` harness decides for many).
pub(crate) const SESSIONS: usize = 64;

/// Largest text remembered for one file: what the walker would read of it on disk. A larger
/// one is remembered as written, its text unknown (and never copied).
pub(crate) const MAX_TEXT: usize = MAX_CODE_FILE as usize;

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
    pub(crate) fn of(text: Option<&str>, appends: bool) -> Content {
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
