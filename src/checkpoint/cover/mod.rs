//! Whether the run's checkpoints keep everything a command may discard (the policy's
//! [`Reach`]), judged against the latest checkpoint and the disk as it is now, failing closed:
//! a path outside the workspace, in `.git`, in a left-out directory, not kept (too large, a
//! special file), changed since the checkpoint looked, or not resolved, is not covered; so is
//! git run in a repository other than the workspace's own, and a ref change where the
//! repository's history is not kept.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::policy::{Effect, Reach};

use super::{scan, Checkpointer, State};

/// The most entries one judgement looks at below what a command reaches: past it, not
/// covered (a `stat` each; the workspace's own limit is `max_files`).
const MAX_LOOKED: u64 = 200_000;

impl Checkpointer {
    /// Whether everything `reach` may discard is kept by the checkpoints as the disk holds it
    /// now; else why not, in words that follow "not reversible: ".
    pub(crate) fn covers(&self, reach: &Reach) -> Result<(), String> {
        let s = self.state.lock().map_err(|_| "the checkpoints failed")?;
        if let Some(why) = &s.failed {
            return Err(format!("the checkpoints stopped ({why})"));
        }
        let workspace = std::fs::canonicalize(&s.workspace)
            .map_err(|e| format!("the workspace cannot be resolved ({e})"))?;
        let mut tracked = None;
        for effect in &reach.effects {
            match effect {
                Effect::Tree(root) => s.tree(&workspace, root, Within::Everything)?,
                Effect::WorkTree {
                    cwd,
                    root,
                    tracked_only,
                } => {
                    own_repository(&workspace, cwd)?;
                    let within = if *tracked_only {
                        let tracked = tracked.get_or_insert_with(|| scan::tracked(&workspace));
                        Within::Tracked(tracked)
                    } else {
                        Within::WorkTree
                    };
                    s.tree(&workspace, root, within)?;
                }
                Effect::Refs { cwd } => {
                    own_repository(&workspace, cwd)?;
                    if s.history.is_none() {
                        return Err("the repository's history is not kept".into());
                    }
                }
            }
        }
        Ok(())
    }
}

/// Which paths below a root a command may discard.
enum Within<'a> {
    /// All of them, `.git` too (`rm -rf`).
    Everything,
    /// Those of the work tree, not the repository's own `.git` (`git clean`).
    WorkTree,
    /// Those git tracks (`git checkout -- .`): the index's paths, read now.
    Tracked(&'a std::collections::HashSet<String>),
}

impl State {
    /// Whether the latest checkpoint keeps, as they are now, the paths below `root` that
    /// `within` names.
    fn tree(&self, workspace: &Path, root: &Path, within: Within<'_>) -> Result<(), String> {
        let root = resolved(root)?;
        let shown = root.display();
        let rel = match root.strip_prefix(workspace) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => return Err(format!("{shown} is outside the workspace")),
        };
        if rel == ".git" || rel.starts_with(".git/") {
            return Err(format!("{shown} is in the repository's .git"));
        }
        if rel.is_empty() && matches!(within, Within::Everything) {
            return Err("it removes the workspace itself".into());
        }
        let below = |p: &str, top: &str| {
            top.is_empty()
                || p == top
                || (p.len() > top.len() && p.starts_with(top) && p.as_bytes()[top.len()] == b'/')
        };
        for dir in &self.left_out {
            let overlaps = below(dir, &rel) || below(&rel, dir);
            let reached = match &within {
                Within::Tracked(tracked) => tracked.iter().any(|p| below(p, dir) && below(p, &rel)),
                _ => overlaps,
            };
            if reached {
                return Err(format!(
                    "it reaches {dir}, which the checkpoints leave out ([checkpoints] exclude)"
                ));
            }
        }
        let mut looked = 0;
        self.look(workspace, &root, &rel, &within, &mut looked)
    }

    /// [`State::tree`] for one path (`rel` to the workspace) and what lies below it.
    fn look(
        &self,
        workspace: &Path,
        path: &Path,
        rel: &str,
        within: &Within<'_>,
        looked: &mut u64,
    ) -> Result<(), String> {
        *looked += 1;
        if *looked > MAX_LOOKED {
            return Err(format!("it reaches more than {MAX_LOOKED} paths"));
        }
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{rel} cannot be read ({e})")),
        };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == ".git" {
            // The repository's own `.git`, at the top: git's commands never remove it.
            if rel == ".git" && !matches!(within, Within::Everything) {
                return Ok(());
            }
            return Err(format!(
                "it reaches {rel}, a repository the checkpoints do not keep"
            ));
        }
        let kind = meta.file_type();
        if matches!(within, Within::Tracked(_)) && self.left_out.contains(rel) {
            // No file git tracks is there ([`State::tree`] looked).
            return Ok(());
        }
        if kind.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| format!("{rel} cannot be read ({e})"))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{rel} cannot be read ({e})"))?;
                let name = entry.file_name();
                let name = name
                    .to_str()
                    .ok_or_else(|| format!("a name in {rel} is not UTF-8"))?;
                let child = match rel {
                    "" => name.to_owned(),
                    rel => format!("{rel}/{name}"),
                };
                self.look(workspace, &workspace.join(&child), &child, within, looked)?;
            }
            return Ok(());
        }
        if let Within::Tracked(tracked) = within {
            if !tracked.contains(rel) {
                return Ok(());
            }
        }
        if !kind.is_file() && !kind.is_symlink() {
            return Err(format!("{rel} is not a file or link the checkpoints keep"));
        }
        let Some(kept) = self.current.get(rel) else {
            return Err(format!("{rel} is in no checkpoint yet"));
        };
        if kept.kind == scan::Kind::TooLarge {
            return Err(format!(
                "{rel} is too large to keep ([checkpoints] max_file_mb)"
            ));
        }
        let (mtime, ctime) = scan::times(&meta);
        if kept.stat != (mtime, ctime, meta.ino()) {
            return Err(format!("{rel} changed since the checkpoint looked"));
        }
        Ok(())
    }
}

