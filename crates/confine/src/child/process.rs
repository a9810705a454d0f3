//! The agent's process: started by a process that shares the wrapper's memory until it
//! runs the agent ([`vfork`](crate::vfork)), and waited for through a pidfd.
//!
//! A `fork` of the wrapper copied the page tables of a process of several megabytes for a
//! child that threw them away at `exec`, while the wrapper waited for that `exec`; and every
//! page the wrapper wrote afterwards faulted once more.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// What the process runs, and how.
pub(super) struct Start<'a> {
    /// The executable, found.
    pub path: &'a Path,
    /// Its arguments, the first one (its name) included.
    pub argv: Vec<&'a OsStr>,
    /// Its whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its stdin and stdout piped to us, else ours.
    pub piped: bool,
    /// In a process group of its own.
    pub own_group: bool,
    /// The last steps before `exec`: async-signal-safe (see [`crate::vfork::run`]), their
    /// error an OS error (`last_os_error`: nothing to allocate or free).
    pub before_exec: Option<&'a dyn Fn() -> io::Result<()>>,
}

/// The running process.
#[derive(Debug)]
pub struct Process {
    pid: i32,
    ended: Ended,
    status: Option<ExitStatus>,
    /// Its stdin, when piped.
    pub stdin: Option<pipe::Sender>,
    /// Its stdout, when piped.
    pub stdout: Option<pipe::Receiver>,
}

/// How we learn that it ended.
#[derive(Debug)]
enum Ended {
    /// Its pidfd turns readable (Linux 5.3 and later).
    Pidfd(AsyncFd<OwnedFd>),
    /// Else, each SIGCHLD is a reason to look.
    Sigchld(tokio::signal::unix::Signal),
}

impl Process {
    /// Starts it. Call it on a runtime with I/O and signals enabled.
    pub(super) fn start(how: Start<'_>) -> io::Result<Process> {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command")
            })
        };
        let path = c(how.path.as_os_str())?;
        let argv = how
            .argv
            .iter()
            .map(|a| c(a))
            .collect::<io::Result<Vec<_>>>()?;
        let env = how
            .env
            .iter()
            .map(|(k, v)| c(&[k.as_os_str(), v.as_os_str()].join(OsStr::new("="))))
            .collect::<io::Result<Vec<_>>>()?;
        let argv_p = nul_terminated(&argv);
        let env_p = nul_terminated(&env);
        // (ours, the process's): its stdin's write end and its stdout's read end are ours.
        let pipes = match how.piped {
            true => {
                let (r_in, w_in) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
                let (r_out, w_out) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
                Some(((w_in, r_out), (r_in, w_out)))
            }
            false => None,
        };
        let theirs = pipes
            .as_ref()
            .map(|(_, (i, o))| (i.as_raw_fd(), o.as_raw_fd()));
        let error = AtomicI32::new(0);
        let mut child = || {
            // SAFETY: system calls only, on what was made above; no allocation.
            unsafe {
                crate::vfork::defaults_for_handled_signals();
                // Why it did not run the agent: whatever returns here.
                let failed = (|| -> io::Error {
                    if let Some((input, output)) = theirs {
                        if libc::dup2(input, 0) < 0 || libc::dup2(output, 1) < 0 {
                            return io::Error::last_os_error();
                        }
                    }
                    if how.own_group && libc::setpgid(0, 0) != 0 {
                        return io::Error::last_os_error();
                    }
                    if let Some(Err(e)) = how.before_exec.map(|step| step()) {
                        return e;
                    }
                    let none: libc::sigset_t = std::mem::zeroed();
                    libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                    libc::execve(path.as_ptr(), argv_p.as_ptr(), env_p.as_ptr());
                    io::Error::last_os_error()
                })();
                let code = failed.raw_os_error().unwrap_or(libc::EINVAL);
                error.store(code, Ordering::Relaxed);
                // Inside a PID namespace of the floor's, the wrapper's child is another
                // process: tell it.
                #[cfg(target_os = "linux")]
                crate::floor::pidns::exec_failed(code);
                127
            }
        };
        // SAFETY: the function above makes system calls only, and ends in `exec` or a
        // return (the process then exits).
        let pid = unsafe { crate::vfork::run(&mut child) }?;
        let (ours, _theirs) = pipes.unzip();
        let reap = |kill: bool| {
            let mut status = 0;
            // SAFETY: ends (when asked) and reaps our own child.
            unsafe {
                if kill {
                    libc::kill(pid, libc::SIGKILL);
                }
                libc::waitpid(pid, &mut status, 0);
            }
        };
        if let code @ 1.. = error.load(Ordering::Relaxed) {
            // It did not run the agent, and has exited.
            reap(false);
            return Err(io::Error::from_raw_os_error(code));
        }
        // The agent runs: should we fail to hold it, it is not left running unwatched.
        let held = (|| {
            let (stdin, stdout) = match ours {
                Some((w_in, r_out)) => (
                    Some(pipe::Sender::from_owned_fd(w_in)?),
                    Some(pipe::Receiver::from_owned_fd(r_out)?),
                ),
                None => (None, None),
            };
            Ok(Process {
                pid,
                ended: Ended::watch(pid)?,
                status: None,
                stdin,
                stdout,
            })
        })();
        if held.is_err() {
            reap(true);
        }
        held
    }

    /// Its pid.
    pub fn id(&self) -> i32 {
        self.pid
    }

    /// Waits for it to end, and reaps it. Cancel-safe: a call dropped before the end
    /// loses nothing.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            match &mut self.ended {
                Ended::Pidfd(fd) => fd.readable().await?.clear_ready(),
                Ended::Sigchld(signal) => {
                    signal.recv().await;
                }
            }
        }
    }

    /// Its status when it has ended (reaped then), else `None`.
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_some() {
            return Ok(self.status);
        }
        let mut status = 0;
        loop {
            // SAFETY: a non-blocking wait for our own child.
            match unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } {
                0 => return Ok(None),
                -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                -1 => return Err(io::Error::last_os_error()),
                _ => {
                    self.status = Some(ExitStatus::from_raw(status));
                    return Ok(self.status);
                }
            }
        }
    }
}

