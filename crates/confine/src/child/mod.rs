//! The agent as our child: where it is found, which process group it lives in, how its
//! end becomes our exit code.
//!
//! Owns: spawning (options and a stdio plan), process groups, the typed child id, signals,
//! the guardian, the whole process tree and /proc. Must not touch: events or decisions (it
//! knows nothing of AHP), or what an interceptor does with the agent's stdio.

pub use ahp_wrap_floor::agent::{AgentCommand, AgentFiles};
pub mod guardian;
mod process;
pub use process::Process;
// The process tree, followed with safe calls (`crates/process`), under the names it had here.
pub use ahp_wrap_process::signals::GroupPolicy;
pub use ahp_wrap_process::{cgroup, fds, procfs, signals, sockets, tree};

use std::ffi::{CStr, OsStr, OsString};
use std::os::fd::RawFd;
use std::path::PathBuf;

use ahp_wrap_floor::exit::Exit;

/// Why the agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The program (as given) is neither an existing path nor found on `PATH` (exit 127).
    #[error("{0}: command not found")]
    NotFound(String),
    /// The program (as given) exists but could not be executed, with the OS error (exit 126).
    #[error("{0}: cannot execute: {1}")]
    NotExecutable(String, #[source] std::io::Error),
}

impl SpawnError {
    /// The exit code a shell would give.
    pub fn exit(&self) -> Exit {
        match self {
            SpawnError::NotFound(_) => Exit::NotFound,
            SpawnError::NotExecutable(..) => Exit::NotExecutable,
        }
    }
}

/// What signals for the agent go to, and what the guardian watches: the agent alone, or
/// its whole process group (whose id is the agent's pid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildId {
    /// The agent's pid alone (it shares our group: [`GroupPolicy::Foreground`]).
    Process(i32),
    /// The agent's process group, whose id is the agent's pid ([`GroupPolicy::OwnGroup`]).
    Group(i32),
}

impl ChildId {
    /// The agent's pid either way.
    pub fn pid(self) -> i32 {
        match self {
            ChildId::Process(pid) | ChildId::Group(pid) => pid,
        }
    }

    /// As `kill(2)` takes it: a pid, or minus a process group id.
    pub fn kill_target(self) -> i32 {
        match self {
            ChildId::Process(pid) => pid,
            ChildId::Group(pgid) => -pgid,
        }
    }
}

/// How the agent's stdin and stdout are wired (stderr is always inherited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stdio {
    /// Ours, inherited: pass-through is byte-exact and the terminal stays the agent's.
    #[default]
    Inherit,
    /// Pipes to us, for an interceptor that sits in the agent's stream (a proxy).
    Piped,
}

/// A last step the agent's process takes on itself before `exec` (after joining its cgroup
/// and announcing itself to the guardian): async-signal-safe, as a pre-exec step must be.
pub type Confine = std::sync::Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// Everything [`spawn`] needs besides the command.
#[derive(Clone)]
pub struct SpawnOptions<'a> {
    /// Whether the agent stays in our process group or leads its own.
    pub group: GroupPolicy,
    /// How the agent's stdin and stdout are wired.
    pub stdio: Stdio,
    /// Our environment variables the agent must not inherit.
    pub remove_env: &'a [&'a str],
    /// The guardian's pipe: the agent registers itself there before it runs.
    pub guardian_fd: Option<RawFd>,
    /// A `cgroup.procs` path the agent joins before it runs.
    pub cgroup: Option<&'a CStr>,
    /// The confinement the agent applies to itself last (the floor).
    pub confine: Option<Confine>,
    /// The confinement puts the agent in a PID namespace of its own: the process started is
    /// its outer helper, and the agent is that process's grandchild ([`crate::floor::pidns`]).
    pub own_pids: bool,
}

/// The running agent.
pub struct Agent {
    /// The process itself: to wait for, and its stdin and stdout when they are piped.
    pub process: Process,
    /// Where signals for the agent go: its pid, or its group when it leads one.
    pub id: ChildId,
    /// The agent's own process: the one started, or in a PID namespace of its own the one
    /// inside it that runs the agent's program (as this process's namespace numbers it).
    pub pid: i32,
}

