//! The run's side of the agent's mixed state files on the floor: the private copy of each
//! made before the agent starts (and the file itself, empty, when the agent has not made it
//! yet: a bind needs something to cover), and at the end what became of each change: merged
//! into the real file, or kept aside with the command that restores it. Nothing is dropped
//! without a word: a copy that cannot be merged is kept whole.
//!
//! [`statefile`](crate::statefile) sorts and merges; this module holds the files and says
//! what happened.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::plan::Copy;
use crate::statefile::merge::{self, Change, MergeError, Record};
use crate::statefile::{key_text, Format, StateFile};

/// How the agent writes one mixed state file on the floor, and so where its version is read
/// at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writes {
    /// Outside the writable roots: through the run's private copy, bound over the file; the
    /// agent's own keys are merged into the file at the end.
    Bound,
    /// Beneath a writable root: in place (the agent replaces it by a rename, which a bind
    /// would refuse); its instruction keys are undone at the end.
    InPlace,
    /// Through an overlay's entry that stands for it (Copilot's run-private home): that
    /// entry, once the agent replaced it by a file of its own, is merged as a bound copy is;
    /// while it is still the overlay's link, the file is settled as one written in place.
    Through,
}

/// One mixed state file held for the run.
#[derive(Clone)]
struct Held {
    file: StateFile,
    /// The real file (`file.path`) and where the agent's version of it is read at the end
    /// (the bound copy, the overlay's entry, or the file itself).
    copy: Copy,
    writes: Writes,
    /// What the file held at the start, parsed and as bytes.
    before: Value,
    before_bytes: Vec<u8>,
    /// Whether the run made the file (the agent had not yet, and a bind needs something to
    /// cover): removed again if the agent leaves it empty.
    made: bool,
}

/// The copies of one run.
#[derive(Default)]
pub struct Copies(Vec<Held>);

/// What became of one file's changes, for the person and the audit log.
pub struct Outcome {
    /// The real file.
    pub file: PathBuf,
    /// The keys merged.
    pub merged: Vec<String>,
    /// The keys kept aside, and where.
    pub kept: Vec<String>,
    /// The record of what was kept aside (or the agent's whole copy), in the quarantine.
    pub quarantine: Option<PathBuf>,
    /// Why something could not be merged (the copy is then kept whole).
    pub failed: Option<String>,
    /// The agent wrote the file in place: what was kept aside was undone there.
    pub in_place: bool,
}

impl Copies {
    /// Holds each of the plan's `mixed` files: one outside the `writable` roots is copied
    /// into `dir` (and made first, empty, when it does not exist yet); one beneath them is
    /// only read. A file that cannot be read or copied is left out, with the reason (the
    /// agent then cannot write it, as before).
    pub(crate) fn make(
        mixed: &[StateFile],
        writable: &[PathBuf],
        dir: &Path,
    ) -> (Copies, Vec<String>) {
        let mut held = Vec::new();
        let mut problems = Vec::new();
        for (n, file) in mixed.iter().enumerate() {
            let writes = match &file.through {
                Some(_) => Writes::Through,
                None if writable.iter().any(|w| file.path.starts_with(w)) => Writes::InPlace,
                None => Writes::Bound,
            };
            match hold(
                file,
                writes,
                &dir.join(format!("{n}-{}", plain_name(&file.path))),
            ) {
                Ok(h) => held.push(h),
                Err(e) => problems.push(format!(
                    "{} is not writable for the agent on this run: {}",
                    file.path.display(),
                    crate::error_chain(&e)
                )),
            }
        }
        (Copies(held), problems)
    }

    /// What the floor binds.
    pub(crate) fn binds(&self) -> Vec<Copy> {
        self.0
            .iter()
            .filter(|h| h.writes == Writes::Bound)
            .map(|h| h.copy.clone())
            .collect()
    }

    /// Sorts and merges every file's changes (after the agent's tree has ended), keeping
    /// aside what must not be merged in `quarantine`.
    pub fn finish(&self, workspace: &[String], quarantine: Option<&Path>) -> Vec<Outcome> {
        self.0
            .iter()
            .filter_map(|h| h.finish(workspace, quarantine))
            .collect()
    }
}

/// A file's name without its leading dots, for the names of its copy and records.
fn plain_name(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.trim_start_matches('.').to_owned()
}

/// Creates `path` (which must not exist) readable by us alone, holding `bytes`.
fn create_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
}

