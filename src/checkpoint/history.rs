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
        .keep_file(file)
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

/// The snapshot the store keeps under `hash`.
pub(crate) fn snapshot(store: &Store, hash: &str) -> Result<Snapshot, String> {
    let bytes = store
        .read(hash)
        .map_err(|e| format!("the refs snapshot {hash}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("the refs snapshot {hash}: {e}"))
}

/// The refs and reflogs of the repository `git` now, as a snapshot would name them (their
/// contents hashed, not kept).
fn current(git: &Path) -> Result<Snapshot, String> {
    let mut now = Snapshot::new();
    for root in REFS {
        walk(git, root, &mut |rel, _| {
            let Ok(mut file) = crate::beneath::open_file(&git.join(&rel)) else {
                return Ok(());
            };
            let mut hasher = Sha256::new();
            std::io::copy(&mut file, &mut hasher).map_err(|e| format!("{rel}: {e}"))?;
            now.insert(rel, hex::encode(hasher.finalize()));
            Ok(())
        })?;
    }
    Ok(now)
}

/// What putting a snapshot back does to a repository: the refs and reflogs it writes and
/// removes, the kept objects it puts back, and what changed since the run ended.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// `.git`-relative paths written as the snapshot has them, with their content's hash.
    write: Vec<(String, String)>,
    /// `.git`-relative paths removed (not in the snapshot).
    remove: Vec<String>,
    /// Kept objects missing from the repository (relative to `objects/`).
    objects: Vec<String>,
    /// The refs (short names) put back or moved back, and those removed.
    refs: (Vec<String>, Vec<String>),
    /// Paths (`.git/…`) that changed after the run ended: putting them back would lose that.
    pub(crate) conflicts: Vec<String>,
}

/// What [`Plan::apply`] did.
#[derive(Debug, Default)]
pub(crate) struct RestoreReport {
    /// Refs (short names) put back or moved back.
    pub refs: Vec<String>,
    /// Refs removed (the snapshot did not have them).
    pub removed: Vec<String>,
    /// Reflogs written or removed.
    pub logs: usize,
    /// Objects put back.
    pub objects: usize,
    /// What could not be done, each with why.
    pub failed: Vec<String>,
}

/// Plans putting the snapshot `target` back in the repository of `workspace`, for the
/// `.git`-relative paths `want` takes; `end` (the snapshot when the run ended) tells the
/// paths changed since, the conflicts. The kept objects missing are put back with any ref.
pub(crate) fn plan(
    store: &Store,
    workspace: &Path,
    target: &str,
    end: Option<&str>,
    want: &dyn Fn(&str) -> bool,
) -> Result<Plan, String> {
    let git = workspace.join(".git");
    if let Err(e) = crate::beneath::kind(&git) {
        return Err(e.to_string());
    }
    let target = snapshot(store, target)?;
    let end = end.map(|e| snapshot(store, e)).transpose()?;
    let now = current(&git)?;
    let mut plan = Plan::default();
    let paths: BTreeSet<&String> = target.keys().chain(now.keys()).collect();
    for path in paths.into_iter().filter(|p| want(p)) {
        let (t, n) = (target.get(path), now.get(path));
        if t == n {
            continue;
        }
        if end.as_ref().is_some_and(|e| e.get(path) != n) {
            plan.conflicts.push(format!(".git/{path}"));
        }
        match t {
            Some(hash) => plan.write.push((path.clone(), hash.clone())),
            None => plan.remove.push(path.clone()),
        }
    }
    if !plan.write.is_empty() || want("objects") {
        plan.objects = missing(&store.git_objects(workspace), &git);
    }
    // The refs as they are now and as they would be, each read as git does (a loose ref
    // over the packed one).
    let mut after = now.clone();
    for (p, h) in &plan.write {
        after.insert(p.clone(), h.clone());
    }
    for p in &plan.remove {
        after.remove(p);
    }
    let read_now = |p: &str| {
        crate::beneath::open_file(&git.join(p))
            .ok()
            .and_then(read_all)
    };
    let read_after = |p: &str| match now.get(p) == after.get(p) {
        true => read_now(p),
        false => after.get(p).and_then(|h| store.read(h).ok()),
    };
    let (before, then) = (refs(&now, read_now), refs(&after, read_after));
    for (name, value) in &then {
        if before.get(name) != Some(value) {
            plan.refs.0.push(short(name));
        }
    }
    plan.refs.1 = before
        .keys()
        .filter(|n| !then.contains_key(*n))
        .map(|n| short(n))
        .collect();
    plan.refs.0.sort();
    plan.refs.1.sort();
    Ok(plan)
}

fn read_all(mut f: std::fs::File) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    f.read_to_end(&mut out).ok().map(|_| out)
}

