//! The audit log: append-only, hash-chained JSON lines, one record per event and decision.
//!
//! Owns: the log file, its chain and keys, verification and summaries. Must not touch: what
//! is decided (it records verdicts, never makes them); lines are read with the crate's one
//! line framing (`crate::jsonrpc::framing`).
//!
//! # Line format
//!
//! Each line is one JSON object in *canonical* form (see [`chain::canonical`]: keys sorted
//! at every level, no whitespace), followed by `\n`. Besides the [`AuditRecord`] fields it
//! holds `v` (format version, 1), `seq` (0-based, contiguous), `alg` (`sha256` or
//! `hmac-sha256`), `kid` (keyed logs only: a public id of the key), `prev` (the previous
//! line's `hash`, or 64 zeros for the first line) and `hash`: SHA-256, or HMAC-SHA-256 under
//! the audit key, of the canonical encoding of the line without `hash`. An example:
//!
//! ```text
//! {"agent":"claude-code","alg":"sha256","decision":"block","depth":0,"event_type":"pre_action","hash":"b9c019df6eb610c4f403ceb3b528f2cf667bdbbd16dffa77231cbc503a5be47c","latency_us":250,"payload":{"action_type":"tool_call","arguments":{"command":"curl -H 'Authorization: Bearer [REDACTED:bearer]' https://x && rm -rf /"},"tool_name":"bash"},"prev":"0000000000000000000000000000000000000000000000000000000000000000","reason":"destructive command","seq":0,"session":"s-1","source":"rule:no-rm-rf","ts":"2025-01-02T03:04:05.678Z","v":1}
//! ```
//!
//! An unkeyed chain detects accidents and careless edits; anyone can recompute it. A keyed
//! chain (`--audit-key-file` or `AHP_WRAP_AUDIT_KEY`) cannot be forged without the key. No
//! chain detects the removal of whole lines *at the end* of the log: keep the record count
//! (printed in the summary) or the last hash elsewhere if that matters.
//!
//! # Durability
//!
//! [`AuditLog::append`] writes the whole line with one `write(2)` on an `O_APPEND` file and
//! calls `fdatasync` before it returns, so a record is on disk before the decision it
//! records is enforced. A new log file is created `0600` and its directory is synced.
//!
//! # One writer
//!
//! A log has one writer at a time: [`AuditLog::open`] takes an exclusive `flock` and fails if
//! another process holds it. Concurrent writers would interleave and break the chain.
//!
//! # Crash recovery, and telling a crash from a cut
//!
//! A crash mid-write can leave a partial last line. The log is never rewritten: when it is
//! opened again, the writer terminates the partial line with `\n` and appends an
//! `audit.recovered` record, chained to the last complete record, whose payload names the
//! damage (`damaged_offset`, `damaged_bytes`, `damaged_lines`). (A crash that lost only the
//! final newline leaves a whole record: the writer just ends it.)
//!
//! But a record cut in half by hand, with everything after it removed, leaves exactly the
//! same bytes: the log alone cannot tell a crash from a cut. What can: whether the cut record
//! had been *acknowledged* — followed by a later record, or by a clean close. A clean close
//! leaves a commit head outside the log ([`head`]: the `seq` and `hash` of the last record,
//! in the user's state directory). So:
//!
//! - a log whose only damage is an incomplete last record that nothing acknowledges is
//!   [`Integrity::CrashTruncated`] (`audit verify` exits 3);
//! - a cut or missing record that the commit head had acknowledged, or a record that differs
//!   from the acknowledged one, is [`Integrity::Tampered`] (exit 1), and the writer refuses to
//!   continue such a log (it would otherwise paper over the cut with a recovery record);
//! - a non-record line followed by more records with no recovery record naming it is
//!   tampering too (exit 1);
//! - damage that a later writer recovered is never reported as intact:
//!   [`Integrity::RecoveredDamage`] (exit 4), a finding to look at, because it may have been a
//!   cut made before that run (on another machine, or with the head removed, nothing says).
//!
//! The head is a tripwire, not a proof: whoever can edit the log as the same user can also
//! remove the head; then the cut is still reported (exit 3 or 4), only not as tampering.
//! A last line that is complete but not a record, other than crash debris (`{…`, NULs,
//! empty), makes `open` fail rather than append to what may not be an audit log at all.
//!
//! # Files
//!
//! - [`chain`]: canonical encoding, hashes, key ids.
//! - `line`: encoding and parsing one line.
//! - `writer`: [`AuditLog`], appends and crash recovery.
//! - `tail`: reading back the end of a log: where the chain stands, and crash debris.
//! - [`redact`]: secret redaction, applied to the payload and reason before writing.
//! - `verify`: [`verify()`] and its [`VerifyReport`], [`Integrity`] (the exit code).
//! - [`head`]: the commit head a clean close leaves outside the log.
//! - `summary`: [`Summary`], built while appending or read back with [`summary()`].
//! - [`trail`]: the default trail, a file per run in the user's state directory, and its
//!   retention.
//! - `show`: `audit show`, a person's view of a run's records.

