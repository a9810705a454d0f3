//! The control socket between the parent and the processes that call in from inside the
//! agent (hook executables, PATH shims and plug-ins): a private framing over an
//! abstract Unix socket (Linux; a path in the 0700 run directory elsewhere), a per-run
//! token, and peer credentials checked both ways: the parent checks the caller's uid (and
//! records whether it comes from the agent's tree), the caller checks that the wrapper's pid
//! answers.
//!
//! Owns: that socket, its framing and request kinds ([`wire`]), the parent's server and the
//! one blocking [`client`]. Must not touch: what a request means (the interceptor that
//! handles its kind answers it), any framework, or line framing of its own: header lines
//! are read with the crate's one line framing (`crate::jsonrpc`), blocking on the calling
//! side so that the hook executable stays free of tokio.

pub(crate) mod client;
pub(crate) mod endpoint;
mod server;
/// The control socket's framing (the wire crate's).
pub(crate) use ahp_wrap_wire::control as wire;

pub(crate) use endpoint::{TakenOver, Watched};
pub use server::{AgentSlot, ControlServer, Handler, Peer, Request};
pub use wire::{CallerReply, Kind};

/// Address of the control socket (`@name` for an abstract socket, else a path), in the
/// agent's environment.
pub(crate) const ENV_SOCKET: &str = "AHP_WRAP_SOCKET";
/// Pid of the wrapper, in the agent's environment: a caller talks to no other process.
pub(crate) const ENV_PARENT_PID: &str = "AHP_WRAP_PARENT_PID";
/// The per-run token, in the agent's environment.
pub(crate) const ENV_TOKEN: &str = "AHP_WRAP_TOKEN";
/// How long a caller may wait for the parent, in milliseconds.
pub(crate) const ENV_BUDGET: &str = "AHP_WRAP_HOOK_TIMEOUT_MS";
