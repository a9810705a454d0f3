//! The writer: opening a log (continuing its chain, recovering crash damage) and durable appends.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::json;

use super::chain::{Alg, Signer, GENESIS};
use super::head::{self, Head};
use super::line::{self, RECOVERED_EVENT};
use super::redact::{redact_str, redact_value};
use super::tail::{inspect_tail, Tail};
use super::trail::Retention;
use super::{AuditError, AuditRecord, Summary};

/// An audit log, or just the summary of one when no file was asked for.
///
/// Cost of a durable append, timed roughly (release build, 500 appends of a 300-byte
/// `pre_action` record, on the 2-core development VM, ext4 on a virtual disk): p50 150 µs,
/// p99 230 µs, worst 3.7 ms, nearly all of it `fdatasync` (the same loop on tmpfs takes
/// 11 µs). Redaction, encoding and hashing take about 6 µs, SHA-256 and HMAC alike; that is
/// also the whole cost without a file. A physical disk without a write cache will be slower.
pub struct AuditLog {
    sink: Option<Sink>,
    /// A file being opened on a thread of its own (the default trail): the run's start does
    /// not wait for it; the first record does, if it comes first.
    deferred: Option<Opening>,
    /// Why the deferred file could not be opened: the run keeps no file.
    lost: Option<String>,
    summary: Summary,
}

/// The thread opening a deferred log: the log, or why it could not be opened.
type Opening = std::thread::JoinHandle<Result<AuditLog, String>>;

/// A log file opened beside the run's start rather than before it.
#[derive(Debug)]
pub struct Deferred {
    /// The log file to open (created if missing), in the trail.
    pub path: PathBuf,
    /// The audit key the log is signed with; `None`: an unkeyed (`sha256`) chain.
    pub key: Option<Vec<u8>>,
    /// Where commit heads are kept (see [`super::head`]).
    pub heads: Option<PathBuf>,
    /// The trail the file is in, pruned (see [`super::trail`]) before the file is made.
    pub retention: Option<Retention>,
}

struct Sink {
    file: Flock<File>,
    path: PathBuf,
    signer: Signer,
    next_seq: u64,
    prev: String,
    /// A write failed, maybe part-way: re-read the tail and recover before the next append.
    suspect: bool,
    /// Records were written since the last `fdatasync` (notifications, which enforce
    /// nothing, do not wait for the disk; the next decision, or the close, syncs them).
    unsynced: bool,
    /// Where this log's commit head is kept (see [`super::head`]), if anywhere.
    head: Option<std::path::PathBuf>,
    /// The head left by the last writer that closed the log, until the tail is checked
    /// against it.
    committed: Option<Head>,
}

impl Drop for Sink {
    /// A clean close: records where the log stands, outside it, so that a later cut of an
    /// acknowledged record is not mistaken for a crash.
    fn drop(&mut self) {
        if self.unsynced && self.file.sync_data().is_ok() {
            self.unsynced = false;
        }
        let Some(path) = &self.head else { return };
        if self.suspect || self.unsynced || self.next_seq == 0 {
            return;
        }
        let head = Head {
            log: self.path.display().to_string(),
            seq: self.next_seq - 1,
            hash: self.prev.clone(),
            ts: crate::protocol::now_rfc3339(),
        };
        if let Err(e) = head::write(path, &head) {
            tracing::warn!(path = %path.display(), "cannot write the audit log's commit head: {e}");
        }
    }
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("AuditLog");
        if let Some(sink) = &self.sink {
            d.field("path", &sink.path)
                .field("signer", &sink.signer)
                .field("next_seq", &sink.next_seq);
        }
        d.finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens (creating if needed) the log at `path` for appending, continuing its chain.
    ///
    /// Fails if another process has it open, if its last line is neither a record nor
    /// crash debris, or if it was written with another key (or with/without one). Crash
    /// damage at the end is recovered as described in the module docs.
    pub fn open(path: &Path, key: Option<Vec<u8>>) -> Result<AuditLog, AuditError> {
        AuditLog::open_with_heads(path, key, None)
    }

