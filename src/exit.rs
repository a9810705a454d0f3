//! Every exit code ahp-wrap exits with, in one type, and the one place that turns it into
//! the process's exit status.
//!
//! Owns: the numbers. Must not touch: deciding *when* to exit (the run and the subcommands
//! do), or hook processes' codes (each framework's contract renders those).

use std::io::Write;

/// How ahp-wrap ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A code reported as it is: the agent's own (128 + N for death by signal N), or the
    /// outcome of a check (`audit verify`: 0 to 4).
    Status(u8),
    /// A check found a problem (`policy check`): 1.
    Problem,
    /// A subcommand cannot run (bad arguments, an unreadable file): 2.
    Error,
    /// An HCP task was refused by the worker's L3 gate: 121.
    TaskRefused,
    /// `--require-hooks` and the agent never called a hook: 122.
    NoHooks,
    /// An HCP task was aborted: 123.
    TaskAborted,
    /// No answer in the time given (`task submit --timeout`), as `timeout` says it: 124.
    TimedOut,
    /// The wrapper itself failed or refused to run, as `env` and `timeout` say it: 125.
    Wrapper,
    /// The agent program cannot be executed, as a shell says it: 126.
    NotExecutable,
    /// The agent program does not exist, as a shell says it: 127.
    NotFound,
}

/// Base of the exit code for death by signal N (128 + N).
pub const SIGNAL_BASE: u8 = 128;

impl Exit {
    pub const OK: Exit = Exit::Status(0);

    /// The number.
    pub fn code(self) -> u8 {
        match self {
            Exit::Status(code) => code,
            Exit::Problem => 1,
            Exit::Error => 2,
            Exit::TaskRefused => 121,
            Exit::NoHooks => 122,
            Exit::TaskAborted => 123,
            Exit::TimedOut => 124,
            Exit::Wrapper => 125,
            Exit::NotExecutable => 126,
            Exit::NotFound => 127,
        }
    }

    /// The agent's end: its own code, or 128 + N for death by signal N.
    pub fn of_status(status: std::process::ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        if let Some(code) = status.code() {
            Exit::Status(code as u8)
        } else if let Some(sig) = status.signal() {
            Exit::Status(SIGNAL_BASE.saturating_add(sig as u8))
        } else {
            Exit::Status(1)
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> std::process::ExitCode {
        std::process::ExitCode::from(exit.code())
    }
}

/// Writes `text` to stdout. A reader that went away (`ahp-wrap audit summary | head`) is
/// not our failure: nothing panics, and the rest is dropped.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    #[test]
    fn codes_are_the_documented_numbers() {
        let all = [
            (Exit::OK, 0),
            (Exit::Status(3), 3),
            (Exit::Problem, 1),
            (Exit::Error, 2),
            (Exit::TaskRefused, 121),
            (Exit::NoHooks, 122),
            (Exit::TaskAborted, 123),
            (Exit::TimedOut, 124),
            (Exit::Wrapper, 125),
            (Exit::NotExecutable, 126),
            (Exit::NotFound, 127),
        ];
        for (exit, code) in all {
            assert_eq!(exit.code(), code, "{exit:?}");
        }
    }

    #[test]
    fn the_agents_end_maps_codes_and_signals() {
        let code = |raw| Exit::of_status(ExitStatus::from_raw(raw)).code();
        assert_eq!(code(0), 0);
        assert_eq!(code(3 << 8), 3);
        assert_eq!(code(255 << 8), 255);
        assert_eq!(code(9), 137);
        assert_eq!(code(15), 143);
        // A core dump flag does not change the signal number.
        assert_eq!(code(11 | 0x80), 139);
    }
}
