//! The control socket between the parent and its shims: a private framing over a Unix
//! socket in a 0700 directory, a per-run token, and a peer uid check.

pub mod relay;
mod server;
pub mod wire;

pub use server::{only_root_can_write, ControlServer, HookHandler, RunDir};

/// Path of the control socket, in the agent's environment.
pub const ENV_SOCKET: &str = "AHP_WRAP_SOCKET";
/// The per-run token, in the agent's environment.
pub const ENV_TOKEN: &str = "AHP_WRAP_TOKEN";
/// How long a shim may wait for the parent, in milliseconds.
pub const ENV_BUDGET: &str = "AHP_WRAP_HOOK_TIMEOUT_MS";