    /// [`AuditLog::open`], checking the log against the commit head kept in `heads` (see
    /// [`super::head`]) and leaving a new one there when it is closed. Fails if a record
    /// that was acknowledged when the log was last closed is now cut, changed or missing.
    pub(crate) fn open_with_heads(
        path: &Path,
        key: Option<Vec<u8>>,
        heads: Option<&Path>,
    ) -> Result<AuditLog, AuditError> {
        let open_err = |source| AuditError::Open {
            path: path.display().to_string(),
            source,
        };
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(open_err)?;
        let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(file) => file,
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(AuditError::Locked {
                    path: path.display().to_string(),
                })
            }
            Err((_, errno)) => return Err(open_err(errno.into())),
        };
        if !existed {
            sync_parent_dir(path).map_err(open_err)?;
        }
        let head = heads.map(|dir| head::head_path(dir, path));
        let committed = head.as_deref().and_then(head::read);
        let mut sink = Sink {
            file,
            path: path.to_owned(),
            signer: Signer::new(key.as_deref()),
            next_seq: 0,
            prev: GENESIS.to_owned(),
            suspect: true,
            unsynced: false,
            head,
            committed,
        };
        let mut summary = Summary::default();
        if let Some(marker) = sink.recover()? {
            summary.add(&marker);
        }
        Ok(AuditLog {
            sink: Some(sink),
            deferred: None,
            lost: None,
            summary,
        })
    }

    /// A log that writes nothing and only keeps the summary (`--audit-log none`).
    pub fn without_file() -> AuditLog {
        AuditLog {
            sink: None,
            deferred: None,
            lost: None,
            summary: Summary::default(),
        }
    }

    /// A log whose file is opened on a thread of its own, after its trail is pruned: the
    /// first record waits for it. If it cannot be opened, the run goes on without a file,
    /// with a warning ([`AuditLog::lost`] says why): a trail nobody asked for by name does
    /// not stop a run.
    pub(crate) fn deferred(file: Deferred) -> AuditLog {
        let opening = std::thread::Builder::new()
            .name("audit-open".into())
            .spawn(move || open_deferred(file));
        match opening {
            Ok(handle) => AuditLog {
                deferred: Some(handle),
                ..AuditLog::without_file()
            },
            Err(e) => AuditLog {
                lost: Some(format!("cannot start a thread to open it: {e}")),
                ..AuditLog::without_file()
            },
        }
    }

    /// Waits for the deferred file to be open.
    fn join_deferred(&mut self) {
        let Some(handle) = self.deferred.take() else {
            return;
        };
        let opened = handle
            .join()
            .unwrap_or_else(|_| Err("the thread opening it panicked".to_owned()));
        match opened {
            Ok(mut log) => {
                self.sink = log.sink.take();
                self.summary.absorb(std::mem::take(&mut log.summary));
            }
            Err(why) => {
                tracing::warn!(
                    "the audit trail cannot be written ({why}): this run keeps no audit file"
                );
                self.lost = Some(why);
            }
        }
    }

    /// Redacts and appends one record, and makes it durable before returning.
    ///
    /// On error the record may or may not be in the file; the next append first repairs
    /// the tail, so the chain stays valid either way.
    pub fn append(&mut self, record: &AuditRecord) -> Result<(), AuditError> {
        // Without a file only the summary sees the record, and it keeps (redacted) only what
        // was blocked: the rest needs no redaction, which is most of the cost of a file-less
        // run (and compiling the patterns, on the first record, most of its start-up).
        if self.sink.is_none() && self.deferred.is_some() {
            self.join_deferred();
        }
        if self.sink.is_none() && !Summary::keeps(record) {
            self.summary.add(record);
            return Ok(());
        }
        let mut record = record.clone();
        redact_value(&mut record.payload);
        if let Some(reason) = &mut record.reason {
            if let std::borrow::Cow::Owned(r) = redact_str(reason) {
                *reason = r;
            }
        }
        if let Some(sink) = &mut self.sink {
            if let Some(marker) = sink.recover()? {
                self.summary.add(&marker);
            }
            // A notification enforces nothing: it need not be on disk before it returns.
            sink.append(&record, record.decision != "notified")?;
        }
        self.summary.add(&record);
        Ok(())
    }

    /// The summary of the records appended through this handle (and of any recovery).
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The log file, if any (once it is open).
    pub(crate) fn path(&self) -> Option<&Path> {
        self.sink.as_ref().map(|s| s.path.as_path())
    }

    /// Whether records go to a file, or will at the first one.
    pub(crate) fn has_file(&self) -> bool {
        self.sink.is_some() || self.deferred.is_some()
    }

    /// Why a deferred file could not be opened, if it could not.
    pub(crate) fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// The `seq` the next record will get.
    #[cfg(test)]
    pub(crate) fn next_seq(&self) -> Option<u64> {
        self.sink.as_ref().map(|s| s.next_seq)
    }
}