/// `path` with the links of the part that exists resolved (so that a link cannot lead the
/// judgement outside the workspace), the rest as written.
fn resolved(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(real) => {
                let mut out = real;
                out.extend(rest.iter().rev());
                // What `rm -r link` removes is the link itself, not where it leads.
                if rest.is_empty() && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink())
                {
                    let parent = path.parent().ok_or("a link with no parent")?;
                    let name = path.file_name().ok_or("a link with no name")?;
                    return Ok(resolved(parent)?.join(name));
                }
                return Ok(out);
            }
            Err(_) => {
                let name = existing
                    .file_name()
                    .ok_or_else(|| format!("{} cannot be resolved", path.display()))?;
                rest.push(name.to_owned());
                existing = existing
                    .parent()
                    .ok_or_else(|| format!("{} cannot be resolved", path.display()))?;
            }
        }
    }
}

/// Whether git run in `cwd` acts on the workspace's own repository: `cwd` inside the
/// workspace, `.git` a directory at the workspace's top, and no other `.git` in between (a
/// nested repository, a submodule).
fn own_repository(workspace: &Path, cwd: &Path) -> Result<(), String> {
    let cwd = resolved(cwd)?;
    if !cwd.starts_with(workspace) {
        return Err(format!(
            "git runs in {}, outside the workspace",
            cwd.display()
        ));
    }
    if !std::fs::symlink_metadata(workspace.join(".git")).is_ok_and(|m| m.is_dir()) {
        return Err("the workspace's .git is not a directory".into());
    }
    for dir in cwd.ancestors().take_while(|d| *d != workspace) {
        if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
            return Err(format!(
                "git runs in another repository ({})",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// A call allowed as reversible, for the run's summary: what it was asked, the undo that
/// brings back what it discarded, and what the next checkpoint found it changed.
#[derive(Debug, Clone)]
pub struct Reversed {
    /// The checkpoint before it: `undo --to` this.
    pub checkpoint: u64,
    /// What it was asked (its command).
    pub what: String,
    /// The command that brings back what it discarded.
    pub undo: String,
    /// What the next checkpoint found created, changed and deleted (relative paths); `None`
    /// until one is taken.
    pub discarded: Option<scan::Changes>,
}

impl Checkpointer {
    /// Notes that the call after checkpoint `n` (asked `what`) was allowed as reversible,
    /// `undo` bringing it back; returns nothing, the summary says it.
    pub(crate) fn note_reversed(&self, n: u64, what: String, undo: String) {
        if let Ok(mut s) = self.state.lock() {
            s.reversed.push(Reversed {
                checkpoint: n,
                what,
                undo,
                discarded: None,
            });
        }
    }
}

impl State {
    /// Gives the reversible calls before checkpoint `n` that have no account yet what this
    /// checkpoint found changed (`delta`, before it is applied to the current manifest).
    pub(super) fn account_reversed(&mut self, n: u64, delta: &scan::Delta) {
        if self
            .reversed
            .iter()
            .all(|r| r.discarded.is_some() || r.checkpoint >= n)
        {
            return;
        }
        let mut changes = scan::Changes::default();
        for (p, e) in &delta.set {
            match self.current.get(p) {
                None => changes.created.push(p.clone()),
                Some(old) if !old.same_as(e) => changes.changed.push(p.clone()),
                Some(_) => {}
            }
        }
        changes.deleted.extend(delta.deleted.iter().cloned());
        for r in &mut self.reversed {
            if r.discarded.is_none() && r.checkpoint < n {
                r.discarded = Some(changes.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests;
