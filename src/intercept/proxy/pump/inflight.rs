//! The requests in flight in each direction, by id: registered when passed on (or held),
//! taken when answered, so that an answer is linked to its call and a proxy that ends
//! answers every call still open.

use super::{lock, Engine, InFlight};
use crate::intercept::proxy::{Decide, Direction, Protocol, Tracked};
use crate::jsonrpc::Id;

impl<P: Protocol, G: Decide> Engine<P, G> {
    /// Records a request travelling `dir`; false when `max_in_flight` are already waiting.
    pub(super) fn insert(
        &self,
        dir: Direction,
        id: &Id,
        held: bool,
        tracked: Option<Tracked>,
    ) -> bool {
        let mut pending = lock(&self.pending[dir.index()]);
        let key = id.to_string();
        if pending.contains_key(&key) {
            // A duplicate id in flight breaks JSON-RPC; the first request keeps it, so that
            // an answer is never linked to a call it does not answer.
            tracing::warn!(%id, "a request reused the id of one still in flight");
            return true;
        }
        if pending.len() >= self.options.max_in_flight {
            return false;
        }
        let id = id.clone();
        pending.insert(key, InFlight { id, held, tracked });
        true
    }

    /// A held request was decided and is about to be forwarded.
    pub(super) fn release(&self, dir: Direction, id: &Id, tracked: Option<Tracked>) {
        if let Some(f) = lock(&self.pending[dir.index()]).get_mut(&id.to_string()) {
            f.held = false;
            f.tracked = tracked;
        }
    }

    pub(super) fn forget(&self, dir: Direction, id: Option<&Id>) {
        if let Some(id) = id {
            lock(&self.pending[dir.index()]).remove(&id.to_string());
        }
    }

    /// The request that travelled `dir` with this id, now answered. A held one (not yet
    /// forwarded, so not answerable by the peer) stays.
    pub(super) fn take_answered(&self, dir: Direction, id: &Id) -> Option<Tracked> {
        let mut pending = lock(&self.pending[dir.index()]);
        let key = id.to_string();
        match pending.get(&key) {
            Some(f) if !f.held => pending.remove(&key).and_then(|f| f.tracked),
            _ => None,
        }
    }
}
