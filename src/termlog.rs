//! Where our log goes: stderr in CI, a file while the agent owns the terminal (with the
//! warnings held back and shown after the agent's screen is gone).
//!
//! A full-screen agent (Claude Code, Codex, Gemini) draws on the terminal and reads what the
//! person types there. A line of ours written in the middle of that lands in its interface
//! and mixes with the person's typing. So while the agent owns a terminal (our stdin or
//! stdout is one) nothing of ours is written to it: the log goes to `--log-file`, by default
//! a file in the user's state directory, and the warnings and errors are also kept (a
//! bounded number) to be printed at exit, after the summary, with the file's name. The
//! default file is made at the first line written to it (most runs write none); with a
//! filter that logs more than warnings it is made at once, and the start names it.
//!
//! Owns: the log sink and the held warnings. Must not touch: the agent's stdio, ever.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::fmt::MakeWriter;

/// How many held-back warning lines are kept for the exit; the rest are only counted.
const MAX_HELD: usize = 20;

/// Why the log cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The `--log` value is no valid `tracing` filter directive.
    #[error("invalid --log filter {filter:?}: {why}")]
    Filter {
        /// The `--log` value as given.
        filter: String,
        /// The filter parser's message.
        why: String,
    },
    /// The log file (`--log-file`, or the default one in the state directory), or the state
    /// directory itself, could not be made or opened.
    #[error("cannot open the log file {path}")]
    Open {
        /// The file or directory, for display.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The agent owns the terminal, no `--log-file` was given, and neither an absolute
    /// `XDG_STATE_HOME` nor `HOME` names a state directory for the default log file.
    #[error("no state directory for the log (set XDG_STATE_HOME or HOME, or give --log-file)")]
    NoStateDir,
}

/// Whether the agent we are about to start will own a terminal: our stdin or stdout is one.
pub(crate) fn agent_owns_terminal() -> bool {
    io::stdin().is_terminal() || io::stdout().is_terminal()
}

/// The user's state directory for ahp-wrap: `$XDG_STATE_HOME/ahp-wrap`, else
/// `~/.local/state/ahp-wrap` (not created here).
pub(crate) fn state_dir() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| {
        let p = PathBuf::from(v);
        p.is_absolute().then_some(p)
    };
    std::env::var_os("XDG_STATE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".local/state"))
        })
        .map(|d| d.join("ahp-wrap"))
}

/// Whether the housekeeping that `mark` (a file in the state directory) records is due: the
/// mark missing, an hour old or more, or recording other than `said` (the settings it ran
/// under). When due, the mark is set: now, saying `said`. Sweeps of what runs leave in the
/// state directory run at most once an hour this way, not at every start.
pub(crate) fn due_hourly(mark: &Path, said: &str) -> bool {
    let recent = std::fs::metadata(mark)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < std::time::Duration::from_secs(3600));
    if recent && std::fs::read_to_string(mark).is_ok_and(|s| s == said) {
        return false;
    }
    let _ = std::fs::write(mark, said);
    true
}

/// Makes `dir` (and its parents) when missing, private to the user (0700): the state
/// directory and what the run keeps in it.
pub(crate) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// A fresh log file name in the state directory, which is made private (0700) if missing;
/// the file itself is not made here ([`open_private`]).
fn default_log_path() -> Result<PathBuf, LogError> {
    let dir = state_dir().ok_or(LogError::NoStateDir)?;
    make_private_dir(&dir).map_err(|source| LogError::Open {
        path: dir.display().to_string(),
        source,
    })?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    Ok(dir.join(format!("run-{stamp}-{}.log", std::process::id())))
}

/// Opens (or makes, 0600) the default log file for appending.
fn open_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// What the log set up, for the run to report at start and at exit.
#[derive(Debug, Default)]
pub struct LogSink {
    /// The file the log goes to, if not stderr.
    pub path: Option<PathBuf>,
    /// Whether the file was chosen by us (not `--log-file`).
    pub default_file: bool,
    /// Whether the default file was made at the start (a filter that logs more than
    /// warnings), so that the start may name it; else it is made at its first line.
    pub made_at_start: bool,
    /// Warnings and errors held back while the agent owned the terminal.
    held: Option<Arc<Mutex<Backlog>>>,
}

#[derive(Debug, Default)]
struct Backlog {
    lines: VecDeque<String>,
    dropped: usize,
}

static SINK: OnceLock<LogSink> = OnceLock::new();

/// The log set up by [`init`] (a stderr one if `init` was never called).
pub(crate) fn sink() -> &'static LogSink {
    SINK.get_or_init(LogSink::default)
}

