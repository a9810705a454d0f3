//! The repository's history as the checkpoints keep it: its refs (`HEAD`, `packed-refs`, every
//! file under `refs/`), its reflogs (`logs/`) and its objects (`objects/`), so that `undo` can
//! take back a deleted branch, a dropped stash, a reset, or a `gc` that pruned them.
//!
//! The refs and reflogs are small: a checkpoint that finds one changed writes a *snapshot*, a
//! JSON map of `.git`-relative path to content hash, its contents kept in the store as the
//! workspace's files are. A git object never changes once written (a loose object and a pack
//! are named by their content), so each is kept once, hard-linked into the store's
//! `git/<workspace key>/objects/` (copied across file systems); a look lists an objects
//! directory again only when its modification time moved.
//!
//! Only a workspace whose `.git` is a directory is covered (a `.git` file, a worktree's or a
//! submodule's, is not). Git is never run and its configuration never read (both are the
//! agent's to write), and nothing in `.git` is followed through a link: a symbolic link or a
//! special file where a ref or an object was is not kept, and one on the way of a restore is
//! refused.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::store::Store;
use crate::beneath::{Entry as At, FileType};

/// A refs snapshot: `.git`-relative path to the hash of its content in the store.
pub(crate) type Snapshot = BTreeMap<String, String>;

/// What tells a change without reading a file: size, modification and change times (ns),
/// inode.
type Stat = (u64, i64, i64, u64);

/// A stat this recent is not trusted: a write within the file system's time granularity of
/// the look could leave it as it was, so the file is read again at the next look.
const RACY_NS: i64 = 50_000_000;

/// The entries of `.git` a snapshot holds: files, or directories of files.
const REFS: [&str; 4] = ["HEAD", "packed-refs", "refs", "logs"];

/// One repository's history, kept at each checkpoint of a run.
pub(crate) struct History {
    store: Store,
    /// The repository's `.git`.
    git: PathBuf,
    /// Where its objects are kept.
    kept: PathBuf,
    /// The refs and reflogs as last looked at, by `.git`-relative path.
    files: BTreeMap<String, Look>,
    /// The last snapshot, and its hash.
    last: (Snapshot, String),
    /// Whether a look since the last snapshot found a content or a path changed.
    dirty: bool,
    /// The objects directories as last listed.
    objects: Objects,
    /// The first keep of the objects, on a thread of its own.
    first: Option<std::thread::JoinHandle<Result<Objects, String>>>,
    /// Set once keeping failed (said once): nothing more is kept.
    failed: bool,
}

/// A ref or reflog file as last looked at.
#[derive(Debug, Clone)]
struct Look {
    /// Its stat, or `None` when it is not to be trusted (read again at the next look).
    stat: Option<Stat>,
    /// Its content's hash in the store.
    hash: String,
}

/// The objects directories as last listed: `objects/` itself and each one below it
/// (`objects/ab`, `objects/pack`), with their modification time and inode (`None`: list it
/// again).
#[derive(Debug, Default)]
struct Objects {
    top: Option<(i64, u64)>,
    dirs: BTreeMap<String, Option<(i64, u64)>>,
}

