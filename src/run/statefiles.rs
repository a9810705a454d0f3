//! The run's side of the agent's mixed state files on the floor: the private copy of each
//! made before the agent starts (and the file itself, empty, when the agent has not made it
//! yet: a bind needs something to cover), and at the end what became of each change: merged
//! into the real file, or kept aside with the command that restores it. Nothing is dropped
//! without a word: a copy that cannot be merged is kept whole.
//!
//! [`statefile`](crate::statefile) sorts and merges; this module holds the files and says
//! what happened.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::floor::plan::Copy;
use crate::statefile::merge::{self, Change, MergeError};
use crate::statefile::{key_text, Format, StateFile};

/// How long the merge waits for the agent's own lock on a file (another session's write).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// One mixed state file held for the run.
#[derive(Clone)]
pub(super) struct Held {
    file: StateFile,
    /// The real file (symlinks resolved) and its copy.
    copy: Copy,
    /// What the file held when the copy was made, parsed and as bytes.
    before: Value,
    before_bytes: Vec<u8>,
    /// The copy is bound over the file (else the agent writes the file in place, or writes
    /// the copy itself: an overlay's entry that stands for the file).
    bound: bool,
    /// The file lies beneath a writable root: the agent writes it in place (it replaces it by
    /// a rename, which a bind would refuse), and at the end its changes to instruction keys
    /// are undone. `copy.copy` is then the file itself.
    in_place: bool,
    /// Whether the run made the file (the agent had not yet): removed again if the agent
    /// leaves it empty.
    made: bool,
}

/// The copies of one run.
#[derive(Default)]
pub(super) struct Copies(Vec<Held>);

/// What became of one file's changes, for the person and the audit log.
pub(super) struct Outcome {
    pub file: PathBuf,
    /// The keys merged.
    pub merged: Vec<String>,
    /// The keys kept aside, and where.
    pub kept: Vec<String>,
    pub quarantine: Option<PathBuf>,
    /// Why something could not be merged (the copy is then kept whole).
    pub failed: Option<String>,
    /// The agent wrote the file in place: what was kept aside was undone there.
    pub in_place: bool,
}

impl Copies {
    /// Copies each of `mixed` (the plan's, canonical) into `dir`, making a file that does not
    /// exist yet; one beneath a `writable` root is only read (written in place, settled at
    /// the end). A file that cannot be read or copied is left out, with the reason (the agent
    /// then cannot write it, as before).
    pub(super) fn make(
        declared: &[StateFile],
        mixed: &[PathBuf],
        writable: &[PathBuf],
        dir: &Path,
    ) -> (Copies, Vec<String>) {
        let mut held = Vec::new();
        let mut problems = Vec::new();
        for (n, path) in mixed.iter().enumerate() {
            let Some(file) = declared.iter().find(|d| same_file(&d.path, path)) else {
                continue;
            };
            let in_place = writable.iter().any(|w| path.starts_with(w));
            let one = match &file.through {
                Some(through) => hold_through(file, path, through),
                None => hold(file, path, (!in_place).then_some(dir), n),
            };
            match one {
                Ok(h) => held.push(h),
                Err(e) => problems.push(format!(
                    "{} is not writable for the agent on this run: {}",
                    path.display(),
                    crate::error_chain(&e)
                )),
            }
        }
        (Copies(held), problems)
    }

    /// What the floor binds.
    pub(super) fn binds(&self) -> Vec<Copy> {
        self.0
            .iter()
            .filter(|h| h.bound)
            .map(|h| h.copy.clone())
            .collect()
    }

    /// Sorts and merges every file's changes (after the agent's tree has ended), keeping
    /// aside what must not be merged in `quarantine`.
    pub(super) fn finish(&self, workspace: &[String], quarantine: Option<&Path>) -> Vec<Outcome> {
        self.0
            .iter()
            .filter_map(|h| h.finish(workspace, quarantine))
            .collect()
    }
}

/// Whether `declared` names the canonical `path`.
fn same_file(declared: &Path, path: &Path) -> bool {
    declared == path
        || declared
            .parent()
            .and_then(|d| d.canonicalize().ok())
            .zip(declared.file_name())
            .is_some_and(|(d, name)| {
                let p = d.join(name);
                p == path || p.canonicalize().is_ok_and(|c| c == path)
            })
}