mod auditor;
pub(crate) mod chain;
pub(crate) mod fit;
pub(crate) mod head;
mod line;
pub(crate) mod redact;
pub(crate) mod show;
mod summary;
mod tail;
pub(crate) mod trail;
mod verify;
mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_commit;
#[cfg(test)]
mod tests_show;

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use auditor::{decision_record, notified, Auditor, Observer, Ruling};
pub use chain::Alg;
pub use summary::{summary, Blocked, Summary};
pub use verify::{
    verify, verify_with_head, Integrity, Problem, ProblemKind, Recovery, VerifyReport,
};
pub use writer::{AuditLog, Deferred};

/// How an observe-mode record's reason starts: what would have been decided.
pub const OBSERVE_PREFIX: &str = "observe mode: would have decided ";

/// The environment variable that may hold the audit key.
pub(crate) const KEY_ENV: &str = "AHP_WRAP_AUDIT_KEY";

/// Keys shorter than this are refused: HMAC is only as strong as its key.
pub(crate) const MIN_KEY_LEN: usize = 16;

/// One audited event and what was decided about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The event's `timestamp`: RFC 3339 with milliseconds, as AHP writes it.
    pub ts: String,
    /// The event's `session_id`: the wrapper's session (empty on a recovery record).
    pub session: String,
    /// The agent's own session id, when its hooks reported one; absent from the line
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework_session: Option<String>,
    /// The event's `agent_id`: which agent of the session sent it (`ahp-wrap` on a recovery
    /// record).
    pub agent: String,
    /// The agent's sub-agent nesting depth (0 for a top-level agent).
    pub depth: u32,
    /// The AHP event type as on the wire (`pre_action`, `session_start`, …), or
    /// `audit.recovered` for the writer's own crash-recovery record.
    pub event_type: String,
    /// The event's payload, with secrets redacted before it is written.
    pub payload: Value,
    /// `allow`, `block`, `modify`, `defer`, `escalate`, or `notified` for notifications.
    pub decision: String,
    /// Why: the verdict's own reason, else the decision's note (the fail mode's cause, what
    /// observe mode did not enforce); redacted like the payload, absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided: `policy:<rule>`, `policy`, `harness`, `person`, `fail-mode`, or `cancelled`
    /// (the call was cancelled by its sender before a decision; see the gate's `DecidedBy`).
    pub source: String,
    /// How long the decision took, in microseconds (0 for a notification).
    pub latency_us: u64,
    /// In observe mode, the verdict the policy would have enforced (`block`, `modify`,
    /// `escalate`) where the event was let through instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<String>,
    /// The process that sent a hook's event over the control socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<AuditPeer>,
    /// An escalation allowed because the run's checkpoints keep everything the call
    /// discards: the checkpoint before it, and the command that brings it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reversible: Option<Reversible>,
}

/// What makes an allowed call reversible: the checkpoint taken before it, and the `undo`
/// that goes back to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reversible {
    /// The checkpoint before the call (`ahp-wrap undo --to` it).
    pub checkpoint: u64,
    /// The command that brings back what the call discarded.
    pub undo: String,
}

/// Who sent a hook call, as the kernel vouches for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPeer {
    /// The sending process's id, as the kernel reports it (0 when the system does not say).
    pub pid: i32,
    /// `false`: a process outside the agent's tree used the run's token (read from the
    /// agent's environment, say).
    pub descends_from_agent: bool,
}