impl History {
    /// Starts keeping the history of the repository in `workspace` (`None` when its `.git` is
    /// not a directory): reads the refs and writes the first snapshot ([`History::snapshot`]),
    /// and keeps the objects already there on a thread of its own (seconds on a large
    /// repository whose store is on another file system), which the first [`History::take`]
    /// waits for.
    pub(crate) fn start(workspace: &Path, store: &Store) -> Result<Option<History>, String> {
        let git = workspace.join(".git");
        if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            return Ok(None);
        }
        let kept = store.git_objects(workspace);
        std::fs::create_dir_all(&kept).map_err(|e| format!("{}: {e}", kept.display()))?;
        let mut h = History {
            store: store.clone(),
            git: git.clone(),
            kept: kept.clone(),
            files: BTreeMap::new(),
            last: (Snapshot::new(), String::new()),
            dirty: true,
            objects: Objects::default(),
            first: None,
            failed: false,
        };
        h.look_refs(None)?;
        h.write_snapshot()?;
        let first = std::thread::Builder::new()
            .name("checkpoint-git".into())
            .spawn(move || {
                let mut objects = Objects::default();
                objects.keep(&git, &kept, None).map(|_| objects)
            })
            .map_err(|e| format!("a thread to keep the objects: {e}"))?;
        h.first = Some(first);
        Ok(Some(h))
    }

    /// The hash of the last snapshot written.
    pub(crate) fn snapshot(&self) -> &str {
        &self.last.1
    }

    /// Keeps what changed since the last take: the refs and reflogs whose stat changed, and
    /// the objects of the directories whose modification time moved. `changed` lists the
    /// `.git`-relative paths known to have changed (an empty list costs nothing); `None`
    /// looks at all of them. The hash of a new snapshot when the refs or reflogs changed.
    pub(crate) fn take(&mut self, changed: Option<&[String]>) -> Option<String> {
        if let Some(first) = self.first.take() {
            match first.join() {
                Ok(Ok(objects)) => self.objects = objects,
                Ok(Err(e)) => return self.stop(&e),
                Err(_) => return self.stop("the thread keeping the objects failed"),
            }
        }
        if self.failed || changed.is_some_and(<[String]>::is_empty) {
            return None;
        }
        // The refs before the objects: git writes an object before a ref names it, so every
        // object the snapshot names is there when the objects are listed.
        let looked = self.look_refs(changed).and_then(|()| {
            let dirs = changed.map(object_dirs);
            self.objects.keep(&self.git, &self.kept, dirs.as_ref())?;
            self.write_snapshot()
        });
        looked.unwrap_or_else(|e| self.stop(&e))
    }

    fn stop(&mut self, why: &str) -> Option<String> {
        tracing::warn!("checkpoints: the repository's history no longer kept: {why}");
        self.failed = true;
        None
    }

    /// Looks at the refs and reflogs (all, or those below the paths `only` names), keeping
    /// the contents whose stat changed.
    fn look_refs(&mut self, only: Option<&[String]>) -> Result<(), String> {
        let now = now_ns();
        let roots: Vec<String> = match only {
            None => REFS.iter().map(|r| (*r).to_owned()).collect(),
            Some(paths) => paths.iter().filter(|p| in_refs(p)).cloned().collect(),
        };
        let mut old = std::mem::take(&mut self.files);
        for root in &roots {
            let below = format!("{root}/");
            let (before, rest): (BTreeMap<String, Look>, _) = std::mem::take(&mut old)
                .into_iter()
                .partition(|(p, _)| p == root || p.starts_with(&below));
            old = rest;
            let (store, git, files) = (&self.store, &self.git, &mut self.files);
            let (mut same, mut dirty) = (0, false);
            walk(git, root, &mut |rel, meta| {
                let was = before.get(&rel);
                if let Some(l) = look(store, git, &rel, meta, was, now)? {
                    match was {
                        Some(w) if w.hash == l.hash => same += 1,
                        _ => dirty = true,
                    }
                    files.insert(rel, l);
                }
                Ok(())
            })?;
            // A path gone, a content changed or a path new.
            self.dirty |= dirty || same < before.len();
        }
        // What no root covered stays as it was.
        self.files.extend(old);
        Ok(())
    }

    /// Writes the snapshot of the refs and reflogs looked at, when it differs from the last;
    /// its hash.
    fn write_snapshot(&mut self) -> Result<Option<String>, String> {
        if !self.dirty {
            return Ok(None);
        }
        self.dirty = false;
        let now: Snapshot = self
            .files
            .iter()
            .map(|(p, l)| (p.clone(), l.hash.clone()))
            .collect();
        if now == self.last.0 && !self.last.1.is_empty() {
            return Ok(None);
        }
        let bytes = serde_json::to_vec(&now).map_err(|e| e.to_string())?;
        let hash = self
            .store
            .keep_bytes(&bytes)
            .map_err(|e| format!("the store: {e}"))?;
        self.last = (now, hash.clone());
        Ok(Some(hash))
    }
}

