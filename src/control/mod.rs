//! The control socket between the parent and its shims: a private framing over an
//! abstract Unix socket (Linux; a path in a 0700 directory elsewhere), a per-run token,
//! and peer credentials checked both ways: the parent checks the shim's uid (and records
//! whether it comes from the agent's tree), the shim checks that the wrapper's pid answers.
//!
//! Owns: that socket, its framing ([`wire`]) and both of its ends. Must not touch: what a
//! hook call means (the hook service answers it) or line framing of its own: header lines
//! are read with the crate's one line framing (`crate::jsonrpc`), blocking on the hook side
//! so that the hook executable stays free of tokio.

pub mod endpoint;
pub mod relay;
mod server;
pub mod wire;

pub use endpoint::{TakenOver, Watched};
pub use server::{only_root_can_write, AgentSlot, ControlServer, HookHandler, Peer, RunDir};

/// Address of the control socket (`@name` for an abstract socket, else a path), in the
/// agent's environment.
pub const ENV_SOCKET: &str = "AHP_WRAP_SOCKET";
/// Pid of the wrapper, in the agent's environment: a shim talks to no other process.
pub const ENV_PARENT_PID: &str = "AHP_WRAP_PARENT_PID";
/// The per-run token, in the agent's environment.
pub const ENV_TOKEN: &str = "AHP_WRAP_TOKEN";
/// How long a shim may wait for the parent, in milliseconds.
pub const ENV_BUDGET: &str = "AHP_WRAP_HOOK_TIMEOUT_MS";
