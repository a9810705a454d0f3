//! The stream proxy: a newline-delimited JSON-RPC proxy between a client (the peer on our
//! stdin/stdout) and a server we spawned (its stdin/stdout), holding the frames a protocol
//! intercepts until a [`Decide`] has decided on them.
//!
//! Owns: the generic engine (`pump.rs`: framing, byte-exact pass-through, per-direction
//! order, request/response matching by id in each direction, how the proxy ends), the
//! [`Protocol`] interface a JSON-RPC protocol implements to say what is intercepted, the MCP
//! mapping ([`mcp`]), the ACP mapping ([`acp`]), and the small [`Decide`] trait the proxy
//! asks. Must not touch: the
//! harness client, the policy or the audit log (only the gate does, through its
//! [`Decide`] implementation below), nor spawning or killing the server (the caller owns
//! the child).
//!
//! ```text
//!  client ──stdin──▶ ┌───────────── proxy ─────────────┐ ──stdin──▶ server (child)
//!         ◀─stdout── │ pass-through │ held → Decide ──▶ │ ◀─stdout──
//!                    └─────────────────────────────────┘   (stderr inherited, untouched)
//! ```

pub mod acp;
mod interceptor;
pub mod mcp;
mod out;
mod protocol;
mod pump;
mod stdio;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cancel;

use std::future::Future;
use std::time::Duration;

use serde_json::{Map, Value};

pub(crate) use interceptor::StreamProxy;
pub(crate) use protocol::{
    post_action_result, Disposition, HeldCall, Notice, OnCall, Protocol, Resolution, Tracked,
    REQUEST_CANCELLED,
};
pub use pump::{run, Ended, Streams};

use crate::protocol::{EventType, Final};

/// What the proxy asks for each intercepted frame (implemented by the run's
/// [`crate::gate::Gate`], below; by a test double in unit tests only).
pub trait Decide: Send + Sync + 'static {
    /// The final verdict on a blocking event: defer, escalate and the fail mode are already
    /// resolved (an `Ask` that still comes back is treated as a block).
    fn decide(&self, event: GateEvent) -> impl Future<Output = Final> + Send;

    /// The verdict on a blocking event whose call has its own way to ask a person (ACP's
    /// permission request, which goes on to the editor): defer and the fail mode are
    /// resolved, but an escalation comes back as [`Final::Ask`]: "let the person decide there".
    /// By default the same as [`Decide::decide`].
    fn decide_native(&self, event: GateEvent) -> impl Future<Output = Final> + Send {
        self.decide(event)
    }

    /// A blocking event whose decision was abandoned because its sender's peer cancelled
    /// it (see [`OnCall::Cancel`]) after `waited`: the call was answered as cancelled and
    /// never forwarded. The audit log must still say so.
    fn abandoned(
        &self,
        event: GateEvent,
        why: String,
        waited: Duration,
    ) -> impl Future<Output = ()> + Send;

    /// Tells the harness (and the audit log) about something that needs no decision.
    fn notify(&self, event: GateEvent) -> impl Future<Output = ()> + Send;
}

/// Which way a frame travels. The *client* is the peer on our stdin/stdout (an agent for
/// MCP, an editor for ACP); the *server* is the child we spawned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server.
    ToServer,
    /// From the server to the client.
    ToClient,
}

impl Direction {
    /// The other way: where the answer to a request travelling this way goes.
    pub(crate) fn back(self) -> Direction {
        match self {
            Direction::ToServer => Direction::ToClient,
            Direction::ToClient => Direction::ToServer,
        }
    }

    /// As metrics label it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Direction::ToServer => "to_server",
            Direction::ToClient => "to_client",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Direction::ToServer => 0,
            Direction::ToClient => 1,
        }
    }
}

/// How the proxy behaves; [`Options::default`] is what a run uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// The largest frame (content bytes) read in either direction. A larger one from the
    /// client is refused with a JSON-RPC error (its id cannot be read); a larger one from
    /// the server ends the proxy, since it cannot be passed on and its id is unknown.
    pub max_frame: usize,
    /// Requests awaiting an answer in one direction; past it, a new request is refused with
    /// a JSON-RPC error (memory stays bounded whatever a peer sends).
    pub max_in_flight: usize,
    /// After the client has gone and the server's stdin is closed: how long the server's
    /// last output is still passed on before the proxy ends.
    pub drain: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_frame: 16 * 1024 * 1024,
            max_in_flight: 4096,
            drain: Duration::from_secs(2),
        }
    }
}

/// An AHP event for the gate: its type, payload and metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct GateEvent {
    /// The AHP event type: `pre_action` for a held call, `post_action` for a watched
    /// answer, and others as the protocol maps its messages.
    pub event_type: EventType,
    /// The event's `payload`, as the protocol maps the call (e.g. an MCP `tools/call` as a
    /// tool call named `mcp__<server>__<tool>`).
    pub payload: Value,
    /// The event's `metadata` (`framework`, `interceptor`, ...); left out of the event
    /// when empty.
    pub metadata: Map<String, Value>,
}

/// The run's gate as the proxy's decider. [`Decide::decide`] has no native "ask": an
/// `escalate` is resolved by the gate (a person at the terminal, else the fail mode) before
/// it comes back; [`Decide::decide_native`] lets it come back.
impl Decide for crate::gate::Gate {
    async fn decide(&self, event: GateEvent) -> Final {
        gate_decide(self, event, false).await
    }

    async fn decide_native(&self, event: GateEvent) -> Final {
        gate_decide(self, event, true).await
    }

    async fn abandoned(&self, ev: GateEvent, why: String, waited: Duration) {
        let event = self.event(ev.event_type, ev.payload, ev.metadata);
        let origin = crate::gate::Origin::default();
        crate::gate::Gate::abandoned(self, &event, why, waited, origin).await;
    }

    async fn notify(&self, ev: GateEvent) {
        let event = self.event(ev.event_type, ev.payload, ev.metadata);
        crate::gate::Gate::notify(self, event, crate::gate::Origin::default()).await;
    }
}

async fn gate_decide(gate: &crate::gate::Gate, ev: GateEvent, native_ask: bool) -> Final {
    let event = gate.event(ev.event_type, ev.payload, ev.metadata);
    let origin = crate::gate::Origin::default();
    crate::gate::Gate::decide(gate, &event, native_ask, origin)
        .await
        .verdict
}
