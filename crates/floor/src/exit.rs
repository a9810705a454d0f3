//! Every exit code ahp-wrap exits with, in one type, and the one place that turns it into
//! the process's exit status; and [`Failure`], the error a command ends with, which carries
//! its exit code and is printed once, by `main`, with its cause chain.
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
    /// Success: exit code 0.
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

/// Why a command failed, and the code it exits with. A command returns it instead of
/// printing: `main` prints `ahp-wrap: <why>` once and exits with [`Failure::exit`].
///
/// A typed error becomes one with `?` (exit [`Exit::Error`], the message with its cause
/// chain, as [`crate::error_chain`] writes it); text with [`OrExit::or_exit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The code the process exits with.
    pub exit: Exit,
    /// The message `main` prints after `ahp-wrap: ` (without it, no trailing newline).
    pub why: String,
}

impl Failure {
    /// A failure exiting with `exit`, its message `why` as displayed.
    pub fn new(exit: Exit, why: impl std::fmt::Display) -> Failure {
        Failure {
            exit,
            why: why.to_string(),
        }
    }

    /// The same failure, ending with `exit` instead.
    pub fn exiting(self, exit: Exit) -> Failure {
        Failure { exit, ..self }
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure::new(Exit::Error, crate::error_chain(&e))
    }
}

/// Turns an error that is only text into a [`Failure`] with its exit code.
pub trait OrExit<T> {
    /// The error, as displayed, becomes the message of a failure that exits with `exit`.
    fn or_exit(self, exit: Exit) -> Result<T, Failure>;
}

impl<T, E: std::fmt::Display> OrExit<T> for Result<T, E> {
    fn or_exit(self, exit: Exit) -> Result<T, Failure> {
        self.map_err(|e| Failure::new(exit, e))
    }
}

/// What a command ends with: its exit code, or why it failed.
pub type CommandResult = Result<Exit, Failure>;

/// Prints a failure the one way (`ahp-wrap: why` on stderr) and gives its exit code.
pub fn report(outcome: CommandResult) -> Exit {
    outcome.unwrap_or_else(|f| {
        eprintln!("ahp-wrap: {}", f.why);
        f.exit
    })
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
    fn a_failure_carries_its_exit_and_its_whole_cause_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot load the policy")]
        struct Outer(#[source] std::io::Error);
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let f = Failure::from(Outer(io));
        assert_eq!(f.exit, Exit::Error);
        assert_eq!(f.why, "cannot load the policy: no such file");
        let f = f.exiting(Exit::Problem);
        assert_eq!(
            (f.exit, f.why.as_str()),
            (Exit::Problem, "cannot load the policy: no such file")
        );
        let text: Result<(), &str> = Err("bad --listen");
        assert_eq!(
            text.or_exit(Exit::Wrapper),
            Err(Failure::new(Exit::Wrapper, "bad --listen"))
        );
        assert_eq!(report(Ok(Exit::Status(3))), Exit::Status(3));
        assert_eq!(report(Err(Failure::new(Exit::NoHooks, "x"))), Exit::NoHooks);
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
