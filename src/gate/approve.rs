//! Escalations to a person: who can answer one ([`Approver`]: the terminal, or the Agent
//! Host Protocol host's clients), what they are asked ([`Escalation`]) and what they said
//! ([`Approval`]).

use std::future::Future;
use std::pin::Pin;

use tokio::time::Instant;

use super::decision::Decision;
use crate::protocol::Event;

/// One escalated event, as a person is asked about it.
pub struct Escalation<'a> {
    /// The blocking event the harness escalated.
    pub event: &'a Event,
    /// Why the harness wants a person.
    pub reason: &'a str,
    /// The harness's `escalation_target`, if it named one.
    pub target: Option<&'a str>,
    /// The policy rule that escalated, when the embedded policy did.
    pub rule: Option<&'a str>,
    /// When the gate stops waiting: no answer by then is no answer.
    pub deadline: Instant,
}

/// Who answered, as authenticated, and from where (for the audit log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answerer {
    /// The name of the client token that answered (its NAME in `--host-token` or the
    /// token file).
    pub who: String,
    /// The client's network address, e.g. `10.0.0.7:5123`.
    pub from: String,
}

/// What a person said. `by` is `None` for the wrapper's own terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Let the event through (an explicit allow).
    Allow {
        /// Who allowed it; `None`: the terminal.
        by: Option<Answerer>,
    },
    /// Block the event.
    Deny {
        /// Who denied it; `None`: the terminal.
        by: Option<Answerer>,
        /// The block's reason: where it was declined, and the escalation's reason (with
        /// the person's message, if any).
        reason: String,
    },
    /// Nobody answered (in time, or at all): why, for the fail mode's reason.
    Unanswered(String),
}

/// A boxed future, so that [`Approver`] can be used as a trait object.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Someone who can answer an escalation. The gate also shows it every event and decision
/// ([`Approver::observe`]), so that a remote approver can show what the agent is doing.
pub trait Approver: Send + Sync {
    /// Asks about one escalation; resolves by `escalation.deadline` at the latest.
    fn approve<'a>(&'a self, escalation: Escalation<'a>) -> BoxFuture<'a, Approval>;

    /// An event the gate saw, with its decision when it was a blocking one.
    fn observe(&self, _event: &Event, _decision: Option<&Decision>) {}
}