impl Ended {
    fn watch(pid: i32) -> io::Result<Ended> {
        // SAFETY: pidfd_open(2) of our own child; the descriptor returned is ours.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        match i32::try_from(fd) {
            Ok(fd) if fd >= 0 => {
                // SAFETY: a new descriptor, owned by nothing else; the `OwnedFd` keeps it
                // open as long as the `AsyncFd` holds it.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                let interest = tokio::io::Interest::READABLE;
                // SAFETY: as above.
                let fd = unsafe { AsyncFd::register_with_interest(fd, interest) };
                Ok(Ended::Pidfd(fd.map_err(|e| e.into_parts().1)?))
            }
            _ => Ok(Ended::Sigchld(tokio::signal::unix::signal(
                tokio::signal::unix::SignalKind::child(),
            )?)),
        }
    }
}

/// The pointers `execve` takes, ending in a null one.
fn nul_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn start(
        argv: &[&str],
        piped: bool,
        step: Option<&dyn Fn() -> io::Result<()>>,
    ) -> io::Result<Process> {
        let path = which::which(argv[0]).unwrap();
        Process::start(Start {
            path: &path,
            argv: argv.iter().map(OsStr::new).collect(),
            env: std::env::vars_os().collect(),
            piped,
            own_group: false,
            before_exec: step,
        })
    }

    #[test]
    fn a_piped_process_gets_our_bytes_and_its_status_comes_back() {
        runtime().block_on(async {
            let mut p = start(&["sh", "-c", "cat; exit 5"], true, None).unwrap();
            let mut input = p.stdin.take().unwrap();
            input.write_all(b"through the pipes").await.unwrap();
            drop(input);
            let mut out = String::new();
            p.stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .await
                .unwrap();
            assert_eq!(out, "through the pipes");
            assert_eq!(p.wait().await.unwrap().code(), Some(5));
            // Reaped once, asked again.
            assert_eq!(p.wait().await.unwrap().code(), Some(5));
        });
    }

    #[test]
    fn a_step_that_fails_before_exec_is_the_error_and_nothing_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let refuse = || Err(io::Error::from_raw_os_error(libc::EPERM));
        runtime().block_on(async {
            let e = start(&["sh", "-c", &script], false, Some(&refuse)).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        });
        assert!(!marker.exists());
        // The same command with no step runs.
        runtime().block_on(async {
            let mut p = start(&["sh", "-c", &script], false, None).unwrap();
            assert!(p.wait().await.unwrap().success());
        });
        assert!(marker.exists());
    }

    #[test]
    fn an_exec_that_fails_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("not-executable");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        runtime().block_on(async {
            let e = Process::start(Start {
                path: &plain,
                argv: vec![plain.as_os_str()],
                env: Vec::new(),
                piped: false,
                own_group: false,
                before_exec: None,
            })
            .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        });
    }

    #[test]
    fn without_a_pidfd_its_end_is_learnt_from_sigchld() {
        runtime().block_on(async {
            let mut p = start(&["sh", "-c", "sleep 0.2; exit 3"], false, None).unwrap();
            // As on a kernel without pidfd_open (before 5.3).
            let signal = tokio::signal::unix::SignalKind::child();
            p.ended = Ended::Sigchld(tokio::signal::unix::signal(signal).unwrap());
            let waited = tokio::time::timeout(std::time::Duration::from_secs(20), p.wait());
            let status = waited.await.expect("woken by SIGCHLD").unwrap();
            assert_eq!(status.code(), Some(3));
        });
    }

    #[test]
    fn a_process_killed_by_a_signal_says_which() {
        runtime().block_on(async {
            let mut p = start(&["sleep", "30"], false, None).unwrap();
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(p.id(), libc::SIGKILL) };
            assert_eq!(p.wait().await.unwrap().signal(), Some(libc::SIGKILL));
        });
    }
}
