//! The floor: the kernel confines the agent's whole process tree, whatever it runs and however
//! it runs it. The interceptors and the policy decide and explain; the floor is what holds
//! when they do not see an act (a script written in one call and run in the next, a build
//! file, an interpreter, an absolute path).
//!
//! - [`Spec`]: the policy's `[floor]` section (what may be written, what is never written,
//!   what is never read), as written.
//! - [`plan`]: the spec made concrete for one run: the workspace, the temp directories, the
//!   agent's own state (declared by its shim), the package caches, and the wrapper's own
//!   files; [`Finished`] once completed for the kernel (the copies, the caches' overlays).
//! - `kernel` (Linux): what this kernel offers ([`Support`]), and the confinement applied in
//!   the agent's process before its `exec` ([`Prepared`], from a [`Finished`] plan): a user
//!   and mount namespace with read-only binds over protected paths and empty mounts over
//!   secrets, then Landlock (writes only beneath the writable roots; no signals to processes
//!   outside the tree).
//! - `namespaces` (Linux): the user and mount namespaces the agent's process enters, with the
//!   plan's binds and empty mounts.
//! - [`pidns`] (Linux): a PID namespace and a `/proc` of the tree's own, its init and the
//!   agent's process outside it (the small executable).
//! - `premade` (Linux): the agent's user and network namespaces, made at start-up by a process
//!   the guardian starts, for the agent's process to join ([`NamespaceReceiver`]).
//! - `netns` (Linux): the network namespace's part on both sides: loopback alone, the proxy
//!   and control sockets bound in it, the filter that hands each `connect(2)` to the
//!   wrapper's [`bridge`] ([`NetRequest`], [`NetReceived`]).
//! - [`names`]: the addresses the tree's resolver gives each name, which lead a connection
//!   back to its name.
//! - [`credentials`]: the credentials the tree uses without reading them (placeholders in its
//!   environment, the real values for the egress proxy).
//! - [`secrets`]: which of the wrapper's variables carry credentials the agent's tree must
//!   not inherit.
//! - [`denials`] (Linux): the refusals the kernel reports to its audit log, where the run can
//!   read it, sorted into the run's own.
//!
//! Owns: the mechanism and what it is told. Must not touch: events or decisions (a refusal
//! by the kernel is an ordinary `EACCES`/`EPERM`/`EROFS` to the agent), the audit log, or
//! how the agent is spawned (it hands [`child`](crate::child) one pre-exec step).
//!
//! docs/floor.md says why these mechanisms, what each covers, and what is not covered yet.

#[cfg(target_os = "linux")]
pub mod bridge;
#[cfg(target_os = "linux")]
pub mod denials;
#[cfg(target_os = "linux")]
pub mod porter;
#[cfg(target_os = "linux")]
mod premade;

#[cfg(target_os = "linux")]
mod kernel;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
pub mod pidns;
#[cfg(target_os = "linux")]
mod sys;

// The floor's data (`crates/floor`), under the names it had here.
#[cfg(target_os = "linux")]
pub use ahp_wrap_floor::{apparmor, caches, mountinfo, Finished};
pub use ahp_wrap_floor::{
    credentials, explain, finished, hosts, names, plan, runfiles, secrets, spec, Context, Feature,
    FloorError, Mode, Plan, Report, Spec, Support, Unavailable, Writes, ENV_FLOOR,
};

#[cfg(target_os = "linux")]
pub use kernel::{probe, Prepared};
#[cfg(target_os = "linux")]
pub use netns::{NetPeer, NetReceived, NetRequest};
#[cfg(target_os = "linux")]
pub use premade::{
    wanted as premade_namespaces, NamespaceMaker, NamespaceReceiver, MAKE_NAMESPACES_ARG,
};

/// What this machine enforces of `plan`, and what it lacks.
pub fn report(plan: &Plan) -> Report {
    #[cfg(target_os = "linux")]
    {
        let support = probe();
        support.report(
            plan,
            denials::said(&denials::Reader::open(support.landlock_abi)),
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = plan;
        Report {
            enforced: Vec::new(),
            gaps: vec![
                "the floor is Linux-only: files, signals and secrets are not confined by \
                        the kernel on this system"
                    .into(),
            ],
            refusals: String::new(),
        }
    }
}
