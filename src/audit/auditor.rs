//! The run's side of the audit log: records built from events and decisions, written
//! durably and in order, and the run's summary.

use std::sync::{Arc, Mutex};

use super::{AuditError, AuditLog, AuditPeer, AuditRecord, Summary};
use crate::protocol::{Event, Final};

/// Told of each record once it is durable, and of each that could not be written (the
/// process's telemetry: metrics and spans agree with the log because they come from it).
pub trait Observer: Send + Sync {
    /// `record` of `event` is durable; writing it took `wrote`.
    fn recorded(&self, event: &Event, record: &AuditRecord, wrote: std::time::Duration);
    /// A record could not be written.
    fn failed(&self);
}

/// Writes audit records, durably and in order, and keeps the run's summary. Without an
/// audit file it still counts (for the summary), at no I/O cost.
#[derive(Clone)]
pub struct Auditor {
    log: Arc<Mutex<AuditLog>>,
    durable: bool,
    observer: Option<&'static dyn Observer>,
}

impl Default for Auditor {
    fn default() -> Auditor {
        Auditor::new(AuditLog::without_file())
    }
}

impl Auditor {
    /// An auditor writing to `log`; a log with a file has its appends (and their
    /// `fdatasync`) run off the async runtime's threads.
    pub fn new(log: AuditLog) -> Auditor {
        Auditor {
            durable: log.has_file(),
            log: Arc::new(Mutex::new(log)),
            observer: None,
        }
    }

    /// This auditor, telling `observer` of what it records.
    pub(crate) fn observed_by(self, observer: Option<&'static dyn Observer>) -> Auditor {
        Auditor { observer, ..self }
    }

    /// Opens the audit log at `path` (keyed by `key_file` or the key in the environment),
    /// or a file-less one that only keeps the summary.
    pub(crate) fn open(
        path: Option<&std::path::Path>,
        key_file: Option<&std::path::Path>,
    ) -> Result<Auditor, AuditError> {
        let Some(path) = path else {
            return Ok(Auditor::default());
        };
        let key = super::load_key(key_file, std::env::var(super::KEY_ENV).ok())?;
        let heads = super::head::default_dir();
        let log = AuditLog::open_with_heads(path, key, heads.as_deref())?;
        Ok(Auditor::new(log))
    }

    /// A run's file in the audit trail at `dir` (made if missing), keyed by `key_file` or the
    /// key in the environment, opened on a thread of its own after pruning the trail by
    /// `retention` (the first record waits for it). Without a usable directory the run keeps
    /// no file, with a warning.
    pub(crate) fn trail(
        dir: &std::path::Path,
        retention: super::trail::Retention,
        session: &str,
        key_file: Option<&std::path::Path>,
    ) -> Result<Auditor, AuditError> {
        let key = super::load_key(key_file, std::env::var(super::KEY_ENV).ok())?;
        if let Err(e) = crate::termlog::make_private_dir(dir) {
            tracing::warn!(
                "the audit trail {} cannot be made ({e}): this run keeps no audit file \
                 (--audit-log PATH chooses one)",
                dir.display()
            );
            return Ok(Auditor::default());
        }
        let name = super::trail::file_name(std::time::SystemTime::now(), session);
        Ok(Auditor::new(AuditLog::deferred(super::Deferred {
            path: dir.join(name),
            key,
            heads: super::head::default_dir(),
            retention: Some(retention),
        })))
    }

    /// The file the records went to, once one was opened.
    pub(crate) fn path(&self) -> Option<std::path::PathBuf> {
        let log = self.log.lock().ok()?;
        log.path().map(std::path::Path::to_owned)
    }

    /// Why the trail's file could not be opened, if it could not.
    pub(crate) fn lost(&self) -> Option<String> {
        let log = self.log.lock().ok()?;
        log.lost().map(str::to_owned)
    }

    /// Appends one record; returns once it is durable.
    pub(crate) async fn record(&self, record: AuditRecord) -> Result<(), AuditError> {
        self.write(record).await.map(drop)
    }

    /// Records the decision on `event`; returns once it is durable, and then (only then)
    /// tells the observer.
    pub(crate) async fn decided(
        &self,
        event: &Event,
        framework_session: Option<String>,
        ruling: &Ruling<'_>,
        peer: Option<AuditPeer>,
    ) -> Result<(), AuditError> {
        let record = decision_record(event, framework_session, ruling, peer);
        self.observed(event, record).await
    }

