//! The workspace's files as a checkpoint sees them: a walk that skips `.git` and what
//! `exclude` names, each regular file and symbolic link with what tells a change (size,
//! times, inode, mode), and its content kept in the store when that changed since the last
//! look (a file whose stat is the same is not read again, as git's index does).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::reach::{self, Take, Within};
use super::store::Store;
use super::watch::Watch;

/// One path of the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// What it holds.
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification and status-change times (ns) and inode: what tells a change without
    /// reading the file.
    pub stat: (i64, i64, u64),
}

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// A regular file, by the SHA-256 of its content (hex).
    File(String),
    /// A symbolic link, by its target.
    Link(String),
    /// A regular file not kept (larger than the limit for files git does not track).
    TooLarge,
}

impl Entry {
    /// Whether `other` holds the same thing (content or target, mode): a stat-only change
    /// (a touch) is not a change.
    pub(crate) fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind && self.mode == other.mode
    }
}

/// A workspace's files: relative path (`/`-separated) to entry.
pub(crate) type Manifest = BTreeMap<String, Entry>;

/// How a walk goes.
pub(crate) struct Rules {
    /// Names or relative paths not walked ([`super::reach`]).
    pub exclude: Vec<String>,
    /// Files git tracks (relative paths): kept whatever their size.
    pub tracked: HashSet<String>,
    /// Other files larger than this are not kept.
    pub max_file: u64,
    /// Other files larger than this are left for [`keep_deferred`] (the first checkpoint's
    /// walk: they are kept in the background), `u64::MAX` for none.
    pub at_once: u64,
    /// More files than this and the walk stops.
    pub max_files: u64,
}

/// Why a walk stopped.
#[derive(Debug)]
pub(crate) enum ScanError {
    /// The workspace holds more files than `max_files`.
    TooMany(u64),
    /// The store could not keep a file.
    Store(std::io::Error),
}

/// What a walk found against the manifest before it: the paths created or changed (their
/// content kept in the store), the paths gone, and how many were as they were. An unchanged
/// file costs its `stat` and a look-up, nothing else (no allocation).
#[derive(Debug, Default)]
pub(crate) struct Delta {
    /// Paths created or changed, with what they hold now.
    pub set: Vec<(String, Entry)>,
    /// Paths of the manifest before that are gone.
    pub deleted: Vec<String>,
    /// The left-out directories the walk met.
    pub left_out: BTreeSet<String>,
}

/// A file's modification and status-change times, in ns since the epoch: what tells a change
/// without reading it.
pub(crate) fn times(m: &std::fs::Metadata) -> (i64, i64) {
    (
        m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    )
}

impl Delta {
    /// Whether nothing changed.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty() && self.deleted.is_empty()
    }

    /// Applies it to `manifest`.
    pub(crate) fn apply(&self, manifest: &mut Manifest) {
        for path in &self.deleted {
            manifest.remove(path);
        }
        manifest.extend(self.set.iter().cloned());
    }
}

/// Files from this many on are looked at by two threads (the `stat`s are the kernel's path
/// look-ups: the walk's cost on a large tree).
const PARALLEL_FROM: usize = 2048;

/// A file or link a walk found: by its directory entry (its `stat` is a look-up in the
/// directory the walk holds open), or by its path (a path a watch named).
pub(crate) enum Found {
    /// From a directory's listing.
    Entry(std::fs::DirEntry),
    /// From a path.
    Path(PathBuf),
}

impl Found {
    fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        match self {
            Found::Entry(e) => e.metadata(),
            Found::Path(p) => std::fs::symlink_metadata(p),
        }
    }

    fn path(&self) -> PathBuf {
        match self {
            Found::Entry(e) => e.path(),
            Found::Path(p) => p.clone(),
        }
    }
}

/// What a walk found: the files and links it keeps, and the left-out directories it met.
#[derive(Default)]
pub(crate) struct Walked {
    /// Files and links, by relative path.
    pub files: Vec<(String, Found)>,
    /// Directories `exclude` leaves out (relative paths).
    pub left_out: BTreeSet<String>,
}

