//! The guardian: a tiny process forked at start-up that outlives a killed wrapper just
//! long enough to take the agent down with it.
//!
//! A wrapper killed with SIGKILL runs no code, so the agent would be orphaned (and
//! `PR_SET_PDEATHSIG` reaches only the direct child, not the agent's own children). The
//! guardian holds the read end of a pipe whose write end only the wrapper has: when the
//! wrapper dies, however it dies, the guardian reads EOF and signals the agent (its whole
//! group when it has one), SIGTERM first and SIGKILL after a grace period, then removes the
//! wrapper's private run directory. A wrapper that ends normally first tells the guardian to
//! stand down.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{fork, pipe2, ForkResult, Pid};

/// How long the agent gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// The wrapper's end of the guardian pipe.
pub struct Guardian {
    pipe: std::fs::File,
}

impl Guardian {
    /// Forks the guardian. Call it while the process is still single-threaded.
    pub fn spawn() -> std::io::Result<Guardian> {
        let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
        // SAFETY: called before any thread is started (see `run`), so the child may run
        // arbitrary code; it never returns into the caller.
        match unsafe { fork() }? {
            ForkResult::Child => {
                drop(write);
                guard(read)
            }
            ForkResult::Parent { .. } => {
                drop(read);
                Ok(Guardian {
                    pipe: std::fs::File::from(write),
                })
            }
        }
    }

    /// The pipe's file descriptor, for the agent to register itself before it runs (see
    /// [`announce`]); it is close-on-exec, so the agent's program never holds it.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.pipe.as_raw_fd()
    }

    /// Watches `target`: a pid, or minus a process group id.
    pub fn watch(&mut self, target: i32) {
        let _ = writeln!(self.pipe, "watch {target}");
    }

    /// Removes `dir` (the run directory) if the wrapper dies without doing it. The path is
    /// sent as one line, so it must not contain a newline (ours never does).
    pub fn clean_up(&mut self, dir: &std::path::Path) {
        if let Some(d) = dir.to_str().filter(|d| !d.contains('\n')) {
            let _ = writeln!(self.pipe, "rundir {d}");
        }
    }

    /// The agent ended normally: the guardian exits without touching anything.
    pub fn release(mut self) {
        let _ = writeln!(self.pipe, "release");
    }
}

fn guard(read: OwnedFd) -> ! {
    // Leave the terminal's session so that Ctrl-C or a hangup cannot take us out, and
    // hold no stdio open: a reader of the wrapper's output must see EOF when it exits.
    let _ = nix::unistd::setsid();
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..=2 {
            let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
        }
    }
    let keep = read.as_raw_fd();
    for fd in 3..1024 {
        if fd != keep {
            let _ = nix::unistd::close(fd);
        }
    }
    let mut pipe = std::fs::File::from(read);
    let mut target = 0i32;
    let mut clean_up: Option<std::path::PathBuf> = None;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            if line == "release" {
                // SAFETY: _exit only ends the process; no destructors or atexit handlers of the
                // forked copy may run.
                unsafe { libc::_exit(0) }
            }
            if let Some(t) = line.strip_prefix("watch ").and_then(|t| t.parse().ok()) {
                target = t;
            }
            if let Some(dir) = line.strip_prefix("rundir ") {
                clean_up = Some(dir.into());
            }
        }
    }
    if target != 0 {
        take_down(target);
    }
    // The run directory (control socket, generated settings) of a wrapper that could not
    // remove it itself.
    if let Some(dir) = clean_up {
        let _ = std::fs::remove_dir_all(dir);
    }
    // SAFETY: _exit only ends the process; no destructors or atexit handlers of the
    // forked copy may run.
    unsafe { libc::_exit(0) }
}

fn take_down(target: i32) {
    let to = Pid::from_raw(target);
    if kill(to, Signal::SIGTERM).is_err() {
        return;
    }
    let until = Instant::now() + GRACE;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
        if kill(to, None).is_err() {
            return;
        }
    }
    let _ = kill(to, Signal::SIGKILL);
}

/// Registers the calling process (or its group, when `group` is set) with the guardian on
/// `fd`. Runs in the forked agent before `exec`, so the agent is watched before it can do
/// anything, whenever the wrapper dies; it is async-signal-safe (no allocation, no locks).
pub fn announce(fd: std::os::fd::RawFd, group: bool) {
    // SAFETY: getpid and write are async-signal-safe; `line` lives on this stack.
    let pid = unsafe { libc::getpid() };
    let mut line = [0u8; 32];
    let mut n = 0;
    for b in b"watch " {
        line[n] = *b;
        n += 1;
    }
    if group {
        line[n] = b'-';
        n += 1;
    }
    let mut digits = [0u8; 12];
    let mut d = 0;
    let mut v = pid.unsigned_abs();
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        line[n] = digits[d];
        n += 1;
    }
    line[n] = b'\n';
    n += 1;
    // SAFETY: `line[..n]` is initialised; a failed write only loses the registration.
    unsafe {
        libc::write(fd, line.as_ptr().cast(), n);
    }
}
