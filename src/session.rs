//! One wrapped run as the harness sees it: ids, depth, the decider and the audit log; and
//! the hook service that turns a shim's call into an event, a decision and a rendering.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::audit::{AuditLog, AuditPeer, AuditRecord, Summary};
use crate::control::{HookHandler, Peer};
use crate::decide::{Decider, Harness, Resolution};
use crate::frameworks::{self, HookContext, Rendered};
use crate::protocol::{now_rfc3339, Event, EventType, Verdict};

/// Writes audit records, durably and in order, and keeps the run's summary. Without an
/// audit file it still counts (for the summary), at no I/O cost.
#[derive(Clone)]
pub struct Auditor {
    log: Arc<Mutex<AuditLog>>,
    durable: bool,
}

impl Default for Auditor {
    fn default() -> Auditor {
        Auditor::new(AuditLog::without_file())
    }
}

impl Auditor {
    pub fn new(log: AuditLog) -> Auditor {
        Auditor {
            durable: log.path().is_some(),
            log: Arc::new(Mutex::new(log)),
        }
    }

    /// Appends one record; returns once it is durable.
    pub async fn record(&self, record: AuditRecord) -> Result<(), String> {
        let log = self.log.clone();
        let append = move || {
            log.lock()
                .map_err(|_| "the audit log lock is poisoned".to_owned())?
                .append(&record)
                .map_err(|e| crate::error_chain(&e))
        };
        if !self.durable {
            return append();
        }
        // fdatasync blocks: keep it off the runtime's thread.
        tokio::task::spawn_blocking(append)
            .await
            .map_err(|e| format!("the audit task failed: {e}"))?
    }

    /// What has been recorded so far.
    pub fn summary(&self) -> Summary {
        self.log
            .lock()
            .map(|l| l.summary().clone())
            .unwrap_or_default()
    }
}

/// A wrapped run.
pub struct Session {
    pub session_id: String,
    pub agent_id: String,
    pub depth: u32,
    pub parent_session: Option<String>,
    pub decider: Decider,
    pub audit: Auditor,
    /// Whether a person can answer on a terminal.
    pub interactive: bool,
    /// Events seen so far (for heartbeats and the session end).
    pub events: AtomicU64,
    /// The names of the hooks the agent has called so far.
    pub hooks_called: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// The agent's own session id, as its hooks last reported it (for the exit hint).
    pub framework_session: std::sync::Mutex<Option<String>>,
}

impl Session {
    /// Whether the agent has called the hook named `hook` in this run.
    pub fn hook_called(&self, hook: &str) -> bool {
        self.hooks_called
            .lock()
            .is_ok_and(|called| called.contains(hook))
    }

