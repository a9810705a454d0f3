//! Notifications of the client actor: queued while the link is not ready, sent alone or as
//! `ahp/batch` requests of the harness's `batch_size`, flushed before any blocking request.

use super::{Actor, Pending, DEFAULT_BATCH_SIZE};
use crate::protocol::jsonrpc;
use crate::protocol::Event;
use crate::transport::Outgoing;

impl Actor {
    pub(super) fn batch_size(&self) -> usize {
        self.negotiated
            .as_ref()
            .and_then(|n| n.batch_size)
            .unwrap_or(DEFAULT_BATCH_SIZE)
            .max(1)
    }

    #[allow(
        clippy::expect_used,
        reason = "an event is plain data: its serialisation cannot fail"
    )]
    pub(super) async fn flush_batch(&mut self) {
        self.batch_due = None;
        if !self.ready() {
            return;
        }
        let size = self.batch_size();
        let can_batch = size > 1
            && self
                .negotiated
                .as_ref()
                .is_some_and(|n| n.capabilities.iter().any(|c| c == "batch"));
        while !self.batch.is_empty() {
            let n = self.batch.len().min(size);
            let events: Vec<Event> = self.batch.drain(..n).collect();
            if can_batch && events.len() > 1 {
                let id = self.next_id("batch");
                self.pending.insert(id.clone(), Pending::Batch);
                let params = serde_json::json!({ "events": events });
                let text = jsonrpc::request(&id, "ahp/batch", &params);
                self.send(Outgoing { id: Some(id), text }).await;
            } else {
                for event in events {
                    let params = serde_json::to_value(&event).expect("events serialize");
                    let text = jsonrpc::notification("ahp/event", &params);
                    self.send(Outgoing { id: None, text }).await;
                }
            }
        }
    }
}