/// The time now, in ns since the epoch.
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Whether the `.git`-relative `path` is, or lies below, what a snapshot holds.
fn in_refs(path: &str) -> bool {
    REFS.iter()
        .any(|r| path == *r || path.strip_prefix(r).is_some_and(|p| p.starts_with('/')))
}

/// The objects directories the `.git`-relative `paths` name or lie in (`objects` itself
/// when one is, or a directory below it is new).
fn object_dirs(paths: &[String]) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for p in paths {
        let mut parts = p.split('/');
        if parts.next() != Some("objects") {
            continue;
        }
        match parts.next() {
            None => {
                dirs.insert("objects".to_owned());
            }
            Some(d) => {
                dirs.insert("objects".to_owned());
                dirs.insert(format!("objects/{d}"));
            }
        }
    }
    dirs
}

/// A stat, as a change is told by it.
fn stat_of(m: &Metadata) -> Stat {
    let (mtime, ctime) = super::scan::times(m);
    (m.len(), mtime, ctime, m.ino())
}

/// Calls `f` with each regular file at or below the `.git`-relative `rel` (and its stat),
/// never through a link.
fn walk(
    git: &Path,
    rel: &str,
    f: &mut dyn FnMut(String, &Metadata) -> Result<(), String>,
) -> Result<(), String> {
    let Ok(meta) = std::fs::symlink_metadata(git.join(rel)) else {
        return Ok(());
    };
    visit(git, rel.to_owned(), &meta, f)
}

fn visit(
    git: &Path,
    rel: String,
    meta: &Metadata,
    f: &mut dyn FnMut(String, &Metadata) -> Result<(), String>,
) -> Result<(), String> {
    if meta.is_file() {
        return f(rel, meta);
    }
    if !meta.is_dir() {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(git.join(&rel)) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let (Some(name), Ok(m)) = (e.file_name().to_str().map(str::to_owned), e.metadata()) else {
            continue;
        };
        visit(git, format!("{rel}/{name}"), &m, f)?;
    }
    Ok(())
}

/// Looks at the ref or reflog `rel` (stat `meta`) against its last look: the same when its
/// stat is, else its content kept. `None` when it is no longer a file reached without a link.
fn look(
    store: &Store,
    git: &Path,
    rel: &str,
    meta: &Metadata,
    before: Option<&Look>,
    now: i64,
) -> Result<Option<Look>, String> {
    let stat = stat_of(meta);
    if let Some(b) = before.filter(|b| b.stat == Some(stat)) {
        return Ok(Some(b.clone()));
    }
    let Ok(file) = crate::beneath::open_file(&git.join(rel)) else {
        return Ok(None);
    };
    let hash = store
        .keep_file(file, meta.len())
        .map_err(|e| format!("the store: {e}"))?;
    let trusted = (now - stat.1 >= RACY_NS && now - stat.2 >= RACY_NS).then_some(stat);
    Ok(Some(Look {
        stat: trusted,
        hash,
    }))
}

/// Whether `name` is an object file of the objects directory `dir` (`objects/ab` or
/// `objects/pack`): a loose object, or a pack with its index and reverse index; not a
/// temporary file, a `.keep`, nor what `objects/info` holds.
fn is_object(dir: &str, name: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if dir == "objects/pack" {
        let Some(rest) = name.strip_prefix("pack-") else {
            return false;
        };
        return [".pack", ".idx", ".rev"]
            .iter()
            .any(|x| rest.strip_suffix(x).is_some_and(hex));
    }
    matches!(name.len(), 38 | 62) && hex(name)
}

