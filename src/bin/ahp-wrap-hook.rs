//! `ahp-wrap-hook hook <framework> <hook>`: the hook entry point alone, in a small
//! executable, so that the per-tool-call process starts fast (few relocations to apply)
//! while staying a position-independent executable. Same arguments and behaviour as
//! `ahp-wrap hook <framework> <hook>`. The same executable is what PATH shims run (under a
//! command's name) and a run's guardian (`ahp-wrap-hook guardian`, started by the wrapper).
//!
//! It starts at C's `main`, without the Rust runtime's start-up: that start-up installs a
//! stack-overflow handler (it reads `/proc/self/maps` and sets an alternate signal stack,
//! a dozen system calls), which a process started on every tool call and every shimmed
//! command does without. What of it matters here is done below: standard descriptors that
//! exist, `SIGPIPE` ignored, a panic's exit code, and standard output flushed at the end.

#![no_main]

use std::io::Write;

use ahp_wrap::child::guardian;
use std::os::raw::{c_char, c_int};

#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    start_up();
    // A panic ends the process as the Rust runtime would end it (its message said, 101).
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = std::io::stdout().flush();
    code
}

/// What the Rust runtime's start-up does that this process needs: descriptors 0 to 2 open
/// (else a socket could take one, and an answer meant for stdout would go into it), and a
/// write to a closed pipe an error rather than death by `SIGPIPE`.
fn start_up() {
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

fn run() -> c_int {
    // Started as a command in a run's PATH shim directory: ask the wrapper, then run it
    // or not (see `intercept::pathshim`).
    if let Some(name) = ahp_wrap::intercept::pathshim::exec::invoked_as(false) {
        let code =
            ahp_wrap::intercept::pathshim::exec::run(&name, std::env::args_os().skip(1).collect());
        return u8::try_from(code).map_or(1, c_int::from);
    }
    // Not `std::env::args()`: it panics on an argument that is not UTF-8, and a panic's
    // exit code is no refusal to an agent.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = match args.as_slice() {
        [cmd, framework, hook] if cmd == "hook" => match (framework.to_str(), hook.to_str()) {
            (Some(framework), Some(hook)) => {
                ahp_wrap::intercept::hooks::relay::run_hook(framework, hook)
            }
            _ => malformed(),
        },
        // A run's porter, started by the wrapper in the tree's namespaces (see
        // `floor::porter`).
        #[cfg(target_os = "linux")]
        [cmd] if cmd == ahp_wrap::floor::porter::PORTER_ARG => ahp_wrap::floor::porter::serve(),
        // A run's guardian, started by the wrapper (see `child::guardian`).
        [cmd, work @ ..] if cmd == guardian::GUARDIAN_ARG => {
            #[cfg(target_os = "linux")]
            if work
                .iter()
                .any(|w| w == ahp_wrap::floor::MAKE_NAMESPACES_ARG)
            {
                use std::os::fd::FromRawFd;
                // SAFETY: our standard output is the maker's socket (the wrapper set it so).
                let socket = unsafe { std::os::fd::OwnedFd::from_raw_fd(1) };
                ahp_wrap::floor::Maker::new(socket).make();
            }
            let _ = work;
            guardian::run_spawned()
        }
        _ => malformed(),
    };
    u8::try_from(code).map_or(1, c_int::from)
}

/// Exit 2 with the reason: what every agent's hook contract reads as "deny".
fn malformed() -> i32 {
    eprintln!(
        "ahp-wrap-hook: refused: the hook command line is malformed (usage: \
         ahp-wrap-hook hook <FRAMEWORK> <HOOK>)"
    );
    2
}