/// Holds one file written as `writes` says; a bound one is copied to `copy`.
fn hold(file: &StateFile, writes: Writes, copy: &Path) -> Result<Held, MergeError> {
    let path = &file.path;
    let read = |source| MergeError::Read {
        path: path.display().to_string(),
        source,
    };
    let (bytes, made) = match std::fs::read(path) {
        Ok(b) => (b, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && writes == Writes::Bound => {
            let empty: &[u8] = match file.format {
                Format::Json => b"{}",
                Format::Toml => b"",
            };
            create_private(path, empty).map_err(read)?;
            (empty.to_vec(), true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), false),
        Err(e) => return Err(read(e)),
    };
    let before = merge::parse(&bytes, file.format, path)?;
    let copy = match (writes, &file.through) {
        (Writes::Bound, _) => {
            if let Some(dir) = copy.parent() {
                std::fs::create_dir_all(dir).map_err(read)?;
            }
            create_private(copy, &bytes).map_err(|source| MergeError::Write {
                path: copy.display().to_string(),
                source,
            })?;
            copy.to_owned()
        }
        (Writes::Through, Some(through)) => through.clone(),
        _ => path.clone(),
    };
    Ok(Held {
        file: file.clone(),
        copy: Copy {
            file: path.clone(),
            copy,
        },
        writes,
        before,
        before_bytes: bytes,
        made,
    })
}

impl Held {
    fn finish(&self, workspace: &[String], quarantine: Option<&Path>) -> Option<Outcome> {
        // An overlay's entry still linked to the file (or never made): whatever the tree
        // wrote went to the file itself, which is then settled as one written in place.
        if self.writes == Writes::Through
            && !self
                .copy
                .copy
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_file())
        {
            let in_place = Held {
                writes: Writes::InPlace,
                copy: Copy {
                    file: self.copy.file.clone(),
                    copy: self.copy.file.clone(),
                },
                ..self.clone()
            };
            return in_place.finish(workspace, quarantine);
        }
        let path = &self.copy.file;
        let in_place = self.writes == Writes::InPlace;
        let mut outcome = Outcome {
            file: path.clone(),
            merged: Vec::new(),
            kept: Vec::new(),
            quarantine: None,
            failed: None,
            in_place,
        };
        // Written in place, the file may have been removed: nothing is left of any key.
        let after = match in_place {
            // Read without following a link the tree may have put in the file's place.
            true => merge::read_agents_doc(&self.copy.copy, self.file.format),
            false => merge::read_agents(&self.copy.copy).and_then(|b| match b {
                Some(b) => merge::parse(&b, self.file.format, path),
                None => Err(MergeError::Read {
                    path: self.copy.copy.display().to_string(),
                    source: std::io::ErrorKind::NotFound.into(),
                }),
            }),
        };
        let after = match after {
            Ok(a) => a,
            Err(e) => {
                outcome.failed = Some(crate::error_chain(&e));
                outcome.quarantine = quarantine.and_then(|q| self.keep_whole(q));
                if in_place {
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
        // In place, the agent's own keys are there already and its instructions are undone;
        // else its own keys are merged into the file and its instructions never reach it.
        let (apply, from): (Vec<Change>, &Value) = match in_place {
            true => (
                sorted.kept.iter().map(Change::undone).collect(),
                &self.before,
            ),
            false => (sorted.merged.clone(), &after),
        };
        if !apply.is_empty() {
            if let Err(e) = self.merge(&apply, from) {
                if in_place {
                    outcome.failed = Some(format!("its instructions could not be undone: {e}"));
                } else {
                    outcome.failed = Some(e);
                    outcome.merged.clear();
                    outcome.quarantine = quarantine.and_then(|q| self.keep_whole(q));
                    return Some(outcome);
                }
            }
        }
        if !sorted.kept.is_empty() {
            outcome.quarantine = quarantine.and_then(|q| self.keep(q, sorted.kept));
        }
        Some(outcome)
    }

    /// Applies `changes` to the real file as it is now, under the agent's lock.
    fn merge(&self, changes: &[Change], after: &Value) -> Result<(), String> {
        let path = &self.copy.file;
        let failed = merge::apply_to_file(
            path,
            self.file.format,
            self.file.lock.as_deref(),
            changes,
            after,
        )
        .map_err(|e| crate::error_chain(&e))?;
        if !failed.is_empty() {
            let keys: Vec<String> = failed.iter().map(|c| key_text(&c.key)).collect();
            tracing::warn!(
                "{}: not merged, the file no longer has a table above: {}",
                path.display(),
                keys.join(", ")
            );
        }
        Ok(())
    }

    /// Removes the file the run made when the agent left it as made.
    fn unmake(&self) {
        if self.made
            && merge::read_agents_doc(&self.copy.file, self.file.format)
                .is_ok_and(|v| v.as_object().is_some_and(|m| m.is_empty()))
        {
            if let Ok(e) = crate::beneath::Entry::of(&self.copy.file) {
                let _ = e.remove();
            }
        }
    }

    /// A quarantine record of `changes`: what `ahp-wrap restore` applies.
    fn keep(&self, dir: &Path, changes: Vec<Change>) -> Option<PathBuf> {
        let record = Record {
            file: self.copy.file.clone(),
            format: self.file.format,
            lock: self.file.lock.clone(),
            changes,
        };
        self.write_record(dir, "kept.json", &serde_json::to_vec_pretty(&record).ok()?)
    }

    /// The agent's whole copy, when its changes could not be sorted or merged.
    fn keep_whole(&self, dir: &Path) -> Option<PathBuf> {
        let bytes = merge::read_agents(&self.copy.copy).ok()??;
        self.write_record(dir, "copy", &bytes)
    }

    fn write_record(&self, dir: &Path, ext: &str, bytes: &[u8]) -> Option<PathBuf> {
        let name = crate::statefile::aside::new_name(dir, &self.copy.file).ok()?;
        let path = dir.join(format!("{name}.{ext}"));
        create_private(&path, bytes).ok()?;
        Some(path)
    }
}

/// The names an agent may give this run's project: the workspace, and the top of the git
/// repository it lies in (the nearest directory above with a `.git`).
pub fn project_names(workspace: &Path) -> Vec<String> {
    let mut names = vec![workspace.display().to_string()];
    if let Some(top) = workspace.ancestors().find(|d| d.join(".git").exists()) {
        if top != workspace {
            names.push(top.display().to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statefile::{KeyRule, Treatment};

    fn declared(path: PathBuf) -> StateFile {
        StateFile {
            path,
            format: Format::Json,
            rules: vec![KeyRule::new("mcpServers", Treatment::Guarded)],
            other: Treatment::Own,
            through: None,
            lock: None,
        }
    }

    /// A home (not writable) and a writable directory, a state file in each, held.
    fn held(dir: &Path) -> (Copies, PathBuf, PathBuf) {
        let (home, writable) = (dir.join("home"), dir.join("state"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&writable).unwrap();
        let (bound, in_place) = (home.join(".bound.json"), writable.join("in-place.json"));
        std::fs::write(&bound, r#"{"theme":"dark"}"#).unwrap();
        std::fs::write(&in_place, r#"{"theme":"dark"}"#).unwrap();
        let files = [declared(bound.clone()), declared(in_place.clone())];
        let (copies, problems) =
            Copies::make(&files, std::slice::from_ref(&writable), &dir.join("run"));
        assert!(problems.is_empty(), "{problems:?}");
        (copies, bound, in_place)
    }

    #[test]
    fn an_unreadable_result_never_reaches_the_file_and_is_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (copies, bound, in_place) = held(dir.path());
        assert_eq!(
            copies.binds().len(),
            1,
            "only the file outside the writable roots"
        );
        let copy = &copies.binds()[0].copy;
        std::fs::write(copy, "{ broken").unwrap();
        std::fs::write(&in_place, "{ broken").unwrap();
        let quarantine = dir.path().join("quarantine");
        let outcomes = copies.finish(&[], Some(&quarantine));
        assert_eq!(outcomes.len(), 2);
        for o in &outcomes {
            assert!(o
                .failed
                .as_deref()
                .is_some_and(|f| f.contains("not valid JSON")));
            let kept = o.quarantine.as_ref().expect("the agent's version is kept");
            assert_eq!(std::fs::read_to_string(kept).unwrap(), "{ broken");
        }
        // The bound file was never touched; the one written in place is as it was.
        assert_eq!(
            std::fs::read_to_string(&bound).unwrap(),
            r#"{"theme":"dark"}"#
        );
        assert_eq!(
            std::fs::read_to_string(&in_place).unwrap(),
            r#"{"theme":"dark"}"#
        );
    }

    #[test]
    fn own_keys_are_merged_and_instructions_kept_aside_or_undone() {
        let dir = tempfile::tempdir().unwrap();
        let (copies, bound, in_place) = held(dir.path());
        let agent = r#"{"theme":"light","mcpServers":{"evil":{"command":"sh"}}}"#;
        std::fs::write(&copies.binds()[0].copy, agent).unwrap();
        std::fs::write(&in_place, agent).unwrap();
        let quarantine = dir.path().join("quarantine");
        let outcomes = copies.finish(&[], Some(&quarantine));
        for (o, path) in outcomes.iter().zip([&bound, &in_place]) {
            assert_eq!(o.merged, ["theme"]);
            assert_eq!(o.kept, ["mcpServers"]);
            let doc = merge::read_doc(path, Format::Json).unwrap();
            assert_eq!(
                doc,
                serde_json::json!({"theme": "light"}),
                "{}",
                path.display()
            );
            let record: Record =
                serde_json::from_slice(&std::fs::read(o.quarantine.as_ref().unwrap()).unwrap())
                    .unwrap();
            assert_eq!(record.file, *path);
            assert_eq!(record.changes[0].key, ["mcpServers"]);
        }
        assert!(!outcomes[0].in_place && outcomes[1].in_place);
    }

    #[test]
    fn a_file_made_for_the_bind_goes_when_the_agent_leaves_it_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".absent.json");
        let (copies, _) = Copies::make(&[declared(path.clone())], &[], &dir.path().join("run"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{}",
            "made to be bound over"
        );
        assert!(copies.finish(&[], None).is_empty(), "nothing changed");
        assert!(!path.exists(), "removed again");
    }
}
