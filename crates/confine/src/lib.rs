//! The agent's process and what confines it: the only crate of ahp-wrap where `unsafe` code
//! is allowed (system calls between `fork` and `exec`, Landlock, seccomp, namespaces). What
//! it applies is worked out beforehand, with no `unsafe` code, by `crates/floor` (the
//! floor's plan, the agent's command); the tree it starts is followed by `crates/process`.
//!
//! - [`child`]: spawning the agent, process groups, signals, the guardian, exit codes.
//! - [`floor`]: the kernel's confinement of the agent's whole process tree (Landlock, a user,
//!   mount and network namespace, a connect filter), applied from a finished plan.
//! - [`vfork`]: a function run in a new process that shares our memory until it calls
//!   `exec` (the agent's process, the namespaces' maker).
//! - [`tty`]: the terminal requests the person's channel makes (input waiting, put back,
//!   the window's size).

// The one crate of the workspace where `unsafe` is allowed (docs/architecture.md).
#![allow(unsafe_code)]

pub mod child;
pub mod floor;
pub mod tty;
pub mod vfork;

/// Runs `f` when this process exits normally (a return from `main`, or `exit(3)`): C's
/// `atexit`, for what no destructor stops, such as a server a whole test binary shares.
/// `false` when the C library could not register it.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: registers a plain function, which the C library calls once, at exit.
    unsafe { libc::atexit(f) == 0 }
}

/// A temporary directory for a test, under the workspace's `target/` (on the disk the
/// project is on, not a `/tmp` that the floor treats as a temp directory, nor a tmpfs an
/// overlay may not use), by its canonical path (the floor's plans compare canonical paths).
#[cfg(test)]
pub(crate) fn test_dir() -> tempfile::TempDir {
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    std::fs::create_dir_all(&target).expect("target/ can be made");
    let target = target.canonicalize().expect("target/ has a canonical path");
    tempfile::tempdir_in(target).expect("a temporary directory in target/")
}
