//! Code on disk: the scripts, interpreter files and build files a command runs, read at
//! decision time so that what they do is analysed like a command line.
//!
//! Reading is bounded: a file larger than [`MAX_FILE`] bytes, one that is not a regular file
//! (a FIFO would hang the reader), or one that cannot be opened is *unreadable*, and a rule
//! escalates it. Binaries are *opaque*: what they do is the floor's business, not a text
//! analysis's. What was read is cached by device, inode, size and modification time, so a
//! file run on every call is read once.
//!
//! A file changed (its status-change time, which no program can set back) at or after the
//! run started is *untrusted*: it may be the agent's own work. The walker holds such code to
//! the rules for command lines; the project's own code is trusted with values known only at
//! run time.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::command::{program_name, MAX_CODE_FILE};
use crate::inline::Lang;
use crate::semantics::SHELLS;

/// Largest file read as code.
const MAX_FILE: u64 = MAX_CODE_FILE;

/// Largest shell script walked: parsing is the slow part (some 26 ms at this size).
pub(super) const MAX_SHELL_SCRIPT: usize = 128 * 1024;

/// Most files one event may read (scripts, build files, the files they include).
pub(super) const MAX_FILES: usize = 64;

/// How far a file's change time may lag the clock `since` was read from.
const CLOCK_SLACK: Duration = Duration::from_secs(1);

/// Entries the cache holds before it starts again.
const MAX_CACHED: usize = 1024;

/// What a file holds, as code.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Code {
    /// Text, and whether it is trusted (unchanged since the run started).
    Text { text: Arc<str>, trusted: bool },
    /// No such file (or a directory): nothing runs from it.
    Missing,
    /// A binary: not analysed here.
    Opaque,
    /// It exists but cannot be read as code, and why.
    Unreadable(String),
}

/// The language a script's first line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Interpreter {
    /// A shell, or no `#!` line at all (the shell then runs it).
    Shell,
    Lang(Lang),
    /// A `#!` line naming something else (`make -f`, a binary of the project).
    Other,
}

#[derive(Debug, Clone)]
struct Cached {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    code: Code,
}

static CACHE: LazyLock<Mutex<HashMap<PathBuf, Cached>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Reads `path` as code. `since`: files changed at or after it are untrusted.
pub(super) fn read(path: &Path, since: SystemTime) -> Code {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Code::Missing,
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOTDIR) => return Code::Missing,
        Err(e) => return Code::Unreadable(format!("{} cannot be examined ({e})", path.display())),
    };
    if meta.is_dir() {
        return Code::Missing;
    }
    if !meta.is_file() {
        return Code::Unreadable(format!("{} is not a regular file", path.display()));
    }
    let key = Cached {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
        code: Code::Missing,
    };
    let changed = UNIX_EPOCH
        + Duration::new(
            u64::try_from(key.ctime.0).unwrap_or(0),
            u32::try_from(key.ctime.1).unwrap_or(0),
        );
    // File times come from the kernel's coarse clock, which lags the one `since` was read
    // from by up to a tick: a file changed just after the run started must not look older.
    let trusted = changed + CLOCK_SLACK < since;
    let with_trust = |code: Code| match code {
        Code::Text { text, .. } => Code::Text { text, trusted },
        other => other,
    };
    if let Some(hit) = CACHE.lock().ok().and_then(|c| {
        c.get(path)
            .filter(|h| {
                (h.dev, h.ino, h.size, h.mtime, h.ctime)
                    == (key.dev, key.ino, key.size, key.mtime, key.ctime)
            })
            .map(|h| h.code.clone())
    }) {
        return with_trust(hit);
    }
    let code = read_uncached(path, meta.size());
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(
            path.to_path_buf(),
            Cached {
                code: code.clone(),
                ..key
            },
        );
    }
    with_trust(code)
}

