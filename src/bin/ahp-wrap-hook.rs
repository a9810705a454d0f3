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
//! exist, `SIGPIPE` ignored (`child::runtime_start_up`), a panic's exit code, and standard
//! output flushed at the end.
//!
//! Its only `unsafe` is the attribute that gives `main` its C name; the system calls are the
//! confinement crate's.

#![no_main]

use std::io::Write;

use ahp_wrap::child::guardian;
use std::os::raw::{c_char, c_int};

// `no_mangle` counts as unsafe code: the linker must find C's `main` by that name.
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    ahp_wrap::child::runtime_start_up();
    // A panic ends the process as the Rust runtime would end it (its message said, 101).
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = std::io::stdout().flush();
    code
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
        // The agent's process outside its PID namespace, and that namespace's init (see
        // `floor::pidns`).
        #[cfg(target_os = "linux")]
        [cmd, init] if cmd == ahp_wrap::floor::pidns::OUTER_ARG => {
            ahp_wrap::floor::pidns::outer_main(&init.to_string_lossy())
        }
        #[cfg(target_os = "linux")]
        [cmd] if cmd == ahp_wrap::floor::pidns::INIT_ARG => ahp_wrap::floor::pidns::init_main(),
        // A run's guardian, started by the wrapper (see `child::guardian`).
        [cmd, work @ ..] if cmd == guardian::GUARDIAN_ARG => {
            // The namespaces made for the agent, held until the guardian is done.
            let mut held = Vec::new();
            #[cfg(target_os = "linux")]
            if work
                .iter()
                .any(|w| w == ahp_wrap::floor::MAKE_NAMESPACES_ARG)
            {
                held = ahp_wrap::floor::NamespaceMaker::from_stdout().make();
            }
            let _ = work;
            guardian::run_spawned(held)
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
