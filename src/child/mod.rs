//! The agent as our child: where it is found, which process group it lives in, how its
//! end becomes our exit code.

pub mod cgroup;
pub mod guardian;
pub mod procfs;
pub mod signals;
pub mod tree;

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

use crate::frameworks::AgentCommand;

/// Exit code when the agent program does not exist (as a shell says it).
pub const EXIT_NOT_FOUND: u8 = 127;
/// Exit code when the agent program cannot be executed.
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
/// Base of the exit code for death by signal N (128 + N).
pub const EXIT_SIGNAL_BASE: u8 = 128;

/// Where the agent lives among process groups. This is the one place that decides it.
///
/// - On a terminal, in its foreground group: the agent stays in *our* group, so it keeps
///   the terminal (reads, raw mode, resize) and the terminal delivers Ctrl-C, Ctrl-Z and
///   SIGWINCH to it directly. We must not deliver those a second time.
/// - Otherwise (pipes, CI, a background job): the agent gets its own group, and every
///   signal we receive is forwarded to that whole group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    Foreground,
    OwnGroup,
}

impl GroupPolicy {
    /// Decides from the state of this process.
    pub fn detect() -> GroupPolicy {
        let Ok(tty) = std::fs::File::open("/dev/tty") else {
            return GroupPolicy::OwnGroup;
        };
        match nix::unistd::tcgetpgrp(&tty) {
            Ok(fg) if fg == nix::unistd::getpgrp() => GroupPolicy::Foreground,
            _ => GroupPolicy::OwnGroup,
        }
    }
}

/// Why the agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{0}: cannot execute: {1}")]
    NotExecutable(String, #[source] std::io::Error),
}

impl SpawnError {
    /// The exit code a shell would give.
    pub fn exit_code(&self) -> u8 {
        match self {
            SpawnError::NotFound(_) => EXIT_NOT_FOUND,
            SpawnError::NotExecutable(..) => EXIT_NOT_EXECUTABLE,
        }
    }
}

/// The running agent.
pub struct Agent {
    pub child: tokio::process::Child,
    pub pid: i32,
    pub policy: GroupPolicy,
}

impl Agent {
    /// What signals for the agent are sent to: its pid, or its whole group.
    pub fn signal_target(&self) -> i32 {
        match self.policy {
            GroupPolicy::Foreground => self.pid,
            GroupPolicy::OwnGroup => -self.pid,
        }
    }
}

/// Finds the agent program as a shell would: a name with a slash is a path, anything
/// else is looked up on `PATH`.
pub fn resolve(program: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf, SpawnError> {
    let shown = program.to_string_lossy().into_owned();
    if program.as_encoded_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return match p.metadata() {
            Ok(_) => Ok(p),
            Err(_) => Err(SpawnError::NotFound(shown)),
        };
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    which::which_in(program, path_var, cwd).map_err(|_| SpawnError::NotFound(shown))
}

/// Starts the agent with our stdio (inherited, so pass-through is byte-exact and the
/// terminal stays the agent's) and the extra environment. `guardian` is the guardian's
/// pipe: the agent registers itself there before it runs; and it joins `cgroup` (a
/// `cgroup.procs` path) before it runs, when given.
pub fn spawn(
    cmd: &AgentCommand,
    policy: GroupPolicy,
    remove_env: &[&str],
    guardian_fd: Option<std::os::fd::RawFd>,
    cgroup: Option<&std::ffi::CStr>,
) -> Result<Agent, SpawnError> {
    let path_var = cmd
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"));
    let path = resolve(&cmd.program, path_var.as_deref())?;
    let shown = cmd.program.to_string_lossy().into_owned();
    let mut c = tokio::process::Command::new(&path);
    c.arg0(&cmd.program).args(&cmd.args);
    for key in remove_env {
        c.env_remove(key);
    }
    for (k, v) in &cmd.env {
        c.env(k, v);
    }
    if policy == GroupPolicy::OwnGroup {
        c.process_group(0);
    }
    if guardian_fd.is_some() || cgroup.is_some() {
        let group = policy == GroupPolicy::OwnGroup;
        let procs = cgroup.map(std::ffi::CStr::to_owned);
        // SAFETY: `join` and `announce` are async-signal-safe, as a pre-exec hook must be.
        unsafe {
            c.pre_exec(move || {
                // Into the cgroup first: whatever the agent starts is born inside it.
                if let Some(procs) = &procs {
                    cgroup::join(procs);
                }
                if let Some(fd) = guardian_fd {
                    guardian::announce(fd, group);
                }
                Ok(())
            });
        }
    }
    let child = c.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpawnError::NotFound(shown.clone()),
        _ => SpawnError::NotExecutable(shown.clone(), e),
    })?;
    let pid = child.id().expect("a just-spawned child has a pid") as i32;
    Ok(Agent { child, pid, policy })
}

/// The agent's end as our exit code: its own code, or 128 + N for death by signal N.
pub fn exit_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        code as u8
    } else if let Some(sig) = status.signal() {
        EXIT_SIGNAL_BASE.saturating_add(sig as u8)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_map_codes_and_signals() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
        // A core dump flag does not change the signal number.
        assert_eq!(exit_code(ExitStatus::from_raw(11 | 0x80)), 139);
    }

    #[test]
    fn resolve_follows_the_shell_rules() {
        assert!(resolve(OsStr::new("sh"), Some(OsStr::new("/bin:/usr/bin"))).is_ok());
        assert!(matches!(
            resolve(OsStr::new("no-such-agent-xyz"), Some(OsStr::new("/bin"))),
            Err(SpawnError::NotFound(_))
        ));
        assert!(matches!(
            resolve(OsStr::new("./no/such/agent"), None),
            Err(SpawnError::NotFound(_))
        ));
    }
}