/// The refs a snapshot's files say: each ref's name to what it holds (an object id, or
/// `ref: …`), `packed-refs` read first and the loose refs over it, as git reads them.
fn refs(files: &Snapshot, read: impl Fn(&str) -> Option<Vec<u8>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if files.contains_key("packed-refs") {
        let packed = read("packed-refs").unwrap_or_default();
        for line in String::from_utf8_lossy(&packed).lines() {
            if line.starts_with('#') || line.starts_with('^') {
                continue;
            }
            if let Some((id, name)) = line.split_once(' ') {
                out.insert(name.to_owned(), id.to_owned());
            }
        }
    }
    for p in files
        .keys()
        .filter(|p| *p == "HEAD" || p.starts_with("refs/"))
    {
        if let Some(v) = read(p) {
            out.insert(p.clone(), String::from_utf8_lossy(&v).trim().to_owned());
        }
    }
    out
}

/// How the refs moved from the snapshot `before` to `after`, for a person: `deleted branch
/// feature`, `moved branch main`, `created tag v1`, `changed the stash`, `moved HEAD`.
pub(crate) fn ref_changes(store: &Store, before: &str, after: &str) -> Vec<String> {
    let (Ok(a), Ok(b)) = (snapshot(store, before), snapshot(store, after)) else {
        return Vec::new();
    };
    let read = |s: &Snapshot, p: &str| s.get(p).and_then(|h| store.read(h).ok());
    let (was, now) = (refs(&a, |p| read(&a, p)), refs(&b, |p| read(&b, p)));
    let label = |name: &str| match name {
        "refs/stash" => "the stash".to_owned(),
        "HEAD" => "HEAD".to_owned(),
        n if n.starts_with("refs/heads/") => format!("branch {}", short(n)),
        n => short(n),
    };
    let mut out = Vec::new();
    for (name, v) in &now {
        match was.get(name) {
            None => out.push(format!("created {}", label(name))),
            Some(w) if w != v && name == "refs/stash" => out.push("changed the stash".into()),
            Some(w) if w != v => out.push(format!("moved {}", label(name))),
            Some(_) => {}
        }
    }
    for name in was.keys().filter(|n| !now.contains_key(*n)) {
        out.push(format!("deleted {}", label(name)));
    }
    out
}

/// A ref's name as a person says it: `feature`, `tag v1`, `stash`, `origin/main`.
fn short(name: &str) -> String {
    if let Some(b) = name.strip_prefix("refs/heads/") {
        return b.to_owned();
    }
    if let Some(t) = name.strip_prefix("refs/tags/") {
        return format!("tag {t}");
    }
    let name = name.strip_prefix("refs/remotes/").unwrap_or(name);
    name.strip_prefix("refs/").unwrap_or(name).to_owned()
}

