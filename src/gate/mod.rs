//! The gate: the one place that turns an AHP event into an enforced verdict.
//!
//! Owns: who answers ([`Harness`]: the embedded policy or a harness over a transport), the
//! re-asks on `defer`, `escalate` to a person (or, for what the run's checkpoints keep whole,
//! an allow that names its `undo`: [`reversible`]), the fail mode, and the rule that a decision
//! is durable in the audit log before it is enforced. Also the run's state that its decisions
//! make and read: the events counted, the hosts a person allowed (which the floor's egress
//! proxy does not ask about again), the floor's refusals the agent's tools met
//! ([`FloorMet`]), and the run's checkpoints once it takes them (one before each call that
//! may write). The embedded policy's own state (what each session wrote, what the run said
//! of itself) is its [`Embedded`] harness's session, beside a policy no decision changes.
//!
//! An answer takes two shapes here: what whoever answers said ([`decision::Answer`], which
//! may still be a `defer` or an `escalate`), then, once, the [`Decision`] every interceptor
//! (hooks, the MCP and ACP stream proxies, PATH shims, the floor's egress proxy) gets back
//! for an event it built here, whose verdict is the [`Final`] it carries out as it is.
//!
//! Must not touch: how an event reaches us or how a verdict is rendered to the agent (that
//! is each interceptor's), the policy's rules (`policy/`), or the audit file's format
//! (`audit/`).

mod approve;
mod decision;
mod embedded;
mod floor_met;
mod parent;
mod resolve;
mod reversible;

pub(crate) use approve::{Answerer, Approval, Approver, BoxFuture, Escalation};
pub(crate) use decision::{DecidedBy, Decision};
pub use embedded::{Embedded, Mode};
pub use floor_met::{FloorMet, Told};
pub use parent::{ParentRun, SCOPE as PARENT_SCOPE};
pub use resolve::{Decider, FailMode, Harness};

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::audit::{AuditPeer, Auditor};
use crate::protocol::{now_rfc3339, Event, EventType, Final};

/// Where an event came from, for the audit record.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    /// The agent's own session id, when it reported one.
    pub framework_session: Option<String>,
    /// The process that sent it (a hook's), as the kernel vouches for it.
    pub peer: Option<AuditPeer>,
}

/// One wrapped run as the harness sees it: its ids and depth, who decides, and the audit
/// log every event goes through.
pub struct Gate {
    /// Every event's `session_id`: a fresh UUID per run (`serve` for `ahp-wrap serve`).
    pub session_id: String,
    /// Every event's `agent_id`: `<framework>-<uuid>` per run (`serve` for `ahp-wrap serve`).
    pub agent_id: String,
    /// Every event's `depth`: 0 for a top-level agent, one more per wrapper it runs under.
    pub depth: u32,
    /// Who answers blocking events, and the fail mode and deadline that apply.
    pub decider: Decider,
    /// The audit log every event and decision is written to (and the run's counts).
    pub audit: Auditor,
    /// Events seen so far (for heartbeats and the session end).
    events: AtomicU64,
    /// The hosts of tool calls a person allowed in this run (a call the host rules escalated,
    /// say): a connection the tree then makes to one of them is not asked about again.
    approved_hosts: Mutex<HashSet<String>>,
    /// The floor's refusals the agent's tools reported, explained and counted.
    pub floor_met: FloorMet,
    /// The workspace's checkpoints, once the run took its first (one before each tool call
    /// that may write, taken while the call is decided).
    pub checkpoints: std::sync::OnceLock<std::sync::Arc<crate::checkpoint::Checkpointer>>,
}

impl Gate {
    /// A gate with no events seen, no hosts approved and no floor refusals met yet.
    pub fn new(
        session_id: String,
        agent_id: String,
        depth: u32,
        decider: Decider,
        audit: Auditor,
    ) -> Gate {
        Gate {
            session_id,
            agent_id,
            depth,
            decider,
            audit,
            events: AtomicU64::new(0),
            approved_hosts: Mutex::new(HashSet::new()),
            floor_met: FloorMet::default(),
            checkpoints: std::sync::OnceLock::new(),
        }
    }

