//! The embedded default harness. Until the policy engine lands this is an allow-all
//! stand-in that answers "no opinion" to everything (every decision is still audited).

use crate::protocol::{Event, Verdict};

/// A decision of the embedded harness, with the rule that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDecision {
    pub verdict: Verdict,
    /// The id of the rule that decided, `None` for "no rule matched".
    pub rule: Option<String>,
}

/// The embedded policy engine.
#[derive(Debug, Default)]
pub struct Policy {}

impl Policy {
    /// The allow-all stand-in.
    pub fn allow_all() -> Policy {
        Policy {}
    }

    /// Evaluates one event.
    pub fn evaluate(&self, event: &Event) -> PolicyDecision {
        let _ = event;
        PolicyDecision {
            verdict: Verdict::no_opinion(),
            rule: None,
        }
    }
}

impl Policy {
    /// Stand-in until the policy engine lands.
    pub fn default_policy() -> Policy {
        Policy::allow_all()
    }

    /// Stand-in until the policy engine lands.
    pub fn load(_path: &std::path::Path) -> Result<Policy, std::io::Error> {
        Ok(Policy::allow_all())
    }
}