/// Holds one file the agent writes through `through` (an overlay's entry standing for it):
/// only what it holds now is kept.
fn hold_through(file: &StateFile, path: &Path, through: &Path) -> Result<Held, MergeError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => {
            return Err(MergeError::Read {
                path: path.display().to_string(),
                source,
            })
        }
    };
    Ok(Held {
        file: file.clone(),
        copy: Copy {
            file: path.to_owned(),
            copy: through.to_owned(),
        },
        before: merge::parse(&bytes, file.format, path)?,
        before_bytes: bytes,
        bound: false,
        in_place: false,
        made: false,
    })
}

/// Holds one file: copied into `dir`, or (`None`: it is written in place) only read.
fn hold(file: &StateFile, path: &Path, dir: Option<&Path>, n: usize) -> Result<Held, MergeError> {
    use std::os::unix::fs::OpenOptionsExt;
    let read = |source| MergeError::Read {
        path: path.display().to_string(),
        source,
    };
    let (bytes, made) = match std::fs::read(path) {
        Ok(b) => (b, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.is_none() => (Vec::new(), false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let empty: &[u8] = match file.format {
                Format::Json => b"{}",
                Format::Toml => b"",
            };
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .and_then(|mut f| std::io::Write::write_all(&mut f, empty))
                .map_err(read)?;
            (empty.to_vec(), true)
        }
        Err(e) => return Err(read(e)),
    };
    let before = merge::parse(&bytes, file.format, path)?;
    let Some(dir) = dir else {
        return Ok(Held {
            file: file.clone(),
            copy: Copy {
                file: path.to_owned(),
                copy: path.to_owned(),
            },
            before,
            before_bytes: bytes,
            bound: false,
            in_place: true,
            made,
        });
    };
    std::fs::create_dir_all(dir).map_err(read)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let copy = dir.join(format!("{n}-{}", name.trim_start_matches('.')));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&copy)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .map_err(|source| MergeError::Write {
            path: copy.display().to_string(),
            source,
        })?;
    Ok(Held {
        file: file.clone(),
        copy: Copy {
            file: path.to_owned(),
            copy,
        },
        before,
        before_bytes: bytes,
        bound: true,
        in_place: false,
        made,
    })
}