    /// Whether a person allowed a tool call of this run that contacts `host`.
    pub(crate) fn host_approved(&self, host: &str) -> bool {
        self.approved_hosts
            .lock()
            .is_ok_and(|hosts| hosts.contains(host))
    }

    /// How many events this run has sent or decided.
    pub(crate) fn events_seen(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// An event of this run.
    pub(crate) fn event(
        &self,
        event_type: EventType,
        payload: Value,
        metadata: Map<String, Value>,
    ) -> Event {
        Event {
            event_type,
            session_id: self.session_id.clone(),
            agent_id: self.agent_id.clone(),
            timestamp: now_rfc3339(),
            depth: self.depth,
            payload,
            context: None,
            metadata: (!metadata.is_empty()).then_some(metadata),
        }
    }

    /// Sends a notification to the harness and audits it.
    pub(crate) async fn notify(&self, event: Event, origin: Origin) {
        self.events.fetch_add(1, Ordering::Relaxed);
        let recorded = self
            .audit
            .notified(&event, origin.framework_session, origin.peer);
        if let Err(e) = recorded.await {
            tracing::error!("audit log: {}", crate::error_chain(&e));
        }
        if let Some(approver) = &self.decider.approver {
            approver.observe(&event, None);
        }
        match &self.decider.harness {
            Harness::Remote(client) => client.notify(event),
            Harness::Parent(run) => run.notify(&event).await,
            Harness::Embedded(policy) => policy.observe(&event),
        }
    }

    /// [`Gate::notify`] for an event built from its parts, with no origin (the wrapper's
    /// own events: session start and end, errors, heartbeats).
    pub(crate) async fn say(&self, event_type: EventType, payload: Value) {
        let event = self.event(event_type, payload, Map::new());
        self.notify(event, Origin::default()).await;
    }

    /// Decides a blocking event and makes its audit record durable before returning it.
    /// `native_ask` says whether the interceptor can ask the person itself (then
    /// `escalate` comes back for it to render).
    pub(crate) async fn decide(&self, event: &Event, native_ask: bool, origin: Origin) -> Decision {
        self.decide_within(event, native_ask, origin, None).await
    }

    /// [`Gate::decide`], with a deadline shorter than the decider's when `within` says so
    /// (`serve`, for an event whose sender waits less than `--approval-timeout`).
    pub(crate) async fn decide_within(
        &self,
        event: &Event,
        native_ask: bool,
        origin: Origin,
        within: Option<std::time::Duration>,
    ) -> Decision {
        self.events.fetch_add(1, Ordering::Relaxed);
        // The workspace as it is before the call, kept while the call is decided (its
        // sender waits for the decision anyway); the call runs after both.
        let checkpoint = self.checkpoint_before(event);
        let judge = reversible::Judge::new(
            self.checkpoints.get().cloned(),
            checkpoint,
            &self.session_id,
            event,
        );
        let decision = match within {
            Some(timeout) if timeout < self.decider.timeout => {
                let decider = Decider {
                    timeout,
                    ..self.decider.clone()
                };
                decider.resolve(event, native_ask, &judge).await
            }
            _ => self.decider.resolve(event, native_ask, &judge).await,
        };
        let decision = self
            .conclude(event, decision, origin, judge.reversal().as_ref())
            .await;
        judge.taken().await;
        if matches!(decision.by, DecidedBy::Person(_))
            && matches!(decision.verdict, Final::Allow { .. })
        {
            let hosts = crate::policy::contacted_hosts(event);
            if let Ok(mut approved) = self.approved_hosts.lock() {
                approved.extend(hosts);
            }
        }
        decision
    }

    /// Starts the checkpoint before the tool call `event` asks for, when the run keeps them
    /// and the tool may write.
    fn checkpoint_before(&self, event: &Event) -> Option<tokio::task::JoinHandle<Option<u64>>> {
        if event.event_type != EventType::PreAction {
            return None;
        }
        let checkpoints = self.checkpoints.get()?.clone();
        let tool = event.payload.get("tool_name")?.as_str()?.to_owned();
        if !crate::checkpoint::Checkpointer::wanted(&tool) {
            return None;
        }
        let summary = crate::checkpoint::summary(event.payload.get("arguments"));
        Some(tokio::task::spawn_blocking(move || {
            checkpoints.before(&tool, summary)
        }))
    }

    /// Makes `decision` on `event` durable in the audit log and shows it to the approver;
    /// one that cannot be recorded is not enforced as given: the fail mode's is, recorded.
    /// `reversible`: what made it an allow, when the checkpoints keep what the call discards.
    async fn conclude(
        &self,
        event: &Event,
        decision: Decision,
        origin: Origin,
        reversible: Option<&crate::audit::Reversible>,
    ) -> Decision {
        let Err(e) = self
            .record(event, &decision, origin.clone(), reversible)
            .await
        else {
            return decision;
        };
        let why = crate::error_chain(&e);
        tracing::error!("audit log: {why}");
        let mut failed = self.fail(format!("the audit log cannot be written ({why})"));
        failed.latency = std::time::Duration::ZERO;
        let _ = self
            .audit
            .decided(
                event,
                origin.framework_session,
                &failed.ruling(),
                origin.peer,
            )
            .await;
        failed
    }

    /// Writes the record of `decision` on `event`, then shows the decision to the approver.
    async fn record(
        &self,
        event: &Event,
        decision: &Decision,
        origin: Origin,
        reversible: Option<&crate::audit::Reversible>,
    ) -> Result<(), crate::audit::AuditError> {
        let ruling = crate::audit::Ruling {
            reversible,
            ..decision.ruling()
        };
        self.audit
            .decided(event, origin.framework_session, &ruling, origin.peer)
            .await?;
        if let Some(approver) = &self.decider.approver {
            approver.observe(event, Some(decision));
        }
        Ok(())
    }

    /// Records that the decision on `event` was abandoned, because the call's sender
    /// cancelled it first (`why`): the call was not carried out, which the record says as a
    /// block by [`DecidedBy::Cancelled`], taken after `waited`.
    pub(crate) async fn abandoned(
        &self,
        event: &Event,
        why: String,
        waited: std::time::Duration,
        origin: Origin,
    ) {
        let decision = Decision {
            verdict: Final::Block { reason: why },
            by: DecidedBy::Cancelled,
            note: None,
            observed: None,
            latency: waited,
        };
        let ruling = decision.ruling();
        let recorded = self
            .audit
            .decided(event, origin.framework_session, &ruling, origin.peer);
        if let Err(e) = recorded.await {
            tracing::error!("audit log: {}", crate::error_chain(&e));
        }
    }

    /// Records that the floor refused `event` by its own rules, for `reason` (no harness is
    /// asked: it could not overrule them); returns that decision, a block even when the
    /// audit log cannot be written (no fail mode opens what the floor refuses).
    pub(crate) async fn refused(&self, event: &Event, reason: String, origin: Origin) -> Decision {
        self.events.fetch_add(1, Ordering::Relaxed);
        let decision = Decision::new(
            Final::Block { reason },
            DecidedBy::Floor,
            std::time::Duration::ZERO,
        );
        if let Err(e) = self.record(event, &decision, origin, None).await {
            tracing::error!("audit log: {}", crate::error_chain(&e));
        }
        decision
    }

    /// Decides `event` by a person, as if the policy had escalated it for `reason` (the
    /// floor's `unknown = "ask"`); the decision is durable in the audit log when returned.
    pub(crate) async fn ask_person(
        &self,
        event: &Event,
        reason: String,
        origin: Origin,
    ) -> Decision {
        self.events.fetch_add(1, Ordering::Relaxed);
        let decision = self.decider.escalate_for(event, &reason).await;
        self.conclude(event, decision, origin, None).await
    }

    /// The fail mode's decision, with `cause` in the reason.
    pub(crate) fn fail(&self, cause: String) -> Decision {
        self.decider.fail(cause, Instant::now())
    }
}