/// The objects kept in `kept` that the repository `git` is missing (relative to
/// `objects/`).
fn missing(kept: &Path, git: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let names = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()
    };
    for dir in names(kept).into_iter().filter(|d| is_objects_dir(d)) {
        let rel = format!("objects/{dir}");
        let there: HashSet<String> = names(&git.join(&rel)).into_iter().collect();
        for name in names(&kept.join(&dir)) {
            if is_object(&rel, &name) && !there.contains(&name) {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out.sort();
    out
}

impl Plan {
    /// Whether it does nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.write.is_empty() && self.remove.is_empty() && self.objects.is_empty()
    }

    /// What it would do, as [`RestoreReport`] says what it did.
    pub(crate) fn report(&self) -> RestoreReport {
        RestoreReport {
            refs: self.refs.0.clone(),
            removed: self.refs.1.clone(),
            logs: self.logs(),
            objects: self.objects.len(),
            failed: Vec::new(),
        }
    }

    fn logs(&self) -> usize {
        let writes = self.write.iter().map(|(p, _)| p);
        writes
            .chain(&self.remove)
            .filter(|p| p.starts_with("logs/"))
            .count()
    }

    /// Puts the snapshot back in the repository of `workspace`: first the objects missing
    /// (a hard link from the store, else a copy, read-only), then the refs and reflogs, each
    /// written beside itself and renamed over it, those the snapshot does not have removed
    /// (regular files only). Nothing on the way is followed: a link where a directory of
    /// `.git` was is refused and said. The index and the working tree are left alone.
    pub(crate) fn apply(&self, store: &Store, workspace: &Path) -> RestoreReport {
        let git = workspace.join(".git");
        let mut report = self.report();
        report.objects = 0;
        let kept = store.git_objects(workspace);
        for rel in &self.objects {
            let to = Path::new(".git/objects").join(rel);
            match put_object(&kept.join(rel), workspace, &to) {
                Ok(()) => report.objects += 1,
                Err(e) => report.failed.push(format!("{}: {e}", to.display())),
            }
        }
        for rel in &self.remove {
            if let Err(e) = remove_ref(&git, rel) {
                report.failed.push(format!(".git/{rel}: {e}"));
            }
        }
        for (rel, hash) in &self.write {
            let written = make_dirs(workspace, &Path::new(".git").join(rel))
                .and_then(|()| clear_empty_dir(&git.join(rel)))
                .and_then(|()| store.read(hash))
                .and_then(|bytes| {
                    crate::statefile::merge::write_atomic_as(&git.join(rel), &bytes, 0o644)
                        .map_err(std::io::Error::other)
                });
            if let Err(e) = written {
                report.failed.push(format!(".git/{rel}: {e}"));
            }
        }
        report
    }
}

/// Puts back every kept object the repository of `workspace` is missing, and makes its refs,
/// `HEAD`, `packed-refs` and reflogs exactly those of the snapshot `snapshot` ([`Plan::apply`]).
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "undo plans first, for its conflicts and paths")
)]
pub(crate) fn restore(
    store: &Store,
    workspace: &Path,
    snapshot: &str,
) -> Result<RestoreReport, String> {
    let plan = plan(store, workspace, snapshot, None, &|_| true)?;
    let report = plan.apply(store, workspace);
    match report.failed.is_empty() {
        true => Ok(report),
        false => Err(report.failed.join("; ")),
    }
}

/// Makes each directory of the workspace-relative `rel`'s parent that is missing, never
/// through a link.
fn make_dirs(workspace: &Path, rel: &Path) -> std::io::Result<()> {
    let mut dir = workspace.to_owned();
    for part in rel.parent().into_iter().flat_map(Path::components) {
        dir.push(part);
        let at = At::of(&dir).map_err(crate::beneath::Refused::into_io)?;
        match at.kind().map_err(crate::beneath::Refused::into_io)? {
            Some(FileType::Directory) => {}
            None => at.make_dir(0o755)?,
            Some(FileType::Symlink) => {
                let link = crate::beneath::Refused::Link(dir.clone());
                return Err(std::io::Error::other(link.to_string()));
            }
            Some(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a directory",
                    dir.display()
                )))
            }
        }
    }
    Ok(())
}

/// Removes the directory at `path` when it is an empty one (a branch `a/b` removed leaves
/// `refs/heads/a`, where the ref `a` is written back).
fn clear_empty_dir(path: &Path) -> std::io::Result<()> {
    let at = At::of(path).map_err(crate::beneath::Refused::into_io)?;
    if at.kind().map_err(crate::beneath::Refused::into_io)? == Some(FileType::Directory) {
        at.remove()
            .map_err(|_| std::io::Error::other("a directory is there now"))?;
    }
    Ok(())
}

/// Puts the kept object `from` back at the workspace-relative `to`: a hard link, else a
/// copy, read-only.
fn put_object(from: &Path, workspace: &Path, to: &Path) -> std::io::Result<()> {
    if !std::fs::symlink_metadata(from)?.is_file() {
        return Err(std::io::Error::other("not a file in the store"));
    }
    make_dirs(workspace, to)?;
    let refused = crate::beneath::Refused::into_io;
    let dest = At::of(&workspace.join(to)).map_err(refused)?;
    match At::of(from).map_err(refused)?.hard_link_to(&dest) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => copy_into(&mut std::fs::File::open(from)?, &workspace.join(to)),
    }
}

