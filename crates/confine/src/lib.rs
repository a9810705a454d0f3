//! The agent's process and what confines it: the only crate of ahp-wrap where `unsafe` code
//! is allowed (system calls between `fork` and `exec`, Landlock, seccomp, namespaces).
//!
//! - [`beneath`]: paths the wrapper acts on for the agent outside its floor, resolved without
//!   following a link the tree could have made.
//! - [`child`]: spawning the agent, process groups, signals, the guardian, the whole process
//!   tree (subreaper), exit codes.
//! - [`floor`]: the kernel's confinement of the agent's whole process tree (Landlock, a user,
//!   mount and network namespace, a connect filter), configured by the policy's `[floor]`
//!   section.
//! - [`vfork`]: a function run in a new process that shares our memory until it calls
//!   `exec` (the agent's process, the namespaces' maker).
//! - [`rundir`]: the private run directory for one run's generated files.
//! - [`statefile`]: an agent's mixed state files (its bookkeeping beside instructions in one
//!   file), and the key-by-key merge of what it changed in its private copy on the floor.
//! - [`exit`]: every exit code, in one type.
//! - [`tty`]: the terminal requests the person's channel makes (input waiting, put back,
//!   the window's size).

// The one crate of the workspace where `unsafe` is allowed (docs/architecture.md).
#![allow(unsafe_code)]

pub mod beneath;
pub mod child;
pub mod exit;
pub mod floor;
pub mod rundir;
pub mod statefile;
pub mod tty;
pub mod vfork;

/// `n` random bytes as lowercase hex.
#[allow(
    clippy::expect_used,
    reason = "without the system's randomness no run token can be made: nothing can go on"
)]
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::getrandom(&mut bytes).expect("the OS has randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `f` when this process exits normally (a return from `main`, or `exit(3)`): C's
/// `atexit`, for what no destructor stops, such as a server a whole test binary shares.
/// `false` when the C library could not register it.
pub fn at_exit(f: extern "C" fn()) -> bool {
    // SAFETY: registers a plain function, which the C library calls once, at exit.
    unsafe { libc::atexit(f) == 0 }
}

/// An error and its sources, joined with ": ".
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
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
