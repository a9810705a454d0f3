//! `ahp-wrap serve`: the embedded policy engine as a standalone AHP 2.4 harness, so that
//! many wrappers (or any AHP client) share one policy and one audit log.
//!
//! Owns: the listeners (stdio, Unix socket, HTTP, WebSocket) and answering AHP methods with
//! the embedded engine. Must not touch: the policy itself (`policy/`, reached through
//! the gate's [`Embedded`](crate::gate::Embedded)), or framing of its own: stream listeners read lines through the shared codec
//! ([`crate::jsonrpc::LineCodec`]).

mod listen;

pub(crate) use listen::{serve, Listen};

use std::time::Duration;

use serde_json::{json, Value};

use crate::audit::Auditor;
use crate::gate::{Decider, Gate, Origin};
use crate::jsonrpc;
use crate::protocol::{Event, PROTOCOL_VERSION};

/// How long before a wrapper's own deadline serve gives up on an escalation, so that the
/// wrapper hears serve's answer (and its reason) rather than its own timeout: the margin the
/// default `--approval-timeout` leaves before `--timeout` (half the wrapper's time when
/// that is less).
const REPLY_MARGIN: Duration = Duration::from_secs(1);

/// Limits advertised in the handshake.
#[derive(Debug, Clone)]
pub(crate) struct Advertised {
    /// How long a wrapper waits for a decision, in milliseconds (`--timeout`); the default
    /// `--approval-timeout` is a second less.
    pub timeout_ms: u64,
    /// Most events one `ahp/batch` may hold (`--batch-size`, at least 1); a larger batch is
    /// refused as invalid params.
    pub batch_size: usize,
    /// Deepest `depth` an event may carry (`--max-depth`); a deeper one is refused.
    pub max_depth: u32,
}

/// Answers AHP messages with the embedded engine. Shared by every listener.
pub(crate) struct Engine {
    /// The one path from an event to its durable record and decision, as a run has it: the
    /// embedded engine decides, the audit log records before the answer goes out, and a
    /// decision that cannot be recorded is the fail mode's. Its person, with the approvals
    /// host on, is the host: an escalation waits there for an answer, its deadline, or the
    /// fail mode. Without one, an escalation goes back to the wrapper, whose own person
    /// decides.
    pub gate: Gate,
    /// What the handshake's `config` says, and the batch and depth limits enforced.
    pub advertised: Advertised,
}

impl Engine {
    /// An engine deciding with `decider`, recording in `audit`.
    pub(crate) fn new(decider: Decider, audit: Auditor, advertised: Advertised) -> Engine {
        // The gate's own ids name events the gate builds itself, which serve never does.
        let gate = Gate::new("serve".into(), "serve".into(), 0, decider, audit);
        Engine { gate, advertised }
    }
}

impl Engine {
    /// Handles one JSON-RPC message; returns the answer to send, if any.
    pub(crate) async fn handle(&self, text: &str) -> Option<String> {
        let jsonrpc::Incoming { id, method, params } = match jsonrpc::incoming(text) {
            Ok(m) => m,
            Err(e) => return Some(e.answer()),
        };
        let result = match method.as_str() {
            "ahp/handshake" => self.handshake(&params),
            "ahp/event" => self.event(params, id.is_some()).await,
            "ahp/batch" => self.batch(params).await,
            "ahp/query" => Err((
                -32601,
                "ahp/query is not served by ahp-wrap serve".to_owned(),
            )),
            "" => Err((-32600, "Invalid Request: no method".to_owned())),
            other => Err((-32601, format!("Method not found: {other}"))),
        };
        let id = id?;
        Some(match result {
            Ok(r) => jsonrpc::response(&id, &r),
            Err((code, message)) => jsonrpc::error_response(&id, code, &message),
        })
    }

    fn handshake(&self, params: &Value) -> Result<Value, (i64, String)> {
        let version = params
            .get("protocol_version")
            .and_then(Value::as_str)
            .ok_or((-32602, "Invalid params: no protocol_version".to_owned()))?;
        if version.split('.').next() != Some("2") {
            return Err((-32000, format!("Unsupported protocol version: {version}")));
        }
        let mut capabilities: Vec<&str> = crate::protocol::EventType::ALL
            .iter()
            .map(|t| t.as_str())
            .collect();
        capabilities.push("batch");
        Ok(json!({
            "protocol_version": PROTOCOL_VERSION,
            "harness_info": {
                "name": "ahp-wrap",
                "version": env!("CARGO_PKG_VERSION"),
                "capabilities": capabilities,
            },
            "config": {
                "timeout_ms": self.advertised.timeout_ms,
                "batch_size": self.advertised.batch_size,
                "max_depth": self.advertised.max_depth,
            },
        }))
    }

    async fn event(&self, params: Value, is_request: bool) -> Result<Value, (i64, String)> {
        let event: Event =
            serde_json::from_value(params).map_err(|e| (-32602, format!("Invalid params: {e}")))?;
        if event.depth > self.advertised.max_depth {
            return Err((
                -32602,
                format!(
                    "Invalid event: depth {} exceeds max depth {}",
                    event.depth, self.advertised.max_depth
                ),
            ));
        }
        if !event.event_type.is_blocking() {
            let event_type = event.event_type;
            self.notified(event).await;
            return if is_request {
                Err((
                    -32602,
                    format!("Fire-and-forget event {event_type} must be sent as a notification"),
                ))
            } else {
                Ok(Value::Null)
            };
        }
        Ok(self.decide(&event).await)
    }

    async fn batch(&self, params: Value) -> Result<Value, (i64, String)> {
        let events = params
            .get("events")
            .and_then(Value::as_array)
            .ok_or((-32602, "Invalid params: no events".to_owned()))?;
        if events.len() > self.advertised.batch_size {
            return Err((
                -32602,
                format!(
                    "Batch size {} exceeds configured limit {}",
                    events.len(),
                    self.advertised.batch_size
                ),
            ));
        }
        let mut decisions = Vec::with_capacity(events.len());
        for e in events {
            let event: Event = serde_json::from_value(e.clone())
                .map_err(|e| (-32602, format!("Invalid event: {e}")))?;
            if event.event_type.is_blocking() {
                decisions.push(self.decide(&event).await);
            } else {
                self.notified(event).await;
                decisions.push(json!({"decision": "allow"}));
            }
        }
        Ok(json!({ "decisions": decisions }))
    }

    async fn decide(&self, event: &Event) -> Value {
        // No person here: an escalation is the wrapper's to take to its own.
        let escalate_back = self.gate.decider.approver.is_none();
        let within = self.deadline_of(event);
        let d = self
            .gate
            .decide_within(event, escalate_back, Origin::default(), within)
            .await;
        d.verdict.into_json()
    }

    /// How long `event` may wait for a person here, when its sender waits less than
    /// `--approval-timeout` (it says so in `metadata.timeout_ms`): its time, less the time
    /// the fail mode's answer needs to reach it. The page shows this deadline.
    fn deadline_of(&self, event: &Event) -> Option<Duration> {
        let theirs = event.timeout()?;
        let ours = theirs.saturating_sub(REPLY_MARGIN).max(theirs / 2);
        (ours < self.gate.decider.timeout).then_some(ours)
    }

    async fn notified(&self, event: Event) {
        self.gate.notify(event, Origin::default()).await;
    }
}