impl LogSink {
    /// The warnings and errors held back so far, and how many more were not kept.
    pub(crate) fn held(&self) -> (Vec<String>, usize) {
        match self.held.as_ref().and_then(|h| h.lock().ok()) {
            Some(h) => (h.lines.iter().cloned().collect(), h.dropped),
            None => (Vec::new(), 0),
        }
    }
}

/// Sets up logging. `file` is `--log-file`; `agent_run` says whether we are about to run an
/// agent (only then may the terminal belong to someone else).
pub fn init(
    filter: &str,
    file: Option<&Path>,
    agent_run: bool,
) -> Result<&'static LogSink, LogError> {
    let env_filter =
        tracing_subscriber::EnvFilter::try_new(filter).map_err(|e| LogError::Filter {
            filter: filter.to_owned(),
            why: e.to_string(),
        })?;
    // More than warnings: lines will come, and the person may want to follow them.
    let verbose = env_filter
        .max_level_hint()
        .is_some_and(|l| l > tracing::level_filters::LevelFilter::WARN);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_target(false);
    let hold = agent_run && agent_owns_terminal();
    let (path, handle, default_file) = match file {
        Some(path) => {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| LogError::Open {
                    path: path.display().to_string(),
                    source,
                })?;
            (Some(path.to_owned()), Some(LogFile::Open(f)), false)
        }
        None if hold => {
            let path = default_log_path()?;
            let file = match verbose {
                true => LogFile::Open(open_private(&path).map_err(|source| LogError::Open {
                    path: path.display().to_string(),
                    source,
                })?),
                false => LogFile::Later(path.clone()),
            };
            (Some(path), Some(file), true)
        }
        None => (None, None, false),
    };
    let made_at_start = default_file && verbose;
    let held = hold.then(|| Arc::new(Mutex::new(Backlog::default())));
    match handle {
        Some(f) => builder
            .with_ansi(false)
            .with_writer(FileWriter {
                file: Arc::new(Mutex::new(f)),
                held: held.clone(),
            })
            .init(),
        // Colour only for a person at a terminal who did not ask for none (NO_COLOR).
        None => builder
            .with_ansi(
                io::stderr().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            )
            .with_writer(io::stderr)
            .init(),
    }
    Ok(SINK.get_or_init(|| LogSink {
        path,
        default_file,
        made_at_start,
        held,
    }))
}

/// The log's file: open, or to be made at the first line (the default file of a run that
/// logs only warnings, which most runs never write).
enum LogFile {
    /// Open for appending.
    Open(File),
    /// Not made yet: made (0600) when the first line comes.
    Later(PathBuf),
}

impl LogFile {
    /// Appends `bytes`, making the file first when it is not there yet.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let LogFile::Later(path) = self {
            *self = LogFile::Open(open_private(path)?);
        }
        match self {
            LogFile::Open(f) => f.write_all(bytes),
            LogFile::Later(_) => Ok(()),
        }
    }
}

/// Writes log lines to the file and keeps a copy of the warnings and errors.
struct FileWriter {
    file: Arc<Mutex<LogFile>>,
    held: Option<Arc<Mutex<Backlog>>>,
}

impl<'a> MakeWriter<'a> for FileWriter {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> EventWriter {
        EventWriter {
            file: self.file.clone(),
            hold: None,
            buf: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> EventWriter {
        let mut w = self.make_writer();
        if *meta.level() <= tracing::Level::WARN {
            w.hold = self.held.clone();
        }
        w
    }
}

/// One event's output: written to the file as one write when the event is done.
struct EventWriter {
    file: Arc<Mutex<LogFile>>,
    hold: Option<Arc<Mutex<Backlog>>>,
    buf: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Ok(mut f) = self.file.lock() {
            let _ = f.append(&self.buf);
        }
        if let Some(held) = &self.hold {
            if let Ok(mut h) = held.lock() {
                if h.lines.len() < MAX_HELD {
                    let line = String::from_utf8_lossy(&self.buf).trim_end().to_owned();
                    h.lines.push_back(line);
                } else {
                    h.dropped += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_writer_writes_once_and_holds_warnings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let unused = dir.path().join("unused.log");
        drop(LogFile::Later(unused.clone()));
        assert!(!unused.exists(), "no line, no file");
        let file = Arc::new(Mutex::new(LogFile::Later(path.clone())));
        let held = Arc::new(Mutex::new(Backlog::default()));
        for i in 0..MAX_HELD + 2 {
            let mut w = EventWriter {
                file: file.clone(),
                hold: Some(held.clone()),
                buf: Vec::new(),
            };
            write!(w, "WARN line ").unwrap();
            writeln!(w, "{i}").unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), MAX_HELD + 2, "made at the first line");
        let h = held.lock().unwrap();
        assert_eq!((h.lines.len(), h.dropped), (MAX_HELD, 2));
        assert_eq!(h.lines[0], "WARN line 0");
    }
}
