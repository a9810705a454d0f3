//! The floor's data model, and the plain data of the agent's process that the crates above
//! share: everything of the floor that is worked out before a system call is made, with no
//! `unsafe` code (`crates/confine` applies it in the agent's process).
//!
//! - [`spec`]: the policy's `[floor]` section (what may be written, what is never written,
//!   what is never read, the network's rules, the credentials), as written ([`Spec`]).
//! - [`plan`]: the spec made concrete for one run ([`Plan`]): the workspace, the temp
//!   directories, the agent's own state (declared by its shim), the package caches, and the
//!   wrapper's own files.
//! - [`finished`]: the plan completed for the kernel ([`Finished`], Linux): the private
//!   copies of the mixed state files made ([`Copies`](finished::Copies), sorted and merged
//!   at the run's end) and the caches' overlays laid, the one form `crates/confine` takes.
//! - [`hosts`]: the network's rules (`[floor.net]`): which host a connection may reach.
//! - [`names`]: the addresses the tree's resolver gives each name, which lead a connection
//!   back to its name.
//! - [`credentials`]: the credentials the tree uses without reading them (placeholders in its
//!   environment, the real values for the egress proxy).
//! - [`seccomp`] (Linux): the seccomp programs the floor's network part installs, as data.
//! - [`secrets`]: which of the wrapper's variables carry credentials the agent's tree must
//!   not inherit.
//! - [`runfiles`]: the files of each ecosystem that make a tool run a program.
//! - [`explain`]: a refusal of the floor, explained to the agent.
//! - [`apparmor`] (Linux): Ubuntu's restriction of user namespaces, and the profile that lifts
//!   it for ahp-wrap.
//! - [`caches`] (Linux): the package caches' overlays (their layers, what changed beneath).
//! - [`mountinfo`]: the kernel's mount table (`/proc/self/mountinfo`), read into its fields.
//! - [`denials`]: the kernel's audit records of the floor's refusals, sorted into the run's own.
//! - [`agent`]: the agent's command as the interceptors and the frameworks amend it, and the
//!   files it keeps of its own.
//! - [`statefile`]: an agent's mixed state files (its bookkeeping beside instructions in one
//!   file), and the key-by-key merge of what it changed in its private copy on the floor.
//! - [`beneath`]: paths the wrapper acts on for the agent outside its floor, resolved without
//!   following a link the tree could have made.
//! - [`rundir`]: the private run directory for one run's generated files.
//! - [`exit`]: every exit code, in one type.
//! - [`Support`] (Linux): what this kernel offers the floor, and the report of what a run gets.
//! - [`Unavailable`]: why a mechanism of the floor is not available here, by cause; and
//!   [`FloorError`], why a floor could not be set up for a run.
//!
//! Owns: what the floor is told and what it says. Must not touch: a system call that needs
//! `unsafe` (those are `crates/confine`'s), events or decisions.

#![forbid(unsafe_code)]

pub mod agent;
#[cfg(target_os = "linux")]
pub mod apparmor;
pub mod beneath;
#[cfg(target_os = "linux")]
pub mod caches;
pub mod credentials;
pub mod denials;
pub mod exit;
pub mod explain;
pub mod finished;
pub mod hosts;
pub mod mountinfo;
pub mod names;
pub mod plan;
mod resolve;
pub mod rundir;
pub mod runfiles;
#[cfg(target_os = "linux")]
pub mod seccomp;
pub mod secrets;
pub mod spec;
pub mod statefile;
#[cfg(target_os = "linux")]
mod support;
mod unavailable;

#[cfg(target_os = "linux")]
pub use finished::Finished;
pub use plan::{Context, Plan};
pub use spec::Spec;
#[cfg(target_os = "linux")]
pub use support::{Support, Writes};
pub use unavailable::{Feature, FloorError, ProfileFound, Sysctl, Unavailable};

/// Set in the agent's environment when its tree runs on a floor: a wrapper started inside
/// (a sub-agent, `ahp-wrap mcp`) stacks its own Landlock rules on the inherited ones and
/// skips the namespaces (mounts are refused inside a Landlock domain).
pub const ENV_FLOOR: &str = "AHP_WRAP_FLOOR";

/// Whether a run asks for the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Wherever the kernel supports it (the default); what it lacks is said before the
    /// agent starts.
    #[default]
    On,
    /// No floor: the run says so and audits it.
    Off,
}

/// What one run's floor enforces and what it cannot, in words for the person and the
/// audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// What the kernel enforces for this run.
    pub enforced: Vec<String>,
    /// What this kernel or this setting cannot enforce (said before the agent starts).
    pub gaps: Vec<String>,
    /// What the place the run is in withholds, where what gives it back would cost that
    /// place more than the floor gains (a container's masked `/proc`, which refuses the
    /// tree one of its own): said before the agent starts with the gaps, but the floor is
    /// complete without it (`--require-floor` lets the run start).
    pub withheld: Vec<String>,
    /// Whether the refusals the kernel makes are counted (said, not a gap: the floor holds
    /// either way).
    pub refusals: String,
}

impl Report {
    /// Whether every part of the floor is in force.
    pub fn complete(&self) -> bool {
        self.gaps.is_empty()
    }
}

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