fn read_uncached(path: &Path, size: u64) -> Code {
    if size > MAX_FILE {
        return Code::Unreadable(format!(
            "{} is larger than {} KiB",
            path.display(),
            MAX_FILE / 1024
        ));
    }
    // Non-blocking: a FIFO swapped in after the check must not hang the reader.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) => return Code::Unreadable(format!("{} cannot be read ({e})", path.display())),
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Code::Unreadable(format!("{} is not a regular file", path.display()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    if let Err(e) = (&mut file).take(MAX_FILE + 1).read_to_end(&mut bytes) {
        return Code::Unreadable(format!("{} cannot be read ({e})", path.display()));
    }
    if bytes.len() as u64 > MAX_FILE {
        return Code::Unreadable(format!(
            "{} is larger than {} KiB",
            path.display(),
            MAX_FILE / 1024
        ));
    }
    let head = &bytes[..bytes.len().min(1024)];
    if head.starts_with(b"\x7fELF") || head.contains(&0) {
        return Code::Opaque;
    }
    Code::Text {
        text: Arc::from(String::from_utf8_lossy(&bytes).as_ref()),
        trusted: true,
    }
}

/// The program a script's `#!` line runs, with its arguments (`env` and its options
/// skipped): `None` without a `#!` line.
pub(super) fn shebang(text: &str) -> Option<Vec<String>> {
    let line = text.strip_prefix("#!")?.lines().next().unwrap_or_default();
    let mut words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    if words.first().is_some_and(|w| program_name(w) == "env") {
        words.remove(0);
        // `env -S 'prog args'`, `env -i`, `env VAR=x prog`.
        while let Some(w) = words.first() {
            if w == "-S" || w == "--split-string" || w == "-i" || w == "-" || w.contains('=') {
                words.remove(0);
            } else if let Some(rest) = w.strip_prefix("-S") {
                words[0] = rest.to_owned();
                break;
            } else {
                break;
            }
        }
    }
    Some(words)
}

/// The language that runs `text` when it is executed as a program.
pub(super) fn interpreter(text: &str) -> Interpreter {
    match shebang(text) {
        None => Interpreter::Shell,
        Some(words) => {
            let Some(first) = words.first() else {
                return Interpreter::Shell;
            };
            let program = program_name(first);
            if SHELLS.contains(&program.as_str()) {
                Interpreter::Shell
            } else if let Some(lang) = Lang::of(&program) {
                Interpreter::Lang(lang)
            } else {
                Interpreter::Other
            }
        }
    }
}

/// The nearest `name` at or above `dir` (as npm and just look for their files).
pub(super) fn find_up(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    dir.ancestors()
        .take(32)
        .find_map(|d| names.iter().map(|n| d.join(n)).find(|p| p.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn since_now() -> SystemTime {
        SystemTime::now() + Duration::from_secs(3600)
    }

    #[test]
    fn text_binaries_fifos_missing_and_oversized_files_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("x.sh"), "rm -rf ~\n").unwrap();
        std::fs::write(d.join("bin"), b"\x7fELF\x02\x01\x01\0\0").unwrap();
        std::fs::write(d.join("big"), vec![b'#'; MAX_FILE as usize + 1]).unwrap();
        nix::unistd::mkfifo(&d.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        match read(&d.join("x.sh"), since_now()) {
            Code::Text { text, trusted } => {
                assert_eq!(&*text, "rm -rf ~\n");
                assert!(trusted, "changed before `since`");
            }
            other => panic!("{other:?}"),
        }
        // Changed after the run started: untrusted, even when read from the cache.
        let past = SystemTime::now() - Duration::from_secs(3600);
        assert!(matches!(
            read(&d.join("x.sh"), past),
            Code::Text { trusted: false, .. }
        ));
        assert_eq!(read(&d.join("bin"), since_now()), Code::Opaque);
        assert_eq!(read(&d.join("missing"), since_now()), Code::Missing);
        assert_eq!(read(d, since_now()), Code::Missing);
        assert!(
            matches!(read(&d.join("big"), since_now()), Code::Unreadable(w) if w.contains("larger"))
        );
        assert!(
            matches!(read(&d.join("fifo"), since_now()), Code::Unreadable(w) if w.contains("not a regular file"))
        );
        // A change is seen through the cache.
        std::fs::write(d.join("x.sh"), "echo changed\n").unwrap();
        assert!(
            matches!(read(&d.join("x.sh"), since_now()), Code::Text { text, .. } if &*text == "echo changed\n")
        );
    }

    #[test]
    fn shebang_lines_name_their_language() {
        assert_eq!(interpreter("echo hi\n"), Interpreter::Shell);
        assert_eq!(interpreter("#!/bin/bash -e\nx"), Interpreter::Shell);
        assert_eq!(
            interpreter("#!/usr/bin/env python3\n"),
            Interpreter::Lang(Lang::Python)
        );
        assert_eq!(
            interpreter("#!/usr/bin/env -S node --no-warnings\n"),
            Interpreter::Lang(Lang::Js)
        );
        assert_eq!(
            interpreter("#!/usr/bin/perl -w\n"),
            Interpreter::Lang(Lang::Perl)
        );
        assert_eq!(interpreter("#!/usr/bin/make -f\n"), Interpreter::Other);
    }
}
