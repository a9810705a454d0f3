//! From an event to a final verdict: ask the harness, re-ask on `defer`, take `escalate`
//! to a person, and apply the fail mode with a reason that names the cause.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::approve::{Approval, Approver, Escalation};
use super::decision::{Answer, DecidedBy, Decision};
use super::embedded::Embedded;
use super::reversible::Judge;
use crate::client::{Client, Fault};
use crate::protocol::{parse_decision, Event, Final, Verdict};

/// What happens when no valid decision arrives in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Block the action (the default).
    Closed,
    /// Let the action proceed, as if the harness had no opinion.
    Open,
}

impl FailMode {
    /// As the command line spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FailMode::Closed => "closed",
            FailMode::Open => "open",
        }
    }
}

/// Who answers.
#[derive(Clone)]
pub enum Harness {
    /// The embedded policy engine.
    Embedded(Arc<Embedded>),
    /// A harness over a transport.
    Remote(Client),
    /// The run this wrapper was started in (`--via-run`): it decides, and audits.
    Parent(super::ParentRun),
}

/// The smallest pause between two asks after a `defer`, so that `retry_after_ms: 0`
/// cannot spin.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// Decides blocking events.
#[derive(Clone)]
pub struct Decider {
    /// Who is asked first: the embedded policy, a remote harness, or the wrapping run.
    pub harness: Harness,
    /// `--fail-mode`: what an event gets when no valid decision arrives in time.
    pub fail_mode: FailMode,
    /// The deadline for one event, start to final decision (re-asks included).
    pub timeout: Duration,
    /// Who answers an escalation: a person at the terminal, or the clients of the Agent
    /// Host Protocol host; `None`: nobody (escalations fall to the fail mode).
    pub approver: Option<Arc<dyn Approver>>,
}

impl Decider {
    /// Resolves one blocking event. `native_ask` says whether the interceptor can ask the
    /// user itself, in which case `escalate` is returned for it to render. An escalation
    /// `judge` finds reversible is allowed instead ([`super::reversible`]).
    pub(crate) async fn resolve(
        &self,
        event: &Event,
        native_ask: bool,
        judge: &Judge<'_>,
    ) -> Decision {
        let start = Instant::now();
        let deadline = start + self.timeout;
        loop {
            let mut answer = match self.ask(event, deadline).await {
                Ok(a) => a,
                Err(fault) => return self.fail(fault.to_string(), start),
            };
            if let (Verdict::Escalate { reason, .. }, Some(reach)) =
                (&mut answer.verdict, answer.reach.take())
            {
                match judge.allow(&reach, &answer.by, start).await {
                    Ok(allowed) => return allowed,
                    Err(Some(why)) => reason.push_str(&format!(" (not reversible: {why})")),
                    Err(None) => {}
                }
            }
            match answer.verdict {
                Verdict::Defer {
                    retry_after_ms,
                    reason,
                } => {
                    let wait = Duration::from_millis(retry_after_ms).max(MIN_RETRY);
                    if Instant::now() + wait >= deadline {
                        let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
                        let cause = format!(
                            "the harness deferred (retry after {retry_after_ms} ms{why}) past the {} ms deadline",
                            self.timeout.as_millis()
                        );
                        return self.fail(cause, start);
                    }
                    tokio::time::sleep(wait).await;
                }
                Verdict::Escalate { reason, target } if !native_ask => {
                    let rule = match &answer.by {
                        DecidedBy::Policy(rule) => rule.as_deref(),
                        _ => None,
                    };
                    let escalation = Escalation {
                        event,
                        reason: &reason,
                        target: target.as_deref(),
                        rule,
                        deadline,
                    };
                    return self.escalate(escalation, start).await;
                }
                // The one place a verdict becomes what the interceptors carry out.
                verdict => {
                    return Decision {
                        verdict: Final::from(verdict),
                        by: answer.by,
                        note: answer.note,
                        observed: answer.observed,
                        latency: start.elapsed(),
                    }
                }
            }
        }
    }

    /// One ask of whoever answers.
    async fn ask(&self, event: &Event, deadline: Instant) -> Result<Answer, Fault> {
        match &self.harness {
            Harness::Embedded(embedded) => Ok(embedded.decide(event)),
            Harness::Parent(run) => {
                let sent = Instant::now();
                let result = tokio::time::timeout_at(deadline, run.decide(event))
                    .await
                    .map_err(|_| Fault::Timeout(self.timeout.as_millis() as u64))??;
                crate::telemetry::harness_round_trip(sent.elapsed());
                let verdict = parse_decision(event.event_type, &result)?;
                Ok(Answer {
                    note: Some("decided by the wrapping run".into()),
                    ..Answer::new(verdict, DecidedBy::Harness)
                })
            }
            Harness::Remote(client) => {
                let sent = Instant::now();
                let result = client.event(event, deadline).await?;
                crate::telemetry::harness_round_trip(sent.elapsed());
                let verdict = parse_decision(event.event_type, &result)?;
                Ok(Answer::new(verdict, DecidedBy::Harness))
            }
        }
    }

    /// Escalates `event` for `reason` without asking the harness first (the floor's own
    /// escalation), to whoever can answer it.
    pub(crate) async fn escalate_for(&self, event: &Event, reason: &str) -> Decision {
        let start = Instant::now();
        let escalation = Escalation {
            event,
            reason,
            target: None,
            rule: None,
            deadline: start + self.timeout,
        };
        self.escalate(escalation, start).await
    }

    /// Takes an escalation to whoever can answer it, or to the fail mode without one.
    async fn escalate(&self, escalation: Escalation<'_>, start: Instant) -> Decision {
        let reason = escalation.reason.to_owned();
        let Some(approver) = &self.approver else {
            let cause = format!(
                "escalated to a person ({reason}), and no person can answer here (no terminal)"
            );
            return self.fail(cause, start);
        };
        let pending = crate::telemetry::escalation_started();
        let said = approver.approve(escalation).await;
        let outcome = match &said {
            Approval::Allow { .. } => "allowed",
            Approval::Deny { .. } => "denied",
            Approval::Unanswered(_) => "unanswered",
        };
        if let Some(pending) = pending {
            pending.answered(outcome);
        }
        let (verdict, by) = match said {
            Approval::Allow { by } => (
                Final::Allow {
                    explicit: true,
                    modified_payload: None,
                    extra: Default::default(),
                },
                by,
            ),
            Approval::Deny { by, reason } => (Final::Block { reason }, by),
            Approval::Unanswered(cause) => return self.fail(cause, start),
        };
        let allowed = matches!(verdict, Final::Allow { .. });
        let mut decision = Decision::new(verdict, DecidedBy::Person(by), start.elapsed());
        if allowed {
            // The question is in the record with its answer (a refusal's reason says both).
            decision.note = Some(format!("escalated to a person ({reason}), who allowed it"));
        }
        decision
    }

    /// The fail mode's verdict, with the cause in the reason.
    pub(crate) fn fail(&self, cause: String, start: Instant) -> Decision {
        crate::telemetry::fail_mode(self.fail_mode.name());
        let verdict = match self.fail_mode {
            FailMode::Closed => Final::Block {
                reason: format!("ahp-wrap blocked this because {cause} (fail mode: closed)"),
            },
            FailMode::Open => {
                tracing::warn!("allowing because {cause} (fail mode: open)");
                Final::no_opinion()
            }
        };
        Decision {
            verdict,
            by: DecidedBy::FailMode,
            note: Some(cause),
            observed: None,
            latency: start.elapsed(),
        }
    }
}