/// What the Rust runtime's start-up does, for an executable that starts at C's `main` (the
/// hook, where every microsecond counts): descriptors 0 to 2 open (else a socket could take
/// one, and an answer meant for stdout would go into it; `/dev/null` takes a closed one, and
/// the process aborts when it cannot), and a write to a closed pipe an error rather than
/// death by `SIGPIPE`.
pub fn runtime_start_up() {
    // SAFETY: poll of three descriptors, then open(2) and signal(2), as the runtime does.
    unsafe {
        let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        if libc::poll(fds.as_mut_ptr(), 3, 0) >= 0 {
            for fd in &fds {
                if fd.revents & libc::POLLNVAL != 0
                    && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) != fd.fd
                {
                    libc::abort();
                }
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// The file the kernel executed to start this process (`AT_EXECFN`: the path given to
/// `execve`, whatever `argv[0]` says), where the kernel says it.
pub fn executed_file() -> Option<&'static std::ffi::CStr> {
    // SAFETY: getauxval only reads the process's auxiliary vector.
    let execfn = unsafe { libc::getauxval(libc::AT_EXECFN) } as *const libc::c_char;
    if execfn.is_null() {
        return None;
    }
    // SAFETY: AT_EXECFN points at the NUL-terminated file name passed to execve, in memory
    // that lives as long as the process.
    Some(unsafe { std::ffi::CStr::from_ptr(execfn) })
}

/// Moves the calling process into the group whose `cgroup.procs` is `procs` ("0" means
/// the writer). Async-signal-safe (open, write, close), for a pre-exec hook; a failure
/// leaves the process where it was, which [`cgroup::Cgroup::contains`] then shows.
fn join_cgroup(procs: &std::ffi::CStr) {
    // SAFETY: plain syscalls on a NUL-terminated path and a static buffer.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

/// Makes the process `cmd` starts end with this one: it is killed (`SIGKILL`) when this
/// process exits, and never starts if this process is already gone by then. For a helper
/// run that must not outlive the process that started it (a fleet worker's runs).
pub fn dies_with_us(cmd: &mut tokio::process::Command) {
    let parent = std::process::id() as i32;
    // SAFETY: only async-signal-safe calls (prctl, getppid) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the process that started it is gone"));
            }
            Ok(())
        });
    }
}

/// Finds the agent program as a shell would: a name with a slash is a path, anything
/// else is looked up on `PATH`.
pub(crate) fn resolve(program: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf, SpawnError> {
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

/// Makes the calling thread run only when a processor would otherwise idle
/// (`SCHED_IDLE`): for work that may help later but must not slow the run's start.
pub fn idle_priority_for_this_thread() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread (0) with a parameter we own.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

/// Starts the agent with the extra environment, wired as `opts` says.
pub fn spawn(cmd: &AgentCommand, opts: SpawnOptions<'_>) -> Result<Agent, SpawnError> {
    let path_var = cmd
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"));
    let path = resolve(&cmd.program, path_var.as_deref())?;
    let shown = cmd.program.to_string_lossy().into_owned();
    // Ours, less what the agent must not inherit, and the command's own (the last wins).
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| {
            !opts.remove_env.iter().any(|r| k == r)
                && !cmd.remove_env.iter().any(|r| k == r.as_str())
        })
        .collect();
    for (k, v) in &cmd.env {
        env.retain(|(old, _)| old != k);
        env.push((k.clone(), v.clone()));
    }

    let own_group = opts.group == GroupPolicy::OwnGroup;
    let (guardian_fd, procs) = (opts.guardian_fd, opts.cgroup);
    let confine = opts.confine.as_deref();
    let before_exec = || {
        // Into the cgroup first: whatever the agent starts is born inside it.
        if let Some(procs) = procs {
            join_cgroup(procs);
        }
        if let Some(fd) = guardian_fd {
            guardian::announce(fd, own_group);
        }
        // Last: the confinement may take away what the steps above need.
        match confine {
            Some(confine) => confine(),
            None => Ok(()),
        }
    };
    let process = Process::start(process::Start {
        path: &path,
        argv: std::iter::once(cmd.program.as_os_str())
            .chain(cmd.args.iter().map(OsString::as_os_str))
            .collect(),
        env,
        piped: opts.stdio == Stdio::Piped,
        own_group,
        before_exec: Some(&before_exec),
    })
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpawnError::NotFound(shown.clone()),
        _ => SpawnError::NotExecutable(shown.clone(), e),
    })?;
    let started = process.id();
    let pid = match opts.own_pids {
        true => inside(started).unwrap_or(started),
        false => started,
    };
    // Signals go to the agent itself (its helpers take them and let them be), or to the
    // group all of them are in.
    let id = if own_group {
        ChildId::Group(started)
    } else {
        ChildId::Process(pid)
    };
    Ok(Agent { process, id, pid })
}

/// The agent inside the PID namespace whose outer helper is `outer`: its grandchild (the
/// namespace's init, then the agent, which the init starts first). The outer helper's start
/// returned once the agent had reached its `exec`: it is there, or already gone (then the
/// helper stands for it).
fn inside(outer: i32) -> Option<i32> {
    let init = procfs::children(outer).and_then(|c| c.first().copied());
    let agent = init.and_then(|i| procfs::children(i)?.first().copied());
    if agent.is_none() {
        tracing::debug!("the agent's process in its PID namespace is gone already");
    }
    agent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_id_is_a_pid_or_a_group_as_kill_takes_it() {
        assert_eq!(ChildId::Process(42).kill_target(), 42);
        assert_eq!(ChildId::Group(42).kill_target(), -42);
        assert_eq!(ChildId::Group(42).pid(), 42);
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
