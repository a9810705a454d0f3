//! The agent's tree in a PID namespace of its own, with a `/proc` of its own: it sees its own
//! processes only, so no other process of the person's (a tunnel's `--token` on its command
//! line, an editor's environment) can be read from it.
//!
//! A process enters a new PID namespace only by being created in it, and the first one there
//! is its init (signals with no handler never reach it; when it exits, every process of the
//! namespace is killed). So the agent's process, once in its user and mount namespaces,
//! unshares a PID namespace and makes three processes of itself:
//!
//! ```text
//! wrapper ─▶ agent's process: `ahp-wrap-hook pid-outer` (outside the namespace; the wrapper's
//!            │                 child, whose exit is the agent's own, signal included)
//!            └▶ `ahp-wrap-hook pid-init` (PID 1: mounts the new /proc first, reaps orphans,
//!               │                        passes the agent's status up, ends the leftovers)
//!               └▶ the agent (PID 2), which goes on to Landlock, seccomp and `exec`
//! ```
//!
//! The two helpers are the small executable, which holds nothing of the run's: they are not
//! in the tree's Landlock domain, so the tree can neither signal nor trace them. Signals for
//! the agent are sent to it directly (or to its process group, which all three are in): the
//! helpers take them and let them be.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use super::sys::fail;
use super::FloorError;

/// `ahp-wrap-hook pid-outer PID`: the agent's process, outside the namespace.
pub const OUTER_ARG: &str = "pid-outer";
/// `ahp-wrap-hook pid-init`: the namespace's first process.
pub const INIT_ARG: &str = "pid-init";

/// The descriptor the helpers find the agent's status on (written by the init, read by the
/// outer one).
const STATUS_FD: i32 = 3;

/// In the agent's process inside the namespace (its own copy of memory, after the fork), the
/// readiness pipe's write end: an `exec` that fails says its error there.
static READY: AtomicI32 = AtomicI32::new(-1);

/// Says why the agent's `exec` failed to the agent's process outside the namespace, when this
/// process is the agent's inside one (else nothing).
///
/// # Safety
/// A system call; for the failure path of a pre-exec step.
pub(crate) unsafe fn exec_failed(errno: i32) {
    let fd = READY.load(Ordering::Relaxed);
    if fd >= 0 {
        let bytes = errno.to_ne_bytes();
        libc::write(fd, bytes.as_ptr().cast(), 4);
    }
}

/// How long the init lets what the agent left behind end after it (`SIGTERM`), before it
/// exits and the kernel kills the rest.
const GRACE_MS: u64 = 1000;

/// What the agent's process needs to make the PID namespace: the helpers' executable and
/// their arguments, made before the fork.
#[derive(Debug)]
pub(super) struct PidNs {
    helper: CString,
    outer: CString,
    init: CString,
}

impl PidNs {
    pub(super) fn new(helper: &Path) -> Result<PidNs, FloorError> {
        let c = |s: &[u8]| {
            CString::new(s).map_err(|_| FloorError::Prepare {
                what: "a path with a NUL byte:",
                path: helper.display().to_string(),
                source: io::ErrorKind::InvalidInput.into(),
            })
        };
        Ok(PidNs {
            helper: c(helper.as_os_str().as_bytes())?,
            outer: c(OUTER_ARG.as_bytes())?,
            init: c(INIT_ARG.as_bytes())?,
        })
    }