/// Walks the directory `dir` (relative `base`, `""` for the workspace; the walk is there
/// `within`) and what is under it, into `out`; each directory watched by `watch` before it
/// is read.
fn walk(
    dir: &Path,
    base: &str,
    within: Within,
    rules: &Rules,
    out: &mut Walked,
    mut watch: Option<&mut Watch>,
) -> Result<(), ScanError> {
    let mut dirs: Vec<(PathBuf, String, Within)> = vec![(dir.to_owned(), base.to_owned(), within)];
    while let Some((dir, base, within)) = dirs.pop() {
        if let Some(w) = watch.as_deref_mut() {
            w.add(&dir, &base);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let Ok(ft) = e.file_type() else {
                continue;
            };
            let take = reach::child(&rules.exclude, &dir, &base, within, name, ft.is_dir());
            if take == Take::Skip {
                continue;
            }
            let rel = if base.is_empty() {
                name.to_owned()
            } else {
                format!("{base}/{name}")
            };
            match take {
                Take::Skip => {}
                Take::Dir(w) => dirs.push((e.path(), rel, w)),
                Take::LeftOut(w) => {
                    if matches!(w, Within::Kept { mask: 1.., .. }) {
                        dirs.push((e.path(), rel.clone(), w));
                    }
                    out.left_out.insert(rel);
                }
                Take::File if ft.is_file() || ft.is_symlink() => {
                    if out.files.len() as u64 >= rules.max_files {
                        return Err(ScanError::TooMany(rules.max_files));
                    }
                    out.files.push((rel, Found::Entry(e)));
                }
                Take::File => {}
            }
        }
    }
    Ok(())
}

/// Walks `root` against `previous`: each file whose stat changed (or that is new) is kept in
/// `store`; what changed. Each directory is watched by `watch` before it is read.
pub(crate) fn scan(
    root: &Path,
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
    watch: Option<&mut Watch>,
) -> Result<Delta, ScanError> {
    // The directories first (their entries' types come with them), then each file's stat.
    let mut walked = Walked::default();
    walk(root, "", Within::All, rules, &mut walked, watch)?;
    let (set, seen) = look_all(&walked.files, rules, previous, store)?;
    let mut delta = Delta {
        set,
        deleted: Vec::new(),
        left_out: walked.left_out,
    };
    // Every path before was seen: none is gone (the common case, decided by a count). Else
    // the ones no longer there as a file or a link.
    if seen < previous.len() {
        delta.deleted = previous
            .keys()
            .filter(|p| {
                let path = root.join(p);
                !std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.is_file() || m.file_type().is_symlink())
                    || reach::reach(&rules.exclude, root, p, false) != Take::File
            })
            .cloned()
            .collect();
    }
    Ok(delta)
}