    /// How many events this session has sent or decided.
    pub fn events_seen(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// An event of this session.
    pub fn event(
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
    pub async fn notify(&self, event: Event, framework_session: Option<String>) {
        self.notify_from(event, framework_session, None).await;
    }

    /// [`Session::notify`], recording which process sent the event (for a hook's).
    async fn notify_from(
        &self,
        event: Event,
        framework_session: Option<String>,
        peer: Option<AuditPeer>,
    ) {
        self.events.fetch_add(1, Ordering::Relaxed);
        let mut record = notification_record(&event, framework_session);
        record.peer = peer;
        if let Err(e) = self.audit.record(record).await {
            tracing::error!("audit log: {e}");
        }
        if let Harness::Remote(client) = &self.decider.harness {
            client.notify(event);
        }
    }

    /// Decides a blocking event and makes the audit record durable before returning it.
    /// `peer` is the process that sent it, for the audit record.
    pub async fn decide(
        &self,
        event: &Event,
        native_ask: bool,
        framework_session: Option<String>,
        peer: Option<AuditPeer>,
    ) -> Resolution {
        self.events.fetch_add(1, Ordering::Relaxed);
        let mut res = self.decider.resolve(event, native_ask).await;
        let mut record = audit_record(
            event,
            framework_session.clone(),
            &res.verdict,
            res.cause.clone(),
            res.source.clone(),
            res.latency,
        );
        record.peer = peer;
        if let Err(e) = self.audit.record(record).await {
            tracing::error!("audit log: {e}");
            // A decision that cannot be recorded is not enforced as given.
            res = self.decider.fail(
                format!("the audit log cannot be written ({e})"),
                Instant::now(),
            );
            let mut record = audit_record(
                event,
                framework_session,
                &res.verdict,
                res.cause.clone(),
                res.source.clone(),
                Duration::ZERO,
            );
            record.peer = peer;
            let _ = self.audit.record(record).await;
        }
        res
    }
}

/// The audit record of a decided event. `note` says why the verdict is not the harness's
/// own (the fail mode's cause, or what observe mode did not enforce).
pub fn audit_record(
    event: &Event,
    framework_session: Option<String>,
    verdict: &Verdict,
    note: Option<String>,
    source: String,
    latency: Duration,
) -> AuditRecord {
    let reason = match (verdict.reason(), note) {
        (Some(r), _) => Some(r.to_owned()),
        (None, note) => note,
    };
    AuditRecord {
        ts: event.timestamp.clone(),
        session: event.session_id.clone(),
        framework_session,
        agent: event.agent_id.clone(),
        depth: event.depth,
        event_type: event.event_type.as_str().to_owned(),
        payload: event.payload.clone(),
        decision: verdict.name().to_owned(),
        reason,
        source,
        latency_us: latency.as_micros() as u64,
        peer: None,
    }
}

/// The audit record of a notification.
pub fn notification_record(event: &Event, framework_session: Option<String>) -> AuditRecord {
    AuditRecord {
        decision: "notified".to_owned(),
        ..audit_record(
            event,
            framework_session,
            &Verdict::no_opinion(),
            None,
            "harness".to_owned(),
            Duration::ZERO,
        )
    }
}

impl HookHandler for Session {
    async fn handle(
        &self,
        framework: String,
        hook: String,
        cwd: PathBuf,
        payload: Vec<u8>,
        peer: Peer,
    ) -> Rendered {
        let sender = Some(AuditPeer {
            pid: peer.pid,
            descends_from_agent: peer.descends_from_agent,
        });
        if !peer.descends_from_agent {
            tracing::warn!(
                pid = peer.pid,
                "a {framework} {hook} hook call with the run's token came from outside the \
                 agent's process tree; it is audited as such"
            );
        }
        if let Ok(mut called) = self.hooks_called.lock() {
            if !called.contains(&hook) {
                called.insert(hook.clone());
            }
        }
        let Some(fw) = frameworks::find(&framework) else {
            return Rendered {
                stdout: Vec::new(),
                stderr: format!("ahp-wrap: unknown framework {framework:?}; blocking\n")
                    .into_bytes(),
                exit_code: 2,
            };
        };
        let cx = HookContext {
            hook: &hook,
            cwd: &cwd,
            interactive: self.interactive,
        };
        let mapped = match fw.map(&cx, &payload) {
            Ok(Some(m)) => m,
            Ok(None) => return fw.render(&cx, None, &Verdict::no_opinion()),
            Err(e) => {
                let message =
                    format!("the {framework} {hook} hook payload was not understood: {e}");
                let error = self.event(
                    EventType::Error,
                    json!({"source": "shim", "framework": framework, "hook": hook, "message": message}),
                    Map::new(),
                );
                self.notify_from(error, None, sender).await;
                let res = self.decider.fail(message, Instant::now());
                return fw.render(&cx, None, &res.verdict);
            }
        };
        if let (Some(fs), Ok(mut last)) = (&mapped.framework_session, self.framework_session.lock())
        {
            if last.as_ref() != Some(fs) {
                *last = Some(fs.clone());
            }
        }
        let mut metadata = Map::new();
        metadata.insert("framework".into(), framework.clone().into());
        metadata.insert("hook".into(), hook.clone().into());
        if let Some(fs) = &mapped.framework_session {
            metadata.insert("framework_session_id".into(), fs.clone().into());
        }
        if !peer.descends_from_agent {
            // The harness should know too: this call is not the agent's own.
            metadata.insert(
                "sender".into(),
                json!({"pid": peer.pid, "descends_from_agent": false}),
            );
        }
        let event = self.event(mapped.event_type, mapped.payload.clone(), metadata);
        if mapped.event_type.is_blocking() {
            let res = self
                .decide(
                    &event,
                    fw.native_ask(&cx),
                    mapped.framework_session.clone(),
                    sender,
                )
                .await;
            fw.render(&cx, Some(&mapped), &res.verdict)
        } else {
            self.notify_from(event, mapped.framework_session.clone(), sender)
                .await;
            fw.render(&cx, Some(&mapped), &Verdict::no_opinion())
        }
    }
}