    /// Makes the namespace (see the module's doc). Returns only in the agent's process (with
    /// what tells the agent's process outside that it failed); the calling process waits
    /// until the agent has reached its `exec` (as the wrapper waits for its own child's), then
    /// becomes the outer helper; its first child is the init.
    ///
    /// # Safety
    /// For a pre-exec step, after the user and mount namespaces are entered and before
    /// Landlock (which refuses the mount of `/proc`): raw system calls, no allocation.
    pub(super) unsafe fn enter(&self) -> io::Result<Entered> {
        if libc::unshare(libc::CLONE_NEWPID) != 0 {
            fail(b"ahp-wrap: floor: cannot create a PID namespace\n")?;
        }
        // The agent's status (init to outer), and its readiness: closed by its `exec` (or
        // its end), or given its error first.
        let (mut status, mut ready) = ([0i32; 2], [0i32; 2]);
        if libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC) != 0
        {
            fail(b"ahp-wrap: floor: cannot make the pipes of the PID namespace\n")?;
        }
        let [read, write] = status;
        let [ready_read, ready_write] = ready;
        // A fork without the C library's fork handlers (other threads of the wrapper may hold
        // its locks): the child has a copy of this process.
        let init = fork();
        if init < 0 {
            fail(b"ahp-wrap: floor: cannot start the PID namespace's init\n")?;
        }
        if init == 0 {
            // PID 1: the namespace's /proc, then the agent, then the init's own program.
            libc::close(read);
            libc::close(ready_read);
            mount_proc();
            let agent = fork();
            if agent == 0 {
                libc::close(write);
                READY.store(ready_write, Ordering::Relaxed);
                return Ok(Entered { ready: ready_write });
            }
            if agent < 0 || !onto(write, STATUS_FD) {
                libc::_exit(127);
            }
            let argv = [self.helper.as_ptr(), self.init.as_ptr(), std::ptr::null()];
            exec(&self.helper, &argv);
            libc::_exit(127);
        }
        libc::close(write);
        libc::close(ready_write);
        // Until the agent's `exec` (every write end closed), or its error.
        let mut errno = [0u8; 4];
        let n = loop {
            let n = libc::read(ready_read, errno.as_mut_ptr().cast(), 4);
            if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break n;
            }
        };
        libc::close(ready_read);
        if n == 4 {
            libc::kill(init, libc::SIGKILL);
            let mut ignored = 0;
            libc::waitpid(init, &mut ignored, 0);
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
        }
        if !onto(read, STATUS_FD) {
            libc::kill(init, libc::SIGKILL);
            fail(b"ahp-wrap: floor: cannot hand the agent's status on\n")?;
        }
        let mut digits = [0u8; 16];
        let pid = decimal(init, &mut digits);
        let argv = [
            self.helper.as_ptr(),
            self.outer.as_ptr(),
            pid.as_ptr().cast(),
            std::ptr::null(),
        ];
        exec(&self.helper, &argv);
        libc::kill(init, libc::SIGKILL);
        fail(b"ahp-wrap: floor: cannot run the PID namespace's helper (ahp-wrap-hook)\n")?;
        Err(io::Error::from_raw_os_error(libc::ENOEXEC))
    }
}

/// The agent's process inside the PID namespace, on its way to `exec`.
pub(super) struct Entered {
    /// The write end of the readiness pipe (closed by the agent's `exec`).
    ready: i32,
}

impl Entered {
    /// Tells the agent's process outside that this one failed, with `e`: it ends with it.
    ///
    /// # Safety
    /// A system call; no allocation.
    pub(super) unsafe fn failed(&self, e: &io::Error) {
        let errno = e.raw_os_error().unwrap_or(libc::EINVAL).to_ne_bytes();
        libc::write(self.ready, errno.as_ptr().cast(), 4);
    }
}

/// `fd` as `to`, kept across `exec` (`dup2` onto itself would keep its close-on-exec flag).
///
/// # Safety
/// System calls only.
unsafe fn onto(fd: i32, to: i32) -> bool {
    if fd == to {
        return libc::fcntl(fd, libc::F_SETFD, 0) == 0;
    }
    libc::dup2(fd, to) == to
}

/// `fork(2)` as the kernel does it (`clone` with `SIGCHLD`), without the C library's handlers.
///
/// # Safety
/// The child must make system calls only until it `exec`s or exits.
unsafe fn fork() -> i32 {
    libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) as i32
}

/// Mounts a `/proc` of the namespace the caller is the first process of. Where the kernel
/// refuses it (a `/proc` partly covered, as in a container), the old one stays: the agent's
/// own entries are still there, only the other processes are not hidden. The run reads
/// ahead from its mounts whether it will be refused, and says so (the wrapper's
/// `run/floor/container.rs`).
///
/// # Safety
/// A system call; no allocation.
unsafe fn mount_proc() {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let _ = libc::mount(
        c"proc".as_ptr(),
        c"/proc".as_ptr(),
        c"proc".as_ptr(),
        flags,
        std::ptr::null(),
    );
}