/// Why the audit log failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log file could not be opened, locked or read.
    #[error("failed to open audit log {path}")]
    Open {
        /// The log's path, for display.
        path: String,
        /// The I/O error behind it.
        #[source]
        source: std::io::Error,
    },
    /// Writing or syncing a record failed; the next append repairs the tail first.
    #[error("failed to write the audit log")]
    Write(#[source] std::io::Error),
    /// Another process holds the log's exclusive lock: a log has one writer at a time.
    #[error("audit log {path} is in use by another process")]
    Locked {
        /// The log's path, for display.
        path: String,
    },
    /// The log's last complete line is neither a record nor crash debris, so nothing is
    /// appended to it.
    #[error("audit log {path} does not end in an audit record ({why}); use a new log file")]
    NotAnAuditLog {
        /// The log's path, for display.
        path: String,
        /// What is wrong with its last line.
        why: String,
    },
    /// The log was written under another key (or keyed where none was given, or the
    /// reverse), so this writer cannot continue its chain.
    #[error("audit log {path} is {log}, but {given} was asked for; use a new log file")]
    KeyMismatch {
        /// The log's path, for display.
        path: String,
        /// How the log is signed: `keyed (<alg>, key id <kid>)` or `unkeyed (<alg>)`.
        log: String,
        /// How this writer would sign, in the same words.
        given: String,
    },
    /// The log no longer matches its commit head: a record acknowledged at the last clean
    /// close is cut, changed or missing, so the writer refuses to continue it.
    #[error(
        "audit log {path} was cut or edited after it was closed ({why}); investigate it, or \
         start a new log (removing {head} accepts it as it is)"
    )]
    Committed {
        /// The log's path, for display.
        path: String,
        /// How the log differs from its head.
        why: String,
        /// The commit head's file (removing it accepts the log as it is).
        head: String,
    },
    /// The audit key file (`--audit-key-file`) could not be read.
    #[error("failed to read audit key file {path}")]
    KeyFile {
        /// The key file's path, for display.
        path: String,
        /// The I/O error behind it.
        #[source]
        source: std::io::Error,
    },
    /// The audit key is shorter than [`MIN_KEY_LEN`] bytes (after trimming a text key).
    #[error("audit key from {origin} is {len} bytes; at least {MIN_KEY_LEN} are required")]
    KeyTooShort {
        /// Where the key came from: the key file's path, or `AHP_WRAP_AUDIT_KEY`.
        origin: String,
        /// The key's length, in bytes.
        len: usize,
    },
    /// A thread panicked while it held the log: nothing more is written to it.
    #[error("the audit log lock is poisoned")]
    Poisoned,
    /// The blocking task that writes a record failed (panicked or was cancelled).
    #[error("the audit task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Loads the audit key: the contents of `file` (`--audit-key-file`) if given, else `env`
/// (the value of [`KEY_ENV`]), else none. Text keys are trimmed of surrounding whitespace
/// (a trailing newline from `echo` is not part of the key); binary key files are used as
/// they are.
pub(crate) fn load_key(
    file: Option<&Path>,
    env: Option<String>,
) -> Result<Option<Vec<u8>>, AuditError> {
    let (origin, raw) = match (file, env) {
        (Some(path), _) => {
            let raw = std::fs::read(path).map_err(|source| AuditError::KeyFile {
                path: path.display().to_string(),
                source,
            })?;
            warn_if_readable_by_others(path);
            (path.display().to_string(), raw)
        }
        (None, Some(value)) => (KEY_ENV.to_owned(), value.into_bytes()),
        (None, None) => return Ok(None),
    };
    let key = match std::str::from_utf8(&raw) {
        Ok(text) => text.trim().as_bytes().to_vec(),
        Err(_) => raw,
    };
    if key.len() < MIN_KEY_LEN {
        return Err(AuditError::KeyTooShort {
            origin,
            len: key.len(),
        });
    }
    Ok(Some(key))
}

fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "audit key file is readable by other users");
        }
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;
    use std::fs;

    #[test]
    fn load_key_prefers_the_file_trims_text_and_refuses_short_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        fs::write(&file, "0123456789abcdef0123\n").unwrap();
        let env = Some("env-key-env-key-env-key".to_owned());
        assert_eq!(
            load_key(Some(&file), env.clone()).unwrap().unwrap(),
            b"0123456789abcdef0123"
        );
        assert_eq!(
            load_key(None, env).unwrap().unwrap(),
            b"env-key-env-key-env-key"
        );
        assert_eq!(load_key(None, None).unwrap(), None);
        let binary = [
            0xff_u8, 0xfe, b' ', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, b'\n',
        ];
        fs::write(&file, binary).unwrap();
        assert_eq!(load_key(Some(&file), None).unwrap().unwrap(), binary);
        let err = load_key(None, Some("short\n".into())).unwrap_err();
        assert!(
            matches!(err, AuditError::KeyTooShort { len: 5, .. }),
            "{err}"
        );
        let missing = dir.path().join("missing");
        assert!(matches!(
            load_key(Some(&missing), None),
            Err(AuditError::KeyFile { .. })
        ));
    }
}
