//! The gate's two shapes of an answer: what one harness said ([`Answer`], which may still
//! be a `defer` or an `escalate`), and the one decision that flows out of the gate
//! ([`Decision`], whose verdict is [`Final`]: what the interceptors carry out as it is).

use std::fmt;
use std::time::Duration;

use super::approve::Answerer;
use crate::protocol::{Final, Verdict};

/// Who gave a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecidedBy {
    /// The embedded policy; the rule that matched, if one did.
    Policy(Option<String>),
    /// A harness over a transport.
    Harness,
    /// A person: at the wrapper's terminal (`None`), or an authenticated client of the
    /// Agent Host Protocol host (who, and from where).
    Person(Option<Answerer>),
    /// The fail mode, because no valid decision arrived.
    FailMode,
    /// Nobody: the call's sender cancelled it before a decision arrived, so it was never
    /// carried out.
    Cancelled,
    /// The floor's own rules (`[floor.net]`), which no harness can overrule.
    Floor,
}

impl fmt::Display for DecidedBy {
    /// As the audit log's `source` field writes it: `policy:<rule>`, `policy`, `harness`,
    /// `person` (the terminal), `person:<who>@<from>`, `fail-mode`, `cancelled` or `floor`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecidedBy::Policy(Some(rule)) => write!(f, "policy:{rule}"),
            DecidedBy::Policy(None) => f.write_str("policy"),
            DecidedBy::Harness => f.write_str("harness"),
            DecidedBy::Person(None) => f.write_str("person"),
            DecidedBy::Person(Some(a)) => write!(f, "person:{}@{}", a.who, a.from),
            DecidedBy::FailMode => f.write_str("fail-mode"),
            DecidedBy::Cancelled => f.write_str("cancelled"),
            DecidedBy::Floor => f.write_str("floor"),
        }
    }
}

/// One answer of whoever decides (the embedded policy, a harness, the wrapping run), before
/// `defer` and `escalate` are dealt with: the gate turns it into its [`Decision`] once.
#[derive(Debug)]
pub(crate) struct Answer {
    /// What it answered (observe mode's no opinion where that stepped in).
    pub verdict: Verdict,
    /// Who answered.
    pub by: DecidedBy,
    /// Why the verdict differs from what the policy said (observe mode), or who decided
    /// behind the harness (the wrapping run).
    pub note: Option<String>,
    /// What observe mode would have enforced, where it let the event through.
    pub observed: Option<&'static str>,
    /// What the command discards, when the embedded policy's `reversible` rules alone
    /// escalated it.
    pub reach: Option<crate::policy::Reach>,
}

impl Answer {
    /// The answer `verdict` of `by`, with no note.
    pub(crate) fn new(verdict: Verdict, by: DecidedBy) -> Answer {
        Answer {
            verdict,
            by,
            note: None,
            observed: None,
            reach: None,
        }
    }
}

/// The gate's final answer for one event: what to enforce, who decided it, and why it is
/// not the decider's own verdict when it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The verdict to enforce (the fail mode's or observe mode's where they stepped in), as
    /// the interceptors carry it out: no `defer`, and an `escalate` only as [`Final::Ask`]
    /// for an interceptor that asks the person itself.
    pub verdict: Final,
    /// Who gave it; the audit log's `source`.
    pub by: DecidedBy,
    /// Why the verdict differs from what the decider said: the fail mode's cause, or what
    /// observe mode did not enforce. Recorded as the audit reason when the verdict has none.
    pub note: Option<String>,
    /// What observe mode would have enforced (the verdict's name: `block`, `modify`,
    /// `escalate`) where it let the event through instead.
    pub observed: Option<&'static str>,
    /// From the event's arrival to the final verdict (re-asks and a person's answer
    /// included).
    pub latency: Duration,
}

impl Decision {
    /// This decision as the audit log records it.
    pub(crate) fn ruling(&self) -> crate::audit::Ruling<'_> {
        crate::audit::Ruling {
            verdict: &self.verdict,
            source: self.by.to_string(),
            note: self.note.as_deref(),
            observed: self.observed,
            latency: self.latency,
            reversible: None,
        }
    }

    /// A decision with no note, taken in `latency`.
    pub(crate) fn new(verdict: Final, by: DecidedBy, latency: Duration) -> Decision {
        Decision {
            verdict,
            by,
            note: None,
            observed: None,
            latency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_decided_is_written_as_the_audit_log_has_always_written_it() {
        assert_eq!(
            DecidedBy::Policy(Some("no-rm".into())).to_string(),
            "policy:no-rm"
        );
        assert_eq!(DecidedBy::Policy(None).to_string(), "policy");
        assert_eq!(DecidedBy::Harness.to_string(), "harness");
        assert_eq!(DecidedBy::Person(None).to_string(), "person");
        let alice = Answerer {
            who: "alice".into(),
            from: "10.0.0.7:5123".into(),
        };
        assert_eq!(
            DecidedBy::Person(Some(alice)).to_string(),
            "person:alice@10.0.0.7:5123"
        );
        assert_eq!(DecidedBy::FailMode.to_string(), "fail-mode");
        assert_eq!(DecidedBy::Cancelled.to_string(), "cancelled");
    }
}
