//! Calls that only discard what the run's checkpoints keep, allowed: an escalation by
//! `reversible` rules alone (the policy's [`Reach`] says what the command discards) becomes
//! an explicit allow once the checkpoint before the call is taken and
//! [`Checkpointer::covers`] finds all of it kept; the decision's note and its audit record name
//! the `ahp-wrap undo` that brings it back, and the run's summary says it again. Anything
//! else (no checkpoints, the checkpoint not taken, a path not covered) leaves the escalation
//! as it was, with why it is not reversible added to its reason when checkpoints are kept.

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::decision::{DecidedBy, Decision};
use crate::audit::Reversible;
use crate::checkpoint::Checkpointer;
use crate::policy::Reach;
use crate::protocol::{Event, Final};

/// The checkpoint before one call, and the judgement of whether what the call discards is in
/// it.
pub(crate) struct Judge<'a> {
    /// The run's checkpoints, when it keeps them.
    checkpoints: Option<Arc<Checkpointer>>,
    /// The checkpoint before the call: being taken, or taken (its number).
    before: tokio::sync::Mutex<Before>,
    /// The run's id, which `undo --run` takes.
    run: &'a str,
    /// The call.
    event: &'a Event,
    /// What made the call reversible, once it was judged so.
    reversal: Mutex<Option<Reversible>>,
}

enum Before {
    Taking(JoinHandle<Option<u64>>),
    Taken(Option<u64>),
}

impl<'a> Judge<'a> {
    /// The judge of `event`, whose checkpoint `before` is being taken (none: no checkpoint
    /// before it).
    pub(crate) fn new(
        checkpoints: Option<Arc<Checkpointer>>,
        before: Option<JoinHandle<Option<u64>>>,
        run: &'a str,
        event: &'a Event,
    ) -> Judge<'a> {
        Judge {
            checkpoints,
            before: tokio::sync::Mutex::new(match before {
                Some(taking) => Before::Taking(taking),
                None => Before::Taken(None),
            }),
            run,
            event,
            reversal: Mutex::new(None),
        }
    }

    /// Waits for the checkpoint before the call: its number, `None` when none was taken.
    pub(crate) async fn taken(&self) -> Option<u64> {
        let mut before = self.before.lock().await;
        if let Before::Taking(taking) = &mut *before {
            let n = taking.await.ok().flatten();
            *before = Before::Taken(n);
        }
        match *before {
            Before::Taken(n) => n,
            Before::Taking(_) => None,
        }
    }

    /// For an escalation by `by` of a call that discards `reach`: an explicit allow when the
    /// checkpoint before it keeps all of that; else why not (`None`: the run keeps no
    /// checkpoints, and the escalation stands as it is).
    pub(crate) async fn allow(
        &self,
        reach: &Reach,
        by: &DecidedBy,
        start: Instant,
    ) -> Result<Decision, Option<String>> {
        let Some(checkpoints) = self.checkpoints.clone() else {
            return Err(None);
        };
        let Some(n) = self.taken().await else {
            return Err(Some("no checkpoint was taken before it".into()));
        };
        let reach = reach.clone();
        let judged = tokio::task::spawn_blocking(move || checkpoints.covers(&reach))
            .await
            .unwrap_or_else(|_| Err("the judgement failed".into()));
        if let Err(why) = judged {
            tracing::info!("not reversible: {why}");
            return Err(Some(why));
        }
        let undo = format!("ahp-wrap undo --run {} --to {n}", self.run);
        if let Some(checkpoints) = &self.checkpoints {
            let what = crate::checkpoint::summary(self.event.payload.get("arguments"));
            checkpoints.note_reversed(n, what, undo.clone());
        }
        let note = format!(
            "reversible: checkpoint {n} keeps everything it discards; `{undo}` brings it back"
        );
        if let Ok(mut reversal) = self.reversal.lock() {
            *reversal = Some(Reversible {
                checkpoint: n,
                undo,
            });
        }
        let mut decision = Decision::new(
            Final::Allow {
                explicit: true,
                modified_payload: None,
                extra: Default::default(),
            },
            by.clone(),
            start.elapsed(),
        );
        decision.note = Some(note);
        Ok(decision)
    }

    /// What made the call reversible, when [`Judge::allow`] allowed it.
    pub(crate) fn reversal(&self) -> Option<Reversible> {
        self.reversal.lock().ok().and_then(|r| r.clone())
    }
}
