//! The audit log: append-only JSON lines, one record per event and decision.
//! (Stand-in: plain JSON lines, no hash chain yet.)

pub mod chain;
pub mod redact;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// One audited event and what was decided about it.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    pub ts: String,
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_session: Option<String>,
    pub agent: String,
    pub depth: u32,
    pub event_type: String,
    pub payload: Value,
    /// `allow`, `block`, `modify`, `defer`, `escalate`, or `notified` for notifications.
    pub decision: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The rule (embedded policy) or harness that decided, or `fail-mode`.
    pub source: String,
    pub latency_us: u64,
}

/// Why the audit log failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("failed to open audit log {path}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to write the audit log")]
    Write(#[source] std::io::Error),
}

/// An open audit log.
pub struct AuditLog {
    file: File,
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path` for appending.
    pub fn open(path: &Path, key: Option<Vec<u8>>) -> Result<AuditLog, AuditError> {
        let _ = key;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| AuditError::Open {
                path: path.display().to_string(),
                source,
            })?;
        Ok(AuditLog { file })
    }

    /// Appends one record and makes it durable before returning.
    pub fn append(&mut self, record: &AuditRecord) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(record).expect("audit records serialize");
        line.push(b'\n');
        self.file.write_all(&line).map_err(AuditError::Write)?;
        self.file.sync_data().map_err(AuditError::Write)
    }
}