/// Whether `name` is a directory of `objects/` that holds objects.
fn is_objects_dir(name: &str) -> bool {
    name == "pack" || (name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Objects {
    /// Keeps the objects of the directories (all, or those `only` names) whose modification
    /// time moved since the last listing; how many were new.
    fn keep(
        &mut self,
        git: &Path,
        kept: &Path,
        only: Option<&BTreeSet<String>>,
    ) -> Result<u64, String> {
        let now = now_ns();
        if only.is_none_or(|o| o.contains("objects"))
            && changed(&mut self.top, git, "objects", now) == Some(true)
        {
            for e in std::fs::read_dir(git.join("objects"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if is_objects_dir(&name) && e.file_type().is_ok_and(|t| t.is_dir()) {
                    self.dirs.entry(format!("objects/{name}")).or_insert(None);
                }
            }
        }
        let dirs: Vec<String> = match only {
            None => self.dirs.keys().cloned().collect(),
            Some(o) => o.iter().filter(|d| *d != "objects").cloned().collect(),
        };
        let mut n = 0;
        for d in dirs {
            let mut last = self.dirs.get(&d).copied().flatten();
            match changed(&mut last, git, &d, now) {
                None => {
                    self.dirs.remove(&d);
                }
                Some(moved) => {
                    self.dirs.insert(d.clone(), last);
                    if moved {
                        n += keep_dir(git, kept, &d)?;
                    }
                }
            }
        }
        Ok(n)
    }
}

/// Whether the directory `rel` moved since `last` (its modification time and inode then),
/// which becomes what it is now (`None` when too recent to be trusted); `None` when it is no
/// longer a directory.
fn changed(last: &mut Option<(i64, u64)>, git: &Path, rel: &str, now: i64) -> Option<bool> {
    let Some(m) = std::fs::symlink_metadata(git.join(rel))
        .ok()
        .filter(Metadata::is_dir)
    else {
        *last = None;
        return None;
    };
    let stat = (super::scan::times(&m).0, m.ino());
    let moved = *last != Some(stat);
    *last = (now - stat.0 >= RACY_NS).then_some(stat);
    Some(moved)
}

/// Keeps each object of the directory `rel` (`objects/ab`) not kept yet; how many.
fn keep_dir(git: &Path, kept: &Path, rel: &str) -> Result<u64, String> {
    let names: Vec<String> = std::fs::read_dir(git.join(rel))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_object(rel, n))
        .collect();
    if names.is_empty() {
        return Ok(0);
    }
    let to = kept.join(rel.trim_start_matches("objects/"));
    std::fs::create_dir_all(&to).map_err(|e| format!("the store: {e}"))?;
    let have: HashSet<String> = std::fs::read_dir(&to)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let mut n = 0;
    for name in names.iter().filter(|n| !have.contains(*n)) {
        if keep_object(&git.join(rel).join(name), &to.join(name))? {
            n += 1;
        }
    }
    Ok(n)
}

/// Keeps the object file `from` as `to` in the store: a hard link, else (another file
/// system) a copy. Never through a link: a link or a special file there is not kept.
fn keep_object(from: &Path, to: &Path) -> Result<bool, String> {
    let store = |e: std::io::Error| format!("the store: {e}");
    let Ok(src) = At::of(from) else {
        return Ok(false);
    };
    if !matches!(src.kind(), Ok(Some(FileType::RegularFile))) {
        return Ok(false);
    }
    let dest = At::of(to).map_err(|e| store(e.into_io()))?;
    match src.hard_link_to(&dest) {
        Ok(()) => {
            // What was linked could have been made a link since it was looked at.
            if std::fs::symlink_metadata(to).is_ok_and(|m| m.is_file()) {
                return Ok(true);
            }
            let _ = std::fs::remove_file(to);
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(_) => {
            let Ok(mut file) = crate::beneath::open_file(from) else {
                return Ok(false);
            };
            copy_into(&mut file, to).map_err(store)?;
            Ok(true)
        }
    }
}

/// Copies what `src` reads into a new file `to` (read-only), through a temporary file beside
/// it renamed once complete.
fn copy_into(src: &mut impl Read, to: &Path) -> std::io::Result<()> {
    let dest = At::of(to).map_err(crate::beneath::Refused::into_io)?;
    let tmp = dest.sibling(std::ffi::OsStr::new(&format!(
        ".tmp-{}",
        crate::random_hex(8)
    )))?;
    let done = (|| {
        let mut f = tmp.create(0o444)?;
        std::io::copy(src, &mut f)?;
        tmp.rename_to(&dest)
    })();
    if done.is_err() {
        let _ = tmp.remove();
    }
    done
}

mod restore;
pub(crate) use restore::{plan, ref_changes, snapshot, Plan};

#[cfg(test)]
mod tests;
