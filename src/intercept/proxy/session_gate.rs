//! The [`Gate`] of a wrapped run today: the run's [`Session`] (harness or embedded policy,
//! fail mode, audit log). Owns nothing else; re-pointed at the run's gate when that lands.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::Gate;
use crate::protocol::{EventType, Verdict};
use crate::session::Session;

/// A session as the proxy's gate. MCP has no native "ask", so an `escalate` is resolved
/// by the session (a person at the terminal, else the fail mode) before it comes back.
#[derive(Clone)]
pub struct SessionGate(pub Arc<Session>);

impl Gate for SessionGate {
    async fn decide(
        &self,
        event_type: EventType,
        payload: Value,
        metadata: Map<String, Value>,
    ) -> Verdict {
        let event = self.0.event(event_type, payload, metadata);
        self.0.decide(&event, false, None, None).await.verdict
    }

    async fn notify(&self, event_type: EventType, payload: Value, metadata: Map<String, Value>) {
        let event = self.0.event(event_type, payload, metadata);
        self.0.notify(event, None).await;
    }
}
