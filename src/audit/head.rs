//! The commit head: where a log stood when its writer last closed it, kept outside the log.
//!
//! A record cut in half at the end of a log looks exactly like a crash mid-write, and
//! whatever followed it is gone with the cut: the log alone cannot say that the record had
//! been acknowledged. So a writer that closes a log cleanly leaves, in the user's state
//! directory, the `seq` and `hash` of its last record. A record at or before that `seq` was
//! acknowledged: if it is later found cut, changed or missing, that is an edit, not a crash.
//! The next writer refuses to continue such a log, and `audit verify` on this machine
//! reports it as tampering. It is a tripwire, not a proof: whoever can edit the log as the
//! same user can also delete the head (then the cut is reported as unexplained damage,
//! never as intact).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The last record of a log when its writer closed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The log file it belongs to, as it was named when closed.
    pub log: String,
    /// The `seq` of the log's last record: every record up to it was acknowledged.
    pub seq: u64,
    /// That record's `hash` (hex), which the chain must still reach.
    pub hash: String,
    /// When the writer closed the log.
    pub ts: String,
}

/// Where the head of the log at `log` is kept under `dir`: one file per log, named by a
/// digest of the log's absolute path.
pub(crate) fn head_path(dir: &Path, log: &Path) -> PathBuf {
    let absolute = std::fs::canonicalize(log).unwrap_or_else(|_| match log.is_absolute() {
        true => log.to_owned(),
        false => std::env::current_dir().unwrap_or_default().join(log),
    });
    let digest = Sha256::digest(absolute.as_os_str().as_encoded_bytes());
    dir.join(format!("{}.json", hex::encode(&digest[..16])))
}

/// The directory heads live in by default: `<state dir>/audit-heads`.
pub(crate) fn default_dir() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("audit-heads"))
}

/// Reads a head; `None` when there is none (or it is unreadable: a head is only evidence).
pub(crate) fn read(path: &Path) -> Option<Head> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Writes a head atomically (a temporary file renamed over the old one).
#[allow(
    clippy::expect_used,
    reason = "a commit head is plain data: its serialisation cannot fail"
)]
pub(crate) fn write(path: &Path, head: &Head) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::termlog::make_private_dir(dir)?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(head).expect("a head serializes"))?;
    std::fs::rename(&tmp, path)
}

/// Whether a log of `len` bytes whose last whole record is `last` (with hash `prev`, maybe
/// followed by a cut one) still holds what `committed` acknowledged; else why not.
pub(crate) fn check(
    committed: &Head,
    len: u64,
    last: Option<u64>,
    prev: &str,
    cut_after: bool,
) -> Result<(), String> {
    if len == 0 {
        // A new (or rotated) log: nothing of the old one to protect.
        return Ok(());
    }
    Err(match last {
        Some(last) if last > committed.seq => return Ok(()),
        Some(last) if last == committed.seq && prev == committed.hash => return Ok(()),
        Some(last) if last == committed.seq => format!(
            "record {last} is not the one that was there when the log was closed at {}",
            committed.ts
        ),
        Some(last) => format!(
            "records up to {} were acknowledged when the log was closed at {}, but its last \
             whole record is now {last}{}",
            committed.seq,
            committed.ts,
            if cut_after {
                " followed by a cut one"
            } else {
                ""
            }
        ),
        None => format!(
            "records up to {} were acknowledged when the log was closed at {}, but it has no \
             whole record now",
            committed.seq, committed.ts
        ),
    })
}
