//! A decision once the gate has dealt with it: what the agent's side (a hook's rendering, a
//! stream proxy, a PATH shim) carries out. It has no `defer`, and an escalation is an
//! [`Final::Ask`], so that those who carry a decision out have no arm for a state that
//! cannot reach them.

use serde_json::{Map, Value};

use super::Verdict;

/// A verdict once the gate has dealt with it, as the agent's side carries it out: a `defer`
/// was asked again or fell to the fail mode, and an `escalate` was put to a person, except
/// where the agent has its own way to ask one ([`Final::Ask`]). Hook renderings and stream
/// proxies take this, so that they have no arm for a state that cannot reach them.
#[derive(Debug, Clone, PartialEq)]
pub enum Final {
    /// Proceed (see [`Verdict::Allow`]).
    Allow {
        /// Whether the harness (or a person) allowed on purpose; only then may a framework
        /// skip the agent's own permission prompt.
        explicit: bool,
        /// The payload to run instead of the agent's own, if any.
        modified_payload: Option<Value>,
        /// The decision object's other fields (e.g. `additional_context`), for frameworks
        /// that can pass them on.
        extra: Map<String, Value>,
    },
    /// Do not proceed; the reason is shown to the agent.
    Block {
        /// Why, as the agent is told.
        reason: String,
    },
    /// Proceed with this payload instead.
    Modify {
        /// The payload to run (an object).
        modified_payload: Value,
    },
    /// The agent asks its own person (its native "ask"), for this reason.
    Ask {
        /// What the person is asked about.
        reason: String,
        /// Who should decide, if the harness named anyone (`escalation_target`).
        target: Option<String>,
    },
}

impl From<Verdict> for Final {
    /// What the gate hands on. A `defer` never comes out of the gate; should one, it is a
    /// block, as the stream proxies always treated it: nothing runs on a decision not made.
    fn from(verdict: Verdict) -> Final {
        match verdict {
            Verdict::Allow {
                explicit,
                modified_payload,
                extra,
            } => Final::Allow {
                explicit,
                modified_payload,
                extra,
            },
            Verdict::Block { reason } => Final::Block { reason },
            Verdict::Modify { modified_payload } => Final::Modify { modified_payload },
            Verdict::Escalate { reason, target } => Final::Ask { reason, target },
            Verdict::Defer { reason, .. } => Final::Block {
                reason: reason.unwrap_or_else(|| {
                    "ahp-wrap blocked this because the decision was deferred and never made"
                        .to_owned()
                }),
            },
        }
    }
}

impl From<Final> for Verdict {
    fn from(f: Final) -> Verdict {
        match f {
            Final::Allow {
                explicit,
                modified_payload,
                extra,
            } => Verdict::Allow {
                explicit,
                modified_payload,
                extra,
            },
            Final::Block { reason } => Verdict::Block { reason },
            Final::Modify { modified_payload } => Verdict::Modify { modified_payload },
            Final::Ask { reason, target } => Verdict::Escalate { reason, target },
        }
    }
}

impl Final {
    /// "No objection" (see [`Verdict::no_opinion`]).
    pub fn no_opinion() -> Final {
        Final::from(Verdict::no_opinion())
    }

    /// The decision's wire name (an `Ask` is the harness's `escalate`).
    pub fn name(&self) -> &'static str {
        match self {
            Final::Allow { .. } => "allow",
            Final::Block { .. } => "block",
            Final::Modify { .. } => "modify",
            Final::Ask { .. } => "escalate",
        }
    }

    /// The payload the agent should run instead of its own, if any.
    pub fn replacement(&self) -> Option<&Value> {
        match self {
            Final::Allow {
                modified_payload, ..
            } => modified_payload.as_ref(),
            Final::Modify { modified_payload } => Some(modified_payload),
            _ => None,
        }
    }

    /// The human-readable reason carried by the decision, if any.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Final::Block { reason } | Final::Ask { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// The decision as an AHP decision object.
    pub fn to_json(&self) -> Value {
        self.clone().into_json()
    }

    /// [`Final::to_json`], for a decision no longer needed: nothing of it is copied first.
    pub fn into_json(self) -> Value {
        Verdict::from(self).to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_leaves_the_gate_has_no_defer_and_an_escalation_is_an_ask() {
        let ask = Verdict::Escalate {
            reason: "ops".into(),
            target: Some("oncall".into()),
        };
        let f = Final::from(ask.clone());
        assert_eq!(
            f,
            Final::Ask {
                reason: "ops".into(),
                target: Some("oncall".into())
            }
        );
        assert_eq!((f.name(), f.reason()), ("escalate", Some("ops")));
        assert_eq!(Verdict::from(f), ask);
        let deferred = Verdict::Defer {
            retry_after_ms: 5,
            reason: Some("later".into()),
        };
        assert_eq!(
            Final::from(deferred),
            Final::Block {
                reason: "later".into()
            }
        );
        let modify = Verdict::Modify {
            modified_payload: json!({"command": "ls"}),
        };
        let f = Final::from(modify.clone());
        assert_eq!(f.replacement(), Some(&json!({"command": "ls"})));
        assert_eq!(f.to_json(), modify.to_json());
    }
}
