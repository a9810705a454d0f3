//! Interceptors: the ways an agent's actions are turned into AHP events for the gate.
//!
//! - [`proxy`]: the stream proxy for JSON-RPC on stdio (MCP servers; later ACP agents).
//!
//! Must not touch: how a verdict is reached (the gate / session) or the run itself.

pub mod proxy;
