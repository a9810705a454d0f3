//! The requests in flight in each direction, by id: registered when passed on (or held),
//! taken when answered, so that an answer is linked to its call and a proxy that ends
//! answers every call still open.

use super::{lock, Engine, InFlight};
use crate::intercept::proxy::{Decide, Direction, Protocol, Tracked};
use crate::jsonrpc::Id;

/// The table of requests in flight in one direction is full.
pub(super) struct Full;

impl<P: Protocol, G: Decide> Engine<P, G> {
    /// Records a request travelling `dir`, or says the table is full (`max_in_flight`
    /// already waiting). A request reusing the id of one still in flight is not recorded
    /// (the first keeps the id, so that an answer is never linked to a call it does not
    /// answer) and is no error here: it is passed on as the peer sent it.
    pub(super) fn register(
        &self,
        dir: Direction,
        id: &Id,
        held: bool,
        tracked: Option<Tracked>,
    ) -> Result<(), Full> {
        let mut pending = lock(&self.pending[dir.index()]);
        let key = id.to_string();
        if pending.contains_key(&key) {
            tracing::warn!(%id, "a request reused the id of one still in flight");
            return Ok(());
        }
        if pending.len() >= self.options.max_in_flight {
            return Err(Full);
        }
        let id = id.clone();
        pending.insert(key, InFlight { id, held, tracked });
        Ok(())
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
