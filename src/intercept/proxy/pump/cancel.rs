//! Decisions a peer may cut short: a held call that names a *scope* (ACP: its session)
//! waits for its decision or for that scope's cancellation (ACP: `session/cancel`),
//! whichever comes first. A cancelled call is answered by the protocol's
//! [`Protocol::cancelled`](crate::intercept::proxy::protocol::Protocol::cancelled) and never forwarded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::lock;

/// The held calls waiting in each scope. Bounded like the calls themselves: one entry per
/// held call, removed when it is decided or cancelled.
#[derive(Default)]
pub(super) struct Cancels {
    next: AtomicU64,
    waiting: Mutex<HashMap<String, Waiters>>,
}

/// The held calls of one scope, each with its token and how to wake it.
type Waiters = Vec<(u64, oneshot::Sender<()>)>;

impl Cancels {
    /// Registers a held call in `scope`; dropping the returned watch unregisters it.
    pub(super) fn watch(&self, scope: &str) -> Watch<'_> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting)
            .entry(scope.to_owned())
            .or_default()
            .push((token, tx));
        Watch {
            cancels: self,
            scope: scope.to_owned(),
            token,
            fired: rx,
        }
    }

    /// Cancels every call held in `scope`; returns how many there were.
    pub(super) fn cancel(&self, scope: &str) -> usize {
        let waiting = lock(&self.waiting).remove(scope).unwrap_or_default();
        let n = waiting.len();
        for (_, tx) in waiting {
            let _ = tx.send(());
        }
        n
    }
}

/// One held call's registration.
pub(super) struct Watch<'a> {
    cancels: &'a Cancels,
    scope: String,
    token: u64,
    fired: oneshot::Receiver<()>,
}

impl Watch<'_> {
    /// Completes when the call's scope is cancelled.
    pub(super) async fn cancelled(&mut self) {
        if (&mut self.fired).await.is_err() {
            // The sender is only dropped by `cancel` after sending, or with the whole
            // engine: never complete on its own.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut waiting = lock(&self.cancels.waiting);
        if let Some(list) = waiting.get_mut(&self.scope) {
            list.retain(|(t, _)| *t != self.token);
            if list.is_empty() {
                waiting.remove(&self.scope);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_wakes_the_calls_of_its_scope_only_and_leaves_nothing_behind() {
        let cancels = Cancels::default();
        let mut a = cancels.watch("s1");
        let mut b = cancels.watch("s1");
        let mut other = cancels.watch("s2");
        assert_eq!(cancels.cancel("s1"), 2);
        a.cancelled().await;
        b.cancelled().await;
        let still = tokio::time::timeout(std::time::Duration::from_millis(50), other.cancelled());
        assert!(still.await.is_err(), "s2 was not cancelled");
        drop((a, b, other));
        assert!(lock(&cancels.waiting).is_empty());
        assert_eq!(cancels.cancel("s1"), 0);
    }
}