impl Held {
    fn finish(&self, workspace: &[String], quarantine: Option<&Path>) -> Option<Outcome> {
        let path = &self.copy.file;
        let mut outcome = Outcome {
            file: path.clone(),
            merged: Vec::new(),
            kept: Vec::new(),
            quarantine: None,
            failed: None,
            in_place: self.in_place,
        };
        // An overlay's entry still linked to the file (or never made): whatever the tree
        // wrote went to the file itself, which is then settled as one written in place.
        let through_file = self
            .copy
            .copy
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_file());
        if !self.bound && !self.in_place && !through_file {
            let in_place = Held {
                in_place: true,
                copy: Copy {
                    file: path.clone(),
                    copy: path.clone(),
                },
                ..self.clone()
            };
            return in_place.finish(workspace, quarantine);
        }
        let after = match std::fs::read(&self.copy.copy) {
            // Written in place, it may have been removed: nothing is left of any key.
            Err(e) if self.in_place && e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            r => r,
        }
        .map_err(|source| MergeError::Read {
            path: self.copy.copy.display().to_string(),
            source,
        })
        .and_then(|b| merge::parse(&b, self.file.format, path));
        let after = match after {
            Ok(a) => a,
            Err(e) => {
                outcome.failed = Some(crate::error_chain(&e));
                outcome.quarantine = quarantine.and_then(|q| self.keep_whole(q));
                if self.in_place {
                    // Nothing unreadable is left where later sessions read.
                    if let Err(e) = merge::write_atomic(path, &self.before_bytes) {
                        tracing::warn!("{}: {}", path.display(), crate::error_chain(&e));
                    }
                }
                return Some(outcome);
            }
        };
        if self.before == after {
            self.unmake();
            return None;
        }
        let sorted = merge::sort(&self.file, &self.before, &after, workspace);
        outcome.merged = sorted.merged.iter().map(|c| key_text(&c.key)).collect();
        outcome.kept = sorted.kept.iter().map(|c| key_text(&c.key)).collect();
        if self.in_place {
            if !sorted.kept.is_empty() {
                outcome.quarantine = quarantine.and_then(|q| self.keep(q, &sorted.kept));
                let undo: Vec<Change> = sorted
                    .kept
                    .iter()
                    .map(|c| Change {
                        key: c.key.clone(),
                        old: c.new.clone(),
                        new: c.old.clone(),
                        member: c.member,
                    })
                    .collect();
                if let Err(e) = self.merge(&undo, &self.before) {
                    outcome.failed = Some(format!("its instructions could not be undone: {e}"));
                }
            }
            return Some(outcome);
        }
        if !sorted.merged.is_empty() {
            if let Err(e) = self.merge(&sorted.merged, &after) {
                outcome.failed = Some(e);
                outcome.merged.clear();
                outcome.quarantine = quarantine.and_then(|q| self.keep_whole(q));
                return Some(outcome);
            }
        }
        if !sorted.kept.is_empty() {
            outcome.quarantine = quarantine.and_then(|q| self.keep(q, &sorted.kept));
        }
        Some(outcome)
    }

    /// Merges `changes` into the real file as it is now, under the agent's lock.
    fn merge(&self, changes: &[Change], after: &Value) -> Result<(), String> {
        let path = &self.copy.file;
        let _lock = merge::Lock::take(self.file.lock.as_deref(), LOCK_WAIT);
        let now = std::fs::read(path).map_err(|source| MergeError::Read {
            path: path.display().to_string(),
            source,
        });
        let mut doc = match now {
            Ok(b) => {
                merge::parse(&b, self.file.format, path).map_err(|e| crate::error_chain(&e))?
            }
            // Removed meanwhile: the merge makes it anew.
            Err(MergeError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                json!({})
            }
            Err(e) => return Err(crate::error_chain(&e)),
        };
        let failed = merge::apply(&mut doc, changes, after);
        if !failed.is_empty() {
            let keys: Vec<String> = failed.iter().map(|c| key_text(&c.key)).collect();
            tracing::warn!(
                "{}: not merged, the file no longer has a table above: {}",
                path.display(),
                keys.join(", ")
            );
        }
        let bytes =
            merge::serialize(&doc, self.file.format, path).map_err(|e| crate::error_chain(&e))?;
        merge::write_atomic(path, &bytes).map_err(|e| crate::error_chain(&e))
    }

    /// Removes the file the run made when the agent left it as made.
    fn unmake(&self) {
        if self.made
            && std::fs::read(&self.copy.file)
                .ok()
                .and_then(|b| merge::parse(&b, self.file.format, &self.copy.file).ok())
                .is_some_and(|v| v.as_object().is_some_and(|m| m.is_empty()))
        {
            let _ = std::fs::remove_file(&self.copy.file);
        }
    }

    /// A quarantine record of `changes`: what `ahp-wrap restore` applies.
    fn keep(&self, dir: &Path, changes: &[Change]) -> Option<PathBuf> {
        let record = json!({
            "file": self.copy.file,
            "format": match self.file.format { Format::Json => "json", Format::Toml => "toml" },
            "lock": self.file.lock,
            "changes": changes,
        });
        self.write_record(dir, "kept.json", &serde_json::to_vec_pretty(&record).ok()?)
    }

    /// The agent's whole copy, when its changes could not be sorted or merged.
    fn keep_whole(&self, dir: &Path) -> Option<PathBuf> {
        let bytes = std::fs::read(&self.copy.copy).ok()?;
        self.write_record(dir, "copy", &bytes)
    }

    fn write_record(&self, dir: &Path, ext: &str, bytes: &[u8]) -> Option<PathBuf> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
        let name = self
            .copy
            .file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .trim_start_matches('.')
            .to_owned();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let path = dir.join(format!("{stamp}-{}-{name}.{ext}", crate::random_hex(3)));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
            .ok()?;
        Some(path)
    }
}

/// The names an agent may give this run's project: the workspace, and the top of the git
/// repository it lies in (the nearest directory above with a `.git`).
pub(super) fn project_names(workspace: &Path) -> Vec<String> {
    let mut names = vec![workspace.display().to_string()];
    if let Some(top) = workspace.ancestors().find(|d| d.join(".git").exists()) {
        if top != workspace {
            names.push(top.display().to_string());
        }
    }
    names
}

/// Where kept-aside changes go: `quarantine/` in the user's state directory for ahp-wrap.
pub(super) fn quarantine_dir() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("quarantine"))
}
