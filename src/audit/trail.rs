//! The default audit trail: a log file per run in the user's state directory
//! (`$XDG_STATE_HOME/ahp-wrap/audit/`, else `~/.local/state/ahp-wrap/audit/`), kept within
//! an age and a total size.
//!
//! Each run's file is named by the time it started and its session id,
//! `20261128T194130.123Z-<session>.jsonl`, so that names sort by start. A file is an ordinary log
//! (chained, with its commit head kept by [`super::head`]); it is pruned and opened on a thread
//! of its own while the agent starts, and the run's first record waits for it.
//!
//! Retention removes whole files, oldest first: those last written longer ago than the age
//! limit, then as many as needed to bring the total under the size limit. A file another
//! process still writes (it holds the log's lock) is never removed. Before a file goes, a
//! line naming it, why it went and where its chain ended (its commit head, which goes with
//! it) is appended to `retired.jsonl` beside it: a run missing from the trail is either
//! listed there, or was removed by someone else.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::head;

/// The file, beside the runs' logs, that lists the ones retention removed.
pub(crate) const RETIRED: &str = "retired.jsonl";

/// How long, and how much, the trail keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Files last written longer ago than this are removed.
    pub max_age: Duration,
    /// The trail's files together stay under this many bytes (the oldest go first).
    pub max_bytes: u64,
}

impl Default for Retention {
    /// 30 days and 200 MiB: a busy month of a developer's runs is some 20 MiB.
    fn default() -> Retention {
        Retention {
            max_age: Duration::from_secs(30 * 24 * 3600),
            max_bytes: 200 << 20,
        }
    }
}

impl std::str::FromStr for Retention {
    type Err = String;

    /// `AGE`, `SIZE` or `AGE,SIZE`: `30d`, `500MiB`, `90d,1GiB` (what is not given keeps its
    /// default).
    fn from_str(s: &str) -> Result<Retention, String> {
        let mut retention = Retention::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(bytes) = parse_size(part) {
                retention.max_bytes = bytes;
            } else {
                retention.max_age = humantime::parse_duration(part).map_err(|e| {
                    format!("{part:?} is neither an age (30d, 12h) nor a size (200MiB, 1GiB): {e}")
                })?;
            }
        }
        Ok(retention)
    }
}

impl std::fmt::Display for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let days = self.max_age.as_secs() / 86_400;
        match self.max_age.as_secs() % 86_400 {
            0 => write!(f, "{days} days")?,
            _ => write!(f, "{}", humantime::format_duration(self.max_age))?,
        }
        write!(f, " and {} MiB", self.max_bytes >> 20)
    }
}

/// `200MiB`, `1GiB`, `512KiB`, `100MB`, `1048576B`: bytes, when `s` is a size.
fn parse_size(s: &str) -> Option<u64> {
    let digits = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// Where the trail is by default: `<state dir>/audit`.
pub(crate) fn default_dir() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("audit"))
}

/// The file a run that started at `started`, with session id `session`, writes.
pub(crate) fn file_name(started: SystemTime, session: &str) -> String {
    let stamp: String = humantime::format_rfc3339_millis(started)
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    format!("{stamp}-{session}.jsonl")
}

/// One run's file in the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunLog {
    /// The file, in the trail's directory: `<started>-<session>.jsonl`.
    pub path: PathBuf,
    /// The run's session id.
    pub session: String,
    /// When it started, as the name says (`20261128T194130.123Z`).
    pub started: String,
}

impl RunLog {
    fn from_path(path: PathBuf) -> Option<RunLog> {
        let name = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
        let (started, session) = name.split_once('-')?;
        if started.len() != 20 || !started.ends_with('Z') || session.is_empty() {
            return None;
        }
        let (session, started) = (session.to_owned(), started.to_owned());
        Some(RunLog {
            path,
            session,
            started,
        })
    }
}

/// The runs' files in `dir`, oldest first (none when there is no such directory).
pub(crate) fn runs(dir: &Path) -> io::Result<Vec<RunLog>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut runs: Vec<RunLog> = entries
        .filter_map(|e| RunLog::from_path(e.ok()?.path()))
        .collect();
    runs.sort_by(|a, b| a.started.cmp(&b.started).then(a.session.cmp(&b.session)));
    Ok(runs)
}

/// A run's file that retention removed, as `retired.jsonl` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Retired {
    /// The removed file's name in the trail (`<started>-<session>.jsonl`).
    pub file: String,
    /// The session id of the run that wrote it.
    pub session: String,
    /// When it was removed.
    pub removed: String,
    /// Why: its age, or the trail's size.
    pub why: String,
    /// Its size when it was removed, in bytes.
    pub bytes: u64,
    /// Where its chain ended when its writer closed it (`seq` and `hash` of the last record),
    /// when that was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<head::Head>,
}

