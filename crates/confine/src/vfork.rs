//! A new process that shares this one's memory and runs one function while the calling
//! thread waits, until the new process calls `exec` or exits (`clone` with `CLONE_VM |
//! CLONE_VFORK`, as `posix_spawn` does). A `fork` copies the page tables of the whole
//! process for a process that throws them away at `exec`, and leaves every page this
//! process writes afterwards to fault once more.
//!
//! Owns: that `clone`, the new process's stack and the signal mask around it. Must not
//! touch: what the function does (its callers: the agent's process, the namespaces' maker,
//! the porter), beyond setting the signals it may `exec` with back to their defaults.

/// The new process's stack: its function makes system calls, a few frames deep.
const STACK: usize = 256 * 1024;

/// Runs `f` in a new process that shares our memory; returns its pid once the new process
/// has called `exec` or exited (the caller reaps it). When `f` returns, the new process
/// exits with what it returned. Every signal is blocked in the new process when `f` starts
/// (and in this thread meanwhile): `f` unblocks them itself, after setting to their
/// defaults the ones this process handles, should it live on into an `exec` (a handler is
/// our code, in the memory it shares).
///
/// # Safety
///
/// `f` runs in our memory while this thread is suspended but our other threads are not:
/// as a pre-exec step after `fork`, it may only make async-signal-safe calls (no
/// allocation, no lock, no panic), and what it writes, it writes in our memory.
pub(crate) unsafe fn run(f: &mut dyn FnMut() -> libc::c_int) -> std::io::Result<libc::pid_t> {
    run_with(f, 0)
}

/// [`run`], the new process also sharing what `flags` names (`CLONE_FILES`: the
/// descriptors it opens stay ours).
///
/// # Safety
///
/// As for [`run`].
pub(crate) unsafe fn run_with(
    f: &mut dyn FnMut() -> libc::c_int,
    flags: libc::c_int,
) -> std::io::Result<libc::pid_t> {
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `&mut dyn FnMut` below, alive in the memory of the thread
        // that waits for us.
        let f = unsafe { &mut *arg.cast::<&mut dyn FnMut() -> libc::c_int>() };
        f()
    }
    // SAFETY: a mapping we own, unmapped once the new process no longer runs on it; the
    // signal mask is restored on every path.
    unsafe {
        let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
        let size = STACK + page;
        let stack = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        if stack == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // A guard page where the stack would run over: a fault, not our memory.
        libc::mprotect(stack, page, libc::PROT_NONE);
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut f = f;
        let pid = libc::clone(
            entry,
            stack.cast::<u8>().add(size).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | flags,
            std::ptr::from_mut(&mut f).cast(),
        );
        let error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::munmap(stack, size);
        match pid {
            -1 => Err(error),
            pid => Ok(pid),
        }
    }
}

/// In the new process: every signal this process handles back to its default (the handler
/// is our code), and SIGPIPE, which we ignore, too (a program started from a shell gets the
/// default). Other ignored signals stay ignored, as a shell leaves them.
///
/// # Safety
/// System calls only.
pub(crate) unsafe fn defaults_for_handled_signals() {
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            continue;
        }
        let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
        if handled || sig == libc::SIGPIPE {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_runs_in_another_process_that_shares_our_memory() {
        let mut seen = 0;
        let mut f = || {
            // SAFETY: a system call.
            seen = unsafe { libc::getpid() };
            7
        };
        // SAFETY: the function writes one integer and returns.
        let pid = unsafe { run(&mut f) }.unwrap();
        let mut status = 0;
        // SAFETY: reaps our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), 7);
        // What it wrote is in our memory: it ran in the new process, not in ours.
        assert_eq!(seen, pid);
        assert_ne!(seen, std::process::id() as i32);
    }
}