/// Prunes the trail `file` is in (when due: at most once an hour), then opens `file`.
fn open_deferred(file: Deferred) -> Result<AuditLog, String> {
    let due = |(retention, dir): &(Retention, &Path)| super::trail::prune_due(dir, *retention);
    if let Some((retention, dir)) = file.retention.zip(file.path.parent()).filter(due) {
        let now = std::time::SystemTime::now();
        match super::trail::prune(dir, file.heads.as_deref(), retention, now) {
            Ok(removed) if !removed.is_empty() => tracing::info!(
                "audit trail: removed {} old run log(s) ({retention} kept; listed in {})",
                removed.len(),
                dir.join(super::trail::RETIRED).display()
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("audit trail {}: cannot prune it: {e}", dir.display()),
        }
    }
    AuditLog::open_with_heads(&file.path, file.key, file.heads.as_deref())
        .map_err(|e| crate::error_chain(&e))
}

impl Sink {
    fn write_err(&mut self, e: io::Error) -> AuditError {
        self.suspect = true;
        AuditError::Write(e)
    }

    /// Writes `bytes` at the end of the file (one `write(2)` unless the kernel writes
    /// short) and waits until they are on disk.
    fn write_durably(&mut self, bytes: &[u8]) -> Result<(), AuditError> {
        self.write(bytes, true)
    }

    /// Writes `bytes` at the end of the file; when `sync`, waits until they (and what was
    /// written before them) are on disk.
    fn write(&mut self, bytes: &[u8], sync: bool) -> Result<(), AuditError> {
        // `suspect` is set before writing so that an error at any point (or a panic) leads
        // to a tail check before the next append.
        self.suspect = true;
        if let Err(e) = (&*self.file).write_all(bytes) {
            return Err(self.write_err(e));
        }
        if !sync {
            self.unsynced = true;
        } else if let Err(e) = self.file.sync_data() {
            return Err(self.write_err(e));
        } else {
            self.unsynced = false;
        }
        self.suspect = false;
        Ok(())
    }

    fn append(&mut self, record: &AuditRecord, sync: bool) -> Result<(), AuditError> {
        let (line, hash) = line::encode(record, self.next_seq, &self.prev, &self.signer);
        self.write(&line, sync)?;
        self.next_seq += 1;
        self.prev = hash;
        Ok(())
    }

    /// If the tail is suspect, re-reads it to find where the chain stands and, if it ends
    /// in crash debris, appends a recovery record naming the damage. Returns that record.
    fn recover(&mut self) -> Result<Option<AuditRecord>, AuditError> {
        if !self.suspect {
            return Ok(None);
        }
        let tail = inspect_tail(&self.file, &self.path)?;
        if let Some((alg, kid)) = &tail.last {
            if *alg != self.signer.alg() || kid.as_deref() != self.signer.key_id() {
                return Err(AuditError::KeyMismatch {
                    path: self.path.display().to_string(),
                    log: describe_key(*alg, kid.as_deref()),
                    given: describe_key(self.signer.alg(), self.signer.key_id()),
                });
            }
        }
        if let Some(committed) = self.committed.take() {
            self.check_committed(&committed, &tail)?;
        }
        self.next_seq = tail.next_seq;
        self.prev = tail.prev;
        let Some(damage) = tail.damage else {
            if tail.unterminated {
                self.write_durably(b"\n")?;
            }
            self.suspect = false;
            return Ok(None);
        };
        let damaged_bytes = damage.len + u64::from(damage.partial);
        let marker = AuditRecord {
            ts: crate::protocol::now_rfc3339(),
            session: String::new(),
            framework_session: None,
            agent: "ahp-wrap".into(),
            depth: 0,
            event_type: RECOVERED_EVENT.into(),
            payload: json!({
                "damaged_offset": damage.offset,
                "damaged_bytes": damaged_bytes,
                "damaged_lines": damage.lines,
                "partial_line": damage.partial,
            }),
            decision: "notified".into(),
            reason: Some(
                "the log ended in an incomplete write (a crash); the damaged bytes are kept".into(),
            ),
            source: "ahp-wrap".into(),
            latency_us: 0,
            observed: None,
            peer: None,
            reversible: None,
        };
        let (line, hash) = line::encode(&marker, self.next_seq, &self.prev, &self.signer);
        // The newline that ends the partial line goes in the same write as the record.
        let mut bytes = Vec::with_capacity(line.len() + 1);
        if damage.partial {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&line);
        tracing::warn!(
            path = %self.path.display(),
            offset = damage.offset,
            bytes = damaged_bytes,
            "audit log ended in an incomplete write; recovering"
        );
        self.write_durably(&bytes)?;
        self.next_seq += 1;
        self.prev = hash;
        Ok(Some(marker))
    }
}

impl Sink {
    /// Fails if the tail is behind, or different from, where the last clean close left it.
    fn check_committed(&mut self, committed: &Head, tail: &Tail) -> Result<(), AuditError> {
        let len = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        let last = tail.next_seq.checked_sub(1);
        match head::check(committed, len, last, &tail.prev, tail.damage.is_some()) {
            Ok(()) => Ok(()),
            Err(why) => Err(AuditError::Committed {
                path: self.path.display().to_string(),
                why,
                head: self
                    .head
                    .as_ref()
                    .map(|h| h.display().to_string())
                    .unwrap_or_default(),
            }),
        }
    }
}

fn describe_key(alg: Alg, kid: Option<&str>) -> String {
    match kid {
        Some(kid) => format!("keyed ({alg}, key id {kid})"),
        None => format!("unkeyed ({alg})"),
    }
}

fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}