/// `execve` with an empty environment and the signal mask cleared.
///
/// # Safety
/// `argv` ends with a null pointer and holds NUL-terminated strings.
unsafe fn exec(path: &CString, argv: &[*const libc::c_char]) {
    let none: libc::sigset_t = std::mem::zeroed();
    libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    let env = [std::ptr::null::<libc::c_char>()];
    libc::execve(path.as_ptr(), argv.as_ptr(), env.as_ptr());
}

/// `n` in decimal, NUL-terminated, in `buf`.
fn decimal(n: i32, buf: &mut [u8; 16]) -> &[u8] {
    let mut digits = [0u8; 12];
    let mut len = 0;
    let mut v = n.unsigned_abs();
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[i] = digits[len - 1 - i];
    }
    buf[len] = 0;
    &buf[..=len]
}

/// The signals the helpers take and let be: they reach the agent directly (or through its
/// process group), never through a helper.
const TAKEN: [i32; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

extern "C" fn let_be(_: libc::c_int) {}

/// Releases what the helper inherited for the agent (its stdin and stdout: a pipe the wrapper
/// reads stays open as long as a process holds its end).
///
/// # Safety
/// System calls only.
unsafe fn helper_start_up() {
    for sig in TAKEN {
        libc::signal(sig, let_be as *const () as libc::sighandler_t);
    }
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    if null >= 0 {
        libc::dup2(null, 0);
        libc::dup2(null, 1);
        libc::close(null);
    }
}

/// `ahp-wrap-hook pid-outer PID`: waits for the init `PID`, then ends as the agent did (its
/// exit code, or death by the same signal).
pub fn outer_main(init: &str) -> i32 {
    let Ok(init) = init.parse::<i32>() else {
        return 125;
    };
    // SAFETY: system calls on values we own.
    unsafe {
        helper_start_up();
        let mut ignored = 0;
        while libc::waitpid(init, &mut ignored, 0) < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        let mut status = [0u8; 4];
        let n = libc::read(STATUS_FD, status.as_mut_ptr().cast(), 4);
        if n != 4 {
            // The init died without a word (killed): as the agent was, by SIGKILL.
            return die_as(libc::SIGKILL);
        }
        let status = i32::from_ne_bytes(status);
        if libc::WIFSIGNALED(status) {
            return die_as(libc::WTERMSIG(status));
        }
        libc::WEXITSTATUS(status)
    }
}

/// Dies by `sig` (its default action), or exits 128 + `sig` when it does not kill.
///
/// # Safety
/// System calls only.
unsafe fn die_as(sig: i32) -> i32 {
    libc::signal(sig, libc::SIG_DFL);
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigaddset(&mut set, sig);
    libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    // Core files are the agent's to leave, not ours.
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &none);
    libc::raise(sig);
    128 + sig
}

/// `ahp-wrap-hook pid-init`: the namespace's first process. Reaps every process that ends in
/// it; when the agent (PID 2) ends, passes its status on, asks what it left behind to end,
/// and exits after a second at most (the kernel then kills the rest).
pub fn init_main() -> i32 {
    // SAFETY: system calls on values we own.
    unsafe {
        helper_start_up();
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // No child at all: the agent is gone.
                    _ => return 0,
                }
            }
            if pid == 2 {
                let bytes = status.to_ne_bytes();
                libc::write(STATUS_FD, bytes.as_ptr().cast(), 4);
                libc::close(STATUS_FD);
                break;
            }
        }
        libc::kill(-1, libc::SIGTERM);
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(GRACE_MS) {
            let mut status = 0;
            match libc::waitpid(-1, &mut status, libc::WNOHANG) {
                0 => std::thread::sleep(std::time::Duration::from_millis(10)),
                p if p > 0 => {}
                _ => break,
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pid_is_written_in_decimal() {
        let mut buf = [0u8; 16];
        assert_eq!(super::decimal(1234567, &mut buf), b"1234567\0");
        assert_eq!(super::decimal(0, &mut buf), b"0\0");
    }
}