/// Removes the ref or reflog file `rel` (a regular file, never a link's target), then the
/// directories it leaves empty below `refs/x` or `logs/x`.
fn remove_ref(git: &Path, rel: &str) -> std::io::Result<()> {
    let refused = crate::beneath::Refused::into_io;
    let at = At::of(&git.join(rel)).map_err(refused)?;
    match at.kind().map_err(refused)? {
        None => return Ok(()),
        Some(FileType::RegularFile) => at.remove()?,
        Some(_) => return Err(std::io::Error::other("not a regular file: left alone")),
    }
    let mut dir = Path::new(rel).parent();
    while let Some(d) = dir.filter(|d| d.components().count() > 2) {
        let emptied = At::of(&git.join(d))
            .map_err(refused)
            .and_then(|e| e.remove());
        if emptied.is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

impl RestoreReport {
    /// Whether it did (or would do) nothing.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.refs.is_empty() && self.removed.is_empty() && self.logs == 0 && self.objects == 0
    }

    /// Its line for a person: `git: refs put back (feature, stash), 12 object(s) put back`
    /// (`would be put back` when `done` is false).
    pub(crate) fn line(&self, done: bool) -> String {
        let verb = |what: &str| match done {
            true => what.to_owned(),
            false => format!("would be {what}"),
        };
        let mut parts = Vec::new();
        if !self.refs.is_empty() {
            parts.push(format!(
                "refs {} ({})",
                verb("put back"),
                self.refs.join(", ")
            ));
        }
        if !self.removed.is_empty() {
            parts.push(format!(
                "refs made since {} ({})",
                verb("removed"),
                self.removed.join(", ")
            ));
        }
        if self.logs > 0 {
            parts.push(format!("{} reflog(s) {}", self.logs, verb("put back")));
        }
        if self.objects > 0 {
            parts.push(format!("{} object(s) {}", self.objects, verb("put back")));
        }
        if parts.is_empty() {
            parts.push("HEAD and refs as they were".to_owned());
        }
        format!("git: {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A repository made with git, and a store beside it.
    struct Repo {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        store: Store,
        /// The store's directory, when on another file system.
        _elsewhere: Option<tempfile::TempDir>,
    }

    /// `git ARGS` in `ws`, its output; it must succeed.
    fn git(ws: &Path, args: &[&str]) -> String {
        let (out, ok, err) = try_git(ws, args);
        assert!(ok, "git {args:?}: {err}");
        out
    }

    /// `git ARGS` in `ws`: its output, whether it succeeded, its errors.
    fn try_git(ws: &Path, args: &[&str]) -> (String, bool, String) {
        let out = Command::new("git")
            .args([
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "-c",
                "gc.auto=0",
            ])
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Whether the object `id` is in the repository.
    fn has(ws: &Path, id: &str) -> bool {
        Command::new("git")
            .args(["cat-file", "-e", id])
            .current_dir(ws)
            .status()
            .unwrap()
            .success()
    }

    /// Three commits on `main`, an unmerged branch `feature` of two more, a stash.
    fn repo() -> Repo {
        repo_in(None)
    }

    /// [`repo`], its store in `elsewhere` when given.
    fn repo_in(elsewhere: Option<tempfile::TempDir>) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        let ws = dir.path().join("ws").canonicalize().unwrap();
        let store_dir = elsewhere.as_ref().map_or(dir.path(), |e| e.path());
        let store = Store::at(store_dir.join("store"));
        store.create().unwrap();
        git(&ws, &["init", "-q", "-b", "main"]);
        for i in 1..=3 {
            std::fs::write(ws.join("a.txt"), format!("main {i}\n")).unwrap();
            git(&ws, &["add", "-A"]);
            git(&ws, &["commit", "-qm", &format!("main {i}")]);
        }
        git(&ws, &["checkout", "-qb", "feature"]);
        for i in 1..=2 {
            std::fs::write(ws.join("f.txt"), format!("feature {i}\n")).unwrap();
            git(&ws, &["add", "-A"]);
            git(&ws, &["commit", "-qm", &format!("feature {i}")]);
        }
        git(&ws, &["checkout", "-q", "main"]);
        std::fs::write(ws.join("a.txt"), "work in progress\n").unwrap();
        git(&ws, &["stash", "-q"]);
        Repo {
            _dir: dir,
            ws,
            store,
            _elsewhere: elsewhere,
        }
    }

    /// What the repository's history says: its refs, stash list, the feature branch's log and
    /// each of its commits as git prints them.
    fn state(ws: &Path) -> Vec<String> {
        let mut out = vec![
            git(ws, &["for-each-ref", "--format=%(refname) %(objectname)"]),
            git(ws, &["rev-parse", "HEAD"]),
            git(ws, &["stash", "list", "--format=%H %s"]),
        ];
        let log = try_git(ws, &["log", "--format=%H", "refs/heads/feature", "--"]).0;
        for id in log.lines() {
            out.push(git(ws, &["cat-file", "-p", id]));
        }
        out.push(log);
        out
    }

    /// `attack` after the history was started and taken once; then the start's snapshot put
    /// back gives the history as it was, to the byte (refs and reflogs), every object there.
    fn undone(attack: &[&[&str]]) {
        undone_in(repo(), attack);
    }

    fn undone_in(r: Repo, attack: &[&[&str]]) {
        let before = state(&r.ws);
        let files = current(&r.ws.join(".git")).unwrap();
        let ids: Vec<String> = git(&r.ws, &["rev-list", "--all", "--reflog"])
            .lines()
            .map(str::to_owned)
            .collect();
        let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
        let start = h.snapshot().to_owned();
        assert_eq!(h.take(None), None, "nothing changed");
        for args in attack {
            git(&r.ws, args);
        }
        assert_ne!(state(&r.ws), before, "the attack changed the history");
        let taken = h.take(None).expect("a new snapshot");
        assert_ne!(taken, start);

        let report = restore(&r.store, &r.ws, &start).unwrap();
        assert!(!report.is_empty(), "{report:?}");
        assert_eq!(state(&r.ws), before, "{}", report.line(true));
        assert_eq!(current(&r.ws.join(".git")).unwrap(), files);
        for id in &ids {
            assert!(has(&r.ws, id), "{id} is back");
        }
        git(&r.ws, &["fsck", "--no-dangling", "--no-progress"]);
        // Put back twice: nothing left to do.
        let again = plan(&r.store, &r.ws, &start, None, &|_| true).unwrap();
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn a_deleted_unmerged_branch_is_put_back() {
        undone(&[&["update-ref", "-d", "refs/heads/feature"]]);
    }

    #[test]
    fn a_branch_deleted_by_force_when_packed_is_put_back() {
        let r = repo();
        git(&r.ws, &["pack-refs", "--all"]);
        let feature = git(&r.ws, &["rev-parse", "feature"]);
        let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
        let start = h.snapshot().to_owned();
        h.take(None);
        git(&r.ws, &["branch", "-D", "feature"]);
        assert!(h.take(None).is_some());
        let report = restore(&r.store, &r.ws, &start).unwrap();
        assert_eq!(report.refs, ["feature"], "{}", report.line(true));
        assert_eq!(git(&r.ws, &["rev-parse", "feature"]), feature);
    }

    #[test]
    fn a_dropped_stash_is_put_back() {
        undone(&[&["stash", "drop", "-q"]]);
    }

    #[test]
    fn a_hard_reset_is_put_back() {
        undone(&[&["reset", "-q", "--hard", "HEAD~2"]]);
    }

    #[test]
    fn what_an_expired_reflog_and_a_pruning_gc_lost_after_a_reset_is_put_back() {
        undone(&[
            &["reset", "-q", "--hard", "HEAD~2"],
            &["update-ref", "-d", "refs/heads/feature"],
            &["stash", "clear"],
            &["reflog", "expire", "--expire=now", "--all"],
            &["gc", "-q", "--prune=now"],
        ]);
    }

    /// With the store on another file system (a memory one), the objects are copied, and
    /// copied back.
    #[test]
    fn across_file_systems_the_objects_are_copied() {
        let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let r = repo_in(Some(shm));
        let same = |a: &Path, b: &Path| {
            std::fs::metadata(a).unwrap().dev() == std::fs::metadata(b).unwrap().dev()
        };
        if same(&r.ws, r.store.root()) {
            return;
        }
        undone_in(
            r,
            &[
                &["reset", "-q", "--hard", "HEAD~2"],
                &["reflog", "expire", "--expire=now", "--all"],
                &["gc", "-q", "--prune=now"],
            ],
        );
    }

    /// A ref the run made is removed, a moved one moved back, the report names them.
    #[test]
    fn refs_made_since_are_removed_and_named() {
        let r = repo();
        let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
        let start = h.snapshot().to_owned();
        git(&r.ws, &["branch", "topic/new"]);
        git(&r.ws, &["tag", "v1"]);
        git(&r.ws, &["branch", "-f", "feature", "main"]);
        let taken = h.take(None).unwrap();
        assert_eq!(
            ref_changes(&r.store, &start, &taken),
            [
                "moved branch feature",
                "created branch topic/new",
                "created tag v1"
            ]
        );
        let report = restore(&r.store, &r.ws, &start).unwrap();
        assert_eq!(report.refs, ["feature"]);
        assert_eq!(report.removed, ["tag v1", "topic/new"]);
        assert!(
            !r.ws.join(".git/refs/heads/topic").exists(),
            "emptied, removed"
        );
        assert!(r.ws.join(".git/refs/heads").is_dir());
        let line = report.line(true);
        assert!(
            line.starts_with(
                "git: refs put back (feature), refs made since removed (tag v1, topic/new)"
            ),
            "{line}"
        );
    }

    /// Only what `changed` names is looked at: an empty list costs nothing and finds nothing;
    /// the ref named is found.
    #[test]
    fn take_looks_only_at_what_it_is_told_changed() {
        let r = repo();
        let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
        h.take(Some(&[]));
        git(&r.ws, &["branch", "other"]);
        assert_eq!(h.take(Some(&[])), None, "not told: not seen");
        let told = [
            "refs/heads/other".to_owned(),
            "logs/refs/heads/other".to_owned(),
        ];
        let hash = h.take(Some(&told)).expect("told: seen");
        let snap = snapshot(&r.store, &hash).unwrap();
        assert!(snap.contains_key("refs/heads/other") && snap.contains_key("refs/heads/main"));
        assert_eq!(h.take(None), None, "a full look finds nothing more");
    }

    /// Hundreds of refs: a look at an unchanged repository reads none of them.
    #[test]
    fn an_unchanged_look_at_hundreds_of_refs_is_quick() {
        let r = repo();
        for i in 0..300 {
            git(&r.ws, &["update-ref", &format!("refs/heads/b{i}"), "HEAD"]);
        }
        let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
        h.take(None);
        // Once the stats are old enough to be trusted.
        std::thread::sleep(std::time::Duration::from_millis(60));
        h.take(None);
        let started = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(h.take(None), None);
        }
        let each = started.elapsed() / 10;
        eprintln!("an unchanged look at 300 refs: {each:?}");
        assert!(each < std::time::Duration::from_millis(20), "{each:?}");
    }

    /// A link the agent planted in `.git` is never followed: not kept when it stands for an
    /// object or a ref, refused (and said) on the way of a restore.
    #[test]
    fn a_link_planted_in_git_is_not_followed() {
        let r = repo();
        let outside = r.ws.parent().unwrap().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let secret = outside.join("secret");
        std::fs::write(&secret, "the person's").unwrap();
        let loose = "0".repeat(38);
        std::fs::create_dir_all(r.ws.join(".git/objects/ab")).unwrap();
        std::os::unix::fs::symlink(&secret, r.ws.join(".git/objects/ab").join(&loose)).unwrap();
        std::fs::write(outside.join(&loose), "the person's too").unwrap();
        std::os::unix::fs::symlink(&outside, r.ws.join(".git/objects/cd")).unwrap();
        std::os::unix::fs::symlink(&secret, r.ws.join(".git/refs/heads/evil")).unwrap();
        let mut h = History::start(&r.ws, &r.store).unwrap().unwrap();
        let start = h.snapshot().to_owned();
        h.take(None);
        let kept = r.store.git_objects(&r.ws);
        assert!(!kept.join("ab").join(&loose).exists());
        assert!(!kept.join("cd").exists());
        let snap = snapshot(&r.store, &start).unwrap();
        assert!(!snap.contains_key("refs/heads/evil"), "{snap:?}");
        assert!(snap.contains_key("refs/heads/feature"));

        // `refs/heads` made a link to a directory of the person's: the restore is refused.
        git(&r.ws, &["update-ref", "-d", "refs/heads/feature"]);
        std::fs::remove_file(r.ws.join(".git/refs/heads/evil")).unwrap();
        let heads = r.ws.join(".git/refs/heads");
        std::fs::rename(&heads, r.ws.join(".git/refs/heads-old")).unwrap();
        std::os::unix::fs::symlink(&outside, &heads).unwrap();
        let refused = restore(&r.store, &r.ws, &start).unwrap_err();
        assert!(refused.contains("symbolic link"), "{refused}");
        let mut names: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, [std::ffi::OsString::from(&loose), "secret".into()]);
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "the person's");
    }

    /// A `.git` file (a worktree, a submodule) is not covered.
    #[test]
    fn a_git_file_is_not_covered() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
        let store = Store::at(dir.path().join("store"));
        assert!(History::start(dir.path(), &store).unwrap().is_none());
    }
}