/// What retention removed from `dir`, as `retired.jsonl` lists it (oldest first).
pub(crate) fn retired(dir: &Path) -> Vec<Retired> {
    std::fs::read_to_string(dir.join(RETIRED))
        .map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The mark of the trail's last pruning (its retention inside), beside the trail's directory
/// (`audit.pruned`: the trail holds the runs' files and `retired.jsonl` only), so that a run
/// prunes at most once an hour: listing a month of runs' files at every start costs about
/// 1.5 ms per 500 files, on the way to the agent's start.
fn pruned_mark(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_owned();
    name.push(".pruned");
    dir.with_file_name(name)
}

/// Whether the trail of `dir` is due for pruning under `retention`: never pruned, pruned
/// more than an hour ago, or under another retention (a changed `--audit-retention` acts at
/// the next run). When due, the mark is set now.
pub(crate) fn prune_due(dir: &Path, retention: Retention) -> bool {
    let said = format!("{}s,{}\n", retention.max_age.as_secs(), retention.max_bytes);
    crate::termlog::due_hourly(&pruned_mark(dir), &said)
}

/// Removes the runs' files of `dir` that `retention` no longer keeps, as `now` sees them,
/// listing each in `retired.jsonl` first. Heads kept in `heads` go with their files.
/// Returns what was removed.
pub(crate) fn prune(
    dir: &Path,
    heads: Option<&Path>,
    retention: Retention,
    now: SystemTime,
) -> io::Result<Vec<Retired>> {
    let mut sized = Vec::new();
    for run in runs(dir)? {
        let Ok(meta) = std::fs::metadata(&run.path) else {
            continue;
        };
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        sized.push((run, meta.len(), age));
    }
    let mut total: u64 = sized.iter().map(|(_, len, _)| len).sum();
    let mut removed = Vec::new();
    for (run, len, age) in sized {
        let why = if age > retention.max_age {
            format!(
                "last written {} days ago, past the trail's {}",
                age.as_secs() / 86_400,
                humantime::format_duration(retention.max_age)
            )
        } else if total > retention.max_bytes {
            format!(
                "the trail held {} MiB, past its {} MiB",
                total >> 20,
                retention.max_bytes >> 20
            )
        } else {
            continue;
        };
        if let Some(retired) = retire(dir, heads, &run, len, why)? {
            total -= len;
            removed.push(retired);
        }
    }
    Ok(removed)
}

/// Lists `run` in `retired.jsonl` (durably), then removes it and its head; `None` when a
/// writer still holds it.
fn retire(
    dir: &Path,
    heads: Option<&Path>,
    run: &RunLog,
    bytes: u64,
    why: String,
) -> io::Result<Option<Retired>> {
    let Ok(file) = File::open(&run.path) else {
        return Ok(None);
    };
    // Held while it is removed: a writer cannot take the file meanwhile.
    let Ok(_lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
        return Ok(None);
    };
    let head_path = heads.map(|h| head::head_path(h, &run.path));
    let retired = Retired {
        file: run
            .path
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
        session: run.session.clone(),
        removed: crate::protocol::now_rfc3339(),
        why,
        bytes,
        head: head_path.as_deref().and_then(head::read),
    };
    let mut ledger = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(dir.join(RETIRED))?;
    let mut line = serde_json::to_vec(&retired).map_err(io::Error::other)?;
    line.push(b'\n');
    ledger.write_all(&line)?;
    ledger.sync_data()?;
    std::fs::remove_file(&run.path)?;
    if let Some(head) = head_path {
        let _ = std::fs::remove_file(head);
    }
    Ok(Some(retired))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pruned at most once an hour, unless the retention changed.
    #[test]
    fn the_trail_is_pruned_at_most_hourly_unless_its_retention_changed() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("audit");
        std::fs::create_dir(&dir).unwrap();
        let month: Retention = "30d".parse().unwrap();
        assert!(prune_due(&dir, month), "never pruned");
        assert!(!prune_due(&dir, month), "pruned a moment ago");
        let smaller: Retention = "30d,1B".parse().unwrap();
        assert!(prune_due(&dir, smaller), "another retention");
        assert!(!prune_due(&dir, smaller));
        let mark = std::fs::File::options()
            .write(true)
            .open(pruned_mark(&dir))
            .unwrap();
        mark.set_modified(SystemTime::now() - Duration::from_secs(3601))
            .unwrap();
        assert!(prune_due(&dir, smaller), "an hour later");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "nothing in the trail"
        );
    }

    #[test]
    fn retention_reads_an_age_a_size_or_both_and_keeps_the_default_of_the_other() {
        let default = Retention::default();
        let r: Retention = "90d".parse().unwrap();
        assert_eq!(r.max_age, Duration::from_secs(90 * 86_400));
        assert_eq!(r.max_bytes, default.max_bytes);
        let r: Retention = "1GiB".parse().unwrap();
        assert_eq!((r.max_age, r.max_bytes), (default.max_age, 1 << 30));
        let r: Retention = "12h, 500MB".parse().unwrap();
        assert_eq!(r.max_age, Duration::from_secs(12 * 3600));
        assert_eq!(r.max_bytes, 500 << 20);
        let e = "soon".parse::<Retention>().unwrap_err();
        assert!(e.contains("neither an age"), "{e}");
        assert_eq!(default.to_string(), "30 days and 200 MiB");
    }

    #[test]
    fn a_run_file_is_named_to_sort_by_its_start_and_read_back() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_895_000);
        let name = file_name(t, "cbfc8c6a-e0eb-430b");
        assert_eq!(name, "20261128T194320.000Z-cbfc8c6a-e0eb-430b.jsonl");
        let run = RunLog::from_path(PathBuf::from("/x").join(&name)).unwrap();
        assert_eq!(run.session, "cbfc8c6a-e0eb-430b");
        assert_eq!(run.started, "20261128T194320.000Z");
        assert!(RunLog::from_path(PathBuf::from("/x/retired.jsonl")).is_none());
        assert!(RunLog::from_path(PathBuf::from("/x/notes.txt")).is_none());
    }

    fn write(dir: &Path, started: &str, session: &str, bytes: usize) -> PathBuf {
        let path = dir.join(format!("{started}-{session}.jsonl"));
        std::fs::write(&path, vec![b'x'; bytes]).unwrap();
        path
    }

    #[test]
    fn retention_removes_whole_files_oldest_first_and_lists_each_with_its_head() {
        let dir = tempfile::tempdir().unwrap();
        let heads = tempfile::tempdir().unwrap();
        let old = write(dir.path(), "20260101T000000.000Z", "old", 10);
        let big = write(dir.path(), "20261101T000000.000Z", "big", 3000);
        let new = write(dir.path(), "20261127T000000.000Z", "new", 2000);
        let head = head::Head {
            log: old.display().to_string(),
            seq: 7,
            hash: "ab".repeat(32),
            ts: "2026-01-01T00:10:00Z".into(),
        };
        let head_file = head::head_path(heads.path(), &old);
        head::write(&head_file, &head).unwrap();
        // `old` is past the age; the other two together are past the size, so `big` (the
        // older of them) goes too.
        let now = SystemTime::now() + Duration::from_secs(40 * 86_400);
        let keep_recent = |p: &Path| {
            let f = File::options().write(true).open(p).unwrap();
            f.set_modified(now - Duration::from_secs(3600)).unwrap();
        };
        keep_recent(&big);
        keep_recent(&new);
        let retention = Retention {
            max_age: Duration::from_secs(30 * 86_400),
            max_bytes: 4000,
        };
        let removed = prune(dir.path(), Some(heads.path()), retention, now).unwrap();
        let sessions: Vec<&str> = removed.iter().map(|r| r.session.as_str()).collect();
        assert_eq!(sessions, ["old", "big"]);
        assert!(!old.exists() && !big.exists() && new.exists());
        assert!(!head_file.exists(), "the head goes with its file");
        let listed = retired(dir.path());
        assert_eq!(listed, removed);
        assert_eq!(listed[0].head.as_ref(), Some(&head));
        assert!(listed[0].why.contains("days ago"), "{}", listed[0].why);
        assert!(listed[1].why.contains("MiB"), "{}", listed[1].why);
        assert_eq!(runs(dir.path()).unwrap().len(), 1);
    }

    #[test]
    fn retention_leaves_a_file_its_writer_still_holds() {
        let dir = tempfile::tempdir().unwrap();
        let held = write(dir.path(), "20260101T000000.000Z", "held", 10);
        let _writer =
            Flock::lock(File::open(&held).unwrap(), FlockArg::LockExclusiveNonblock).unwrap();
        let now = SystemTime::now() + Duration::from_secs(400 * 86_400);
        let removed = prune(dir.path(), None, Retention::default(), now).unwrap();
        assert!(removed.is_empty() && held.exists());
        assert!(retired(dir.path()).is_empty());
    }
}