    /// Records the notification `event`, as [`Auditor::decided`] does a decision.
    pub async fn notified(
        &self,
        event: &Event,
        framework_session: Option<String>,
        peer: Option<AuditPeer>,
    ) -> Result<(), AuditError> {
        let record = notified(event, framework_session, peer);
        self.observed(event, record).await
    }

    /// Writes `record` of `event`, then tells the observer (when there is one) what was
    /// recorded and how long the write took.
    async fn observed(&self, event: &Event, record: AuditRecord) -> Result<(), AuditError> {
        let Some(observer) = self.observer else {
            return self.record(record).await;
        };
        let start = std::time::Instant::now();
        match self.write(record).await {
            Ok(record) => {
                observer.recorded(event, &record, start.elapsed());
                Ok(())
            }
            Err(e) => {
                observer.failed();
                Err(e)
            }
        }
    }

    /// Appends one record; returns it once it is durable.
    async fn write(&self, record: AuditRecord) -> Result<AuditRecord, AuditError> {
        let log = self.log.clone();
        let append = move || {
            log.lock()
                .map_err(|_| AuditError::Poisoned)?
                .append(&record)?;
            Ok(record)
        };
        if !self.durable {
            return append();
        }
        // fdatasync blocks: keep it off the runtime's thread.
        tokio::task::spawn_blocking(append)
            .await
            .map_err(AuditError::Task)?
    }

    /// What has been recorded so far.
    pub fn summary(&self) -> Summary {
        self.log
            .lock()
            .map(|l| l.summary().clone())
            .unwrap_or_default()
    }
}

/// A decision as the audit log records it (the gate's `Decision` gives one): the verdict,
/// who decided (`source`), why it differs from the decider's own when it does, and how long
/// it took.
#[derive(Debug, Clone)]
pub struct Ruling<'a> {
    /// The verdict applied: its name becomes the record's `decision`, its reason the
    /// record's `reason`.
    pub verdict: &'a Final,
    /// Who decided, as the record's `source` says it (`policy:<rule>`, `harness`,
    /// `fail-mode`, …).
    pub source: String,
    /// The reason recorded when the verdict gives none: the fail mode's cause, or what
    /// observe mode did not enforce.
    pub note: Option<&'a str>,
    /// What observe mode would have enforced, where it let the event through.
    pub observed: Option<&'a str>,
    /// From the event's arrival to its decision; recorded as `latency_us`.
    pub latency: std::time::Duration,
    /// An escalation allowed because the checkpoints keep what the call discards.
    pub reversible: Option<&'a super::Reversible>,
}

/// The record of a decided event. The decision's note is the reason when the verdict has
/// none (the fail mode's cause, or what observe mode did not enforce).
pub fn decision_record(
    event: &Event,
    framework_session: Option<String>,
    decision: &Ruling<'_>,
    peer: Option<AuditPeer>,
) -> AuditRecord {
    let reason = match decision.verdict.reason() {
        Some(r) => Some(r.to_owned()),
        None => decision.note.map(str::to_owned),
    };
    AuditRecord {
        ts: event.timestamp.clone(),
        session: event.session_id.clone(),
        framework_session,
        agent: event.agent_id.clone(),
        depth: event.depth,
        event_type: event.event_type.as_str().to_owned(),
        payload: event.payload.clone(),
        decision: decision.verdict.name().to_owned(),
        reason,
        source: decision.source.clone(),
        latency_us: decision.latency.as_micros() as u64,
        observed: decision.observed.map(str::to_owned),
        peer,
        reversible: decision.reversible.cloned(),
    }
}

/// The record of a notification.
pub fn notified(
    event: &Event,
    framework_session: Option<String>,
    peer: Option<AuditPeer>,
) -> AuditRecord {
    let no_opinion = Final::no_opinion();
    let none = Ruling {
        verdict: &no_opinion,
        source: "harness".to_owned(),
        note: None,
        observed: None,
        latency: std::time::Duration::ZERO,
        reversible: None,
    };
    AuditRecord {
        decision: "notified".to_owned(),
        ..decision_record(event, framework_session, &none, peer)
    }
}