/// Looks again only at the paths `changed` names (as [`Watch::drain`] gives them) against
/// `previous`: a file or link there now is looked at, a directory walked (and watched), and
/// what `previous` has at or under a path no longer there is gone.
pub(crate) fn rescan(
    root: &Path,
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
    changed: &BTreeSet<String>,
    mut watch: Option<&mut Watch>,
) -> Result<Delta, ScanError> {
    let mut walked = Walked::default();
    let mut walked_dirs: HashSet<&str> = HashSet::new();
    let mut candidates: BTreeSet<&str> = BTreeSet::new();
    for rel in changed {
        // A directory walked whole already covers what is under it.
        if ancestors(rel).any(|a| walked_dirs.contains(a)) {
            continue;
        }
        let path = root.join(rel);
        // Reached as a walk reaches it, through directories and no link the tree made on
        // the way (else it is not there for this checkpoint).
        let reachable = Path::new(rel)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .is_none_or(|p| crate::beneath::is_dir(&root.join(p)).unwrap_or(false));
        match std::fs::symlink_metadata(&path).ok().filter(|_| reachable) {
            Some(m) if m.is_dir() => match reach::reach(&rules.exclude, root, rel, true) {
                Take::Dir(w) => {
                    walk(&path, rel, w, rules, &mut walked, watch.as_deref_mut())?;
                    walked_dirs.insert(rel);
                }
                Take::LeftOut(w) => {
                    if matches!(w, Within::Kept { mask: 1.., .. }) {
                        walk(&path, rel, w, rules, &mut walked, watch.as_deref_mut())?;
                    }
                    walked.left_out.insert(rel.clone());
                    walked_dirs.insert(rel);
                }
                Take::Skip | Take::File => {}
            },
            Some(m)
                if (m.is_file() || m.file_type().is_symlink())
                    && reach::reach(&rules.exclude, root, rel, false) == Take::File =>
            {
                walked.files.push((rel.clone(), Found::Path(path)));
            }
            _ => {}
        }
        if previous.contains_key(rel.as_str()) {
            candidates.insert(rel);
        }
        let under = format!("{rel}/");
        candidates.extend(
            previous
                .range::<str, _>((
                    std::ops::Bound::Excluded(under.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(p, _)| p.starts_with(&under))
                .map(|(p, _)| p.as_str()),
        );
    }
    let (set, _) = look_all(&walked.files, rules, previous, store)?;
    let found: HashSet<&str> = walked.files.iter().map(|(p, _)| p.as_str()).collect();
    Ok(Delta {
        set,
        deleted: candidates
            .into_iter()
            .filter(|p| !found.contains(p))
            .map(str::to_owned)
            .collect(),
        left_out: walked.left_out,
    })
}

/// The directories `rel` lies in, nearest last (`a/b/c`: `a`, `a/b`).
fn ancestors(rel: &str) -> impl Iterator<Item = &str> {
    rel.match_indices('/').map(move |(i, _)| &rel[..i])
}

/// Looks at `files` (by two threads from [`PARALLEL_FROM`] on): the changed ones, and how
/// many of them `previous` has.
fn look_all(
    files: &[(String, Found)],
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
) -> Result<(Vec<(String, Entry)>, usize), ScanError> {
    let (mut set, mut seen) = (Vec::new(), 0usize);
    if files.len() < PARALLEL_FROM {
        look(files, rules, previous, store, (&mut set, &mut seen))?;
    } else {
        let (a, b) = files.split_at(files.len() / 2);
        let mut other = (Vec::new(), 0usize);
        let theirs = std::thread::scope(|scope| {
            let t = scope.spawn(|| look(b, rules, previous, store, (&mut other.0, &mut other.1)));
            let mine = look(a, rules, previous, store, (&mut set, &mut seen));
            let theirs = t.join().unwrap_or_else(|_| {
                Err(ScanError::Store(std::io::Error::other(
                    "a checkpoint thread failed",
                )))
            });
            mine.and(theirs)
        });
        theirs?;
        set.append(&mut other.0);
        seen += other.1;
    }
    Ok((set, seen))
}

/// Looks at `files` against `previous`: the changed ones into `set` (kept in `store`), the
/// count of those `previous` has into `seen`.
fn look(
    files: &[(String, Found)],
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
    (set, seen): (&mut Vec<(String, Entry)>, &mut usize),
) -> Result<(), ScanError> {
    for (rel, e) in files {
        let Ok(meta) = e.metadata() else {
            continue;
        };
        if !(meta.is_file() || meta.file_type().is_symlink()) {
            continue;
        }
        let (mtime, ctime) = times(&meta);
        let stat = (mtime, ctime, meta.ino());
        let mode = meta.mode() & 0o7777;
        let untracked = !rules.tracked.contains(rel.as_str());
        if let Some(p) = previous.get(rel.as_str()) {
            *seen += 1;
            // A file left to be kept later by the last run, which did not: kept now.
            let left = p.kind == Kind::TooLarge && p.size <= rules.max_file;
            if p.stat == stat && p.size == meta.len() && p.mode == mode && !left {
                continue;
            }
        }
        let kind = if meta.file_type().is_symlink() {
            match std::fs::read_link(e.path()) {
                Ok(t) => Kind::Link(t.to_string_lossy().into_owned()),
                Err(_) => continue,
            }
        } else if untracked && (meta.len() > rules.max_file || meta.len() > rules.at_once) {
            Kind::TooLarge
        } else {
            // Never through a link the agent's tree put on the way since the walk (the
            // wrapper would keep, and undo would restore into the workspace, a file of the
            // person's outside it), nor a FIFO put where a file was: gone, unreadable or no
            // longer a file reached without a link, it is not there for this checkpoint.
            let Ok(file) = crate::beneath::open_file(&e.path()) else {
                continue;
            };
            match store.keep_file(file, meta.len()) {
                Ok(hash) => Kind::File(hash),
                Err(err) => return Err(ScanError::Store(err)),
            }
        };
        let size = meta.len();
        set.push((
            rel.clone(),
            Entry {
                kind,
                mode,
                size,
                stat,
            },
        ));
    }
    Ok(())
}

/// The manifest of what is in `root` now: `previous` with a walk's changes.
pub(crate) fn manifest(
    root: &Path,
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
    watch: Option<&mut Watch>,
) -> Result<Manifest, ScanError> {
    let delta = scan(root, rules, previous, store, watch)?;
    let mut now = previous.clone();
    delta.apply(&mut now);
    Ok(now)
}

/// Keeps the files of `manifest` a first walk left for later ([`Rules::at_once`]): each
/// read through a descriptor that follows no link, kept only when it did not change while
/// it was read (its status-change time and size as the walk saw them, before and after);
/// their entries, now holding their content.
pub(crate) fn keep_deferred(
    root: &Path,
    rules: &Rules,
    manifest: &Manifest,
    store: &Store,
) -> Vec<(String, Entry)> {
    let mut kept = Vec::new();
    for (rel, e) in manifest {
        if e.kind != Kind::TooLarge || e.size > rules.max_file {
            continue;
        }
        let as_walked = |f: &std::fs::File| {
            f.metadata()
                .is_ok_and(|m| (times(&m).1, m.ino(), m.len()) == (e.stat.1, e.stat.2, e.size))
        };
        let Ok(file) = crate::beneath::open_file(&root.join(rel)) else {
            continue;
        };
        if !as_walked(&file) {
            continue;
        }
        let Ok(again) = file.try_clone() else {
            continue;
        };
        let Ok(hash) = store.keep_file(file, e.size) else {
            continue;
        };
        if as_walked(&again) {
            let mut e = e.clone();
            e.kind = Kind::File(hash);
            kept.push((rel.clone(), e));
        }
    }
    kept
}

/// The files git tracks in `root` (relative to it), or none when it is not in a repository:
/// read from the index, never by running git ([`super::gitindex`]).
pub(crate) fn tracked(root: &Path) -> HashSet<String> {
    super::gitindex::tracked(root)
}

/// What changed from `before` to `after`: created, changed and deleted paths (stat-only
/// changes left out).
pub(crate) fn diff(before: &Manifest, after: &Manifest) -> Changes {
    let mut c = Changes::default();
    for (path, e) in after {
        match before.get(path) {
            None => c.created.push(path.clone()),
            Some(b) if !b.same_as(e) => c.changed.push(path.clone()),
            Some(_) => {}
        }
    }
    c.deleted = before
        .keys()
        .filter(|p| !after.contains_key(*p))
        .cloned()
        .collect();
    c
}

/// Paths created, changed and deleted between two manifests.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Paths that were not there.
    pub created: Vec<String>,
    /// Paths whose content, target or mode changed.
    pub changed: Vec<String>,
    /// Paths that are gone.
    pub deleted: Vec<String>,
}

impl Changes {
    /// Whether nothing changed.
    pub(crate) fn is_empty(&self) -> bool {
        self.created.is_empty() && self.changed.is_empty() && self.deleted.is_empty()
    }
}

mod left_out;
pub(crate) use left_out::left_out;
pub(crate) use left_out::LeftOut;

#[cfg(test)]
mod tests;
