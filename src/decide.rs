//! From an event to a final verdict: ask the harness, re-ask on `defer`, take `escalate`
//! to a person, and apply the fail mode with a reason that names the cause.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::ask::Asker;
use crate::client::{Client, Fault};
use crate::policy::Policy;
use crate::protocol::{parse_decision, Event, Verdict};

/// What happens when no valid decision arrives in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailMode {
    /// Block the action (the default).
    Closed,
    /// Let the action proceed, as if the harness had no opinion.
    Open,
}

/// How the embedded policy is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Decisions are enforced.
    Enforce,
    /// Nothing is blocked or changed; what would have been is recorded.
    Observe,
}

/// The embedded harness: a policy and the mode it runs in.
pub struct Embedded {
    policy: std::sync::OnceLock<Policy>,
    workspace: Option<std::path::PathBuf>,
    /// This run's own files and processes, protected by the policy's `wrapper` rules.
    protected: std::sync::OnceLock<crate::policy::Protected>,
    pub mode: Mode,
}

/// A decision of the embedded harness.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedDecision {
    pub verdict: Verdict,
    /// `policy:<rule>`, or `policy` when no rule matched.
    pub source: String,
    /// In observe mode: what would have happened.
    pub note: Option<String>,
}

impl Embedded {
    /// An embedded harness with this policy.
    pub fn new(policy: Policy, mode: Mode) -> Embedded {
        Embedded {
            policy: std::sync::OnceLock::from(policy),
            workspace: None,
            protected: std::sync::OnceLock::new(),
            mode,
        }
    }

    /// The compiled-in default policy, with `workspace` as the workspace root; it is built
    /// on the first event, so that a run with no hook calls never pays for it.
    pub fn default_policy(workspace: Option<std::path::PathBuf>, mode: Mode) -> Embedded {
        Embedded {
            policy: std::sync::OnceLock::new(),
            workspace,
            protected: std::sync::OnceLock::new(),
            mode,
        }
    }

    /// Names this run's own files (executables, run directory) and processes (the wrapper,
    /// its guardian) for the policy to protect. Set once, before the agent starts.
    pub fn protect(&self, protected: crate::policy::Protected) {
        let _ = self.protected.set(protected);
    }

    fn policy(&self) -> &Policy {
        self.policy.get_or_init(|| {
            let p = Policy::default_policy();
            match &self.workspace {
                Some(ws) => p.with_workspace(ws),
                None => p,
            }
        })
    }

    /// Evaluates one event under the mode.
    pub fn decide(&self, event: &Event) -> EmbeddedDecision {
        let d = self.policy().evaluate_with(event, self.protected.get());
        let source = match &d.rule {
            Some(rule) => format!("policy:{rule}"),
            None => "policy".to_owned(),
        };
        let acts = !matches!(
            &d.verdict,
            Verdict::Allow {
                modified_payload: None,
                ..
            }
        );
        if self.mode == Mode::Observe && acts {
            let why = d
                .verdict
                .reason()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            return EmbeddedDecision {
                verdict: Verdict::no_opinion(),
                source,
                note: Some(format!(
                    "{}{}{why}",
                    crate::audit::OBSERVE_PREFIX,
                    d.verdict.name()
                )),
            };
        }
        EmbeddedDecision {
            verdict: d.verdict,
            source,
            note: None,
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
}

/// The final answer for one blocking event.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub verdict: Verdict,
    /// Who decided: `policy:<rule>`, `policy`, `harness`, `person`, or `fail-mode`.
    pub source: String,
    /// Why the verdict is not the harness's own: the fail mode's cause, or what observe
    /// mode did not enforce.
    pub cause: Option<String>,
    pub latency: Duration,
}

/// The smallest pause between two asks after a `defer`, so that `retry_after_ms: 0`
/// cannot spin.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// Decides blocking events.
#[derive(Clone)]
pub struct Decider {
    pub harness: Harness,
    pub fail_mode: FailMode,
    /// The deadline for one event, start to final decision (re-asks included).
    pub timeout: Duration,
    /// A person at a terminal, when there is one.
    pub asker: Option<Asker>,
}

impl Decider {
    /// Resolves one blocking event. `native_ask` says whether the framework can ask the
    /// user itself, in which case `escalate` is returned for it to render.
    pub async fn resolve(&self, event: &Event, native_ask: bool) -> Resolution {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let mut note = None;
        loop {
            let (answer, source) = match &self.harness {
                Harness::Embedded(embedded) => {
                    let d = embedded.decide(event);
                    note = d.note;
                    (Ok(d.verdict), d.source)
                }
                Harness::Remote(client) => {
                    let answer = client.event(event, deadline).await.and_then(|result| {
                        parse_decision(event.event_type, &result).map_err(Fault::from)
                    });
                    (answer, "harness".to_owned())
                }
            };
            let verdict = match answer {
                Ok(v) => v,
                Err(fault) => return self.fail(fault.to_string(), start),
            };
            match verdict {
                Verdict::Defer {
                    retry_after_ms,
                    reason,
                } => {
                    let wait = Duration::from_millis(retry_after_ms).max(MIN_RETRY);
                    if Instant::now() + wait >= deadline {
                        let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
                        return self.fail(
                            format!(
                                "the harness deferred (retry after {retry_after_ms} ms{why}) past the {} ms deadline",
                                self.timeout.as_millis()
                            ),
                            start,
                        );
                    }
                    tokio::time::sleep(wait).await;
                }
                Verdict::Escalate { reason, target } if !native_ask => {
                    return match &self.asker {
                        Some(asker) => {
                            let yes = asker.ask(event, &reason, target.as_deref()).await;
                            let verdict = match yes {
                                Ok(true) => Verdict::Allow {
                                    explicit: true,
                                    modified_payload: None,
                                    extra: Default::default(),
                                },
                                Ok(false) => Verdict::Block {
                                    reason: format!("declined at the terminal ({reason})"),
                                },
                                Err(e) => {
                                    return self.fail(
                                        format!(
                                            "the harness escalated ({reason}) and the terminal prompt failed: {e}"
                                        ),
                                        start,
                                    )
                                }
                            };
                            Resolution {
                                verdict,
                                source: "person".to_owned(),
                                cause: None,
                                latency: start.elapsed(),
                            }
                        }
                        None => self.fail(
                            format!(
                                "the harness escalated ({reason}) and no person can answer here (no terminal)"
                            ),
                            start,
                        ),
                    };
                }
                verdict => {
                    return Resolution {
                        verdict,
                        source,
                        cause: note,
                        latency: start.elapsed(),
                    }
                }
            }
        }
    }

    /// The fail mode's verdict, with the cause in the reason.
    pub fn fail(&self, cause: String, start: Instant) -> Resolution {
        let verdict = match self.fail_mode {
            FailMode::Closed => Verdict::Block {
                reason: format!("ahp-wrap blocked this because {cause} (fail mode: closed)"),
            },
            FailMode::Open => {
                tracing::warn!("allowing because {cause} (fail mode: open)");
                Verdict::no_opinion()
            }
        };
        Resolution {
            verdict,
            source: "fail-mode".to_owned(),
            cause: Some(cause),
            latency: start.elapsed(),
        }
    }
}
