//! Where our log goes: stderr in CI, a file while the agent owns the terminal (with the
//! warnings held back and shown after the agent's screen is gone).
//!
//! A full-screen agent (Claude Code, Codex, Gemini) draws on the terminal and reads what the
//! person types there. A line of ours written in the middle of that lands in its interface
//! and mixes with the person's typing. So while the agent owns a terminal (our stdin or
//! stdout is one) nothing of ours is written to it: the log goes to `--log-file`, by default
//! a file in the user's state directory named before the agent starts, and the warnings
//! and errors are also kept (a bounded number) to be printed at exit, after the summary.
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

/// A fresh log file name in the state directory, created private (0700 dir, 0600 file).
fn default_log_file() -> Result<(PathBuf, File), LogError> {
    let dir = state_dir().ok_or(LogError::NoStateDir)?;
    let open_err = |path: &Path, source| LogError::Open {
        path: path.display().to_string(),
        source,
    };
    make_private_dir(&dir).map_err(|e| open_err(&dir, e))?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let path = dir.join(format!("run-{stamp}-{}.log", std::process::id()));
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| open_err(&path, e))?;
    Ok((path, file))
}

/// What the log set up, for the run to report at start and at exit.
#[derive(Debug, Default)]
pub struct LogSink {
    /// The file the log goes to, if not stderr.
    pub path: Option<PathBuf>,
    /// Whether the file was chosen by us (and may be removed at exit when empty).
    pub default_file: bool,
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

    /// Removes our default log file if nothing was written to it.
    pub(crate) fn remove_if_empty(&self) {
        if let (true, Some(path)) = (self.default_file, &self.path) {
            if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
                let _ = std::fs::remove_file(path);
            }
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
            (Some(path.to_owned()), Some(f), false)
        }
        None if hold => {
            let (path, f) = default_log_file()?;
            (Some(path), Some(f), true)
        }
        None => (None, None, false),
    };
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
        held,
    }))
}

/// Writes log lines to the file and keeps a copy of the warnings and errors.
struct FileWriter {
    file: Arc<Mutex<File>>,
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
    file: Arc<Mutex<File>>,
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
            let _ = f.write_all(&self.buf);
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
        let file = Arc::new(Mutex::new(File::create(&path).unwrap()));
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
        assert_eq!(text.lines().count(), MAX_HELD + 2);
        let h = held.lock().unwrap();
        assert_eq!((h.lines.len(), h.dropped), (MAX_HELD, 2));
        assert_eq!(h.lines[0], "WARN line 0");
    }
}
