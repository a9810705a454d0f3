//! The workspace's files as a checkpoint sees them: a walk that skips `.git` and what
//! `exclude` names, each regular file and symbolic link with what tells a change (size,
//! times, inode, mode), and its content kept in the store when that changed since the last
//! look (a file whose stat is the same is not read again, as git's index does).

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::Store;

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
    /// Names or relative paths not walked.
    pub exclude: Vec<String>,
    /// Files git tracks (relative paths): kept whatever their size.
    pub tracked: HashSet<String>,
    /// Other files larger than this are not kept.
    pub max_file: u64,
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

/// Walks `root` against `previous`: each file whose stat changed (or that is new) is kept in
/// `store`; what changed.
pub(crate) fn scan(
    root: &Path,
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
) -> Result<Delta, ScanError> {
    // The directories first (their entries' types come with them), then each file's stat.
    let mut files: Vec<(String, std::fs::DirEntry)> = Vec::new();
    let mut dirs: Vec<(PathBuf, String)> = vec![(root.to_owned(), String::new())];
    while let Some((dir, base)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let rel = if base.is_empty() {
                name.to_owned()
            } else {
                format!("{base}/{name}")
            };
            if name == ".git" || rules.excluded(name, &rel) {
                continue;
            }
            let Ok(ft) = e.file_type() else {
                continue;
            };
            if ft.is_dir() {
                dirs.push((e.path(), rel));
            } else if ft.is_file() || ft.is_symlink() {
                if files.len() as u64 >= rules.max_files {
                    return Err(ScanError::TooMany(rules.max_files));
                }
                files.push((rel, e));
            }
        }
    }
    let (mut set, mut seen) = (Vec::new(), 0usize);
    if files.len() < PARALLEL_FROM {
        look(&files, rules, previous, store, (&mut set, &mut seen))?;
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
    let mut delta = Delta {
        set,
        deleted: Vec::new(),
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
                    || !walked(rules, p)
            })
            .cloned()
            .collect();
    }
    Ok(delta)
}

/// Looks at `files` against `previous`: the changed ones into `set` (kept in `store`), the
/// count of those `previous` has into `seen`.
fn look(
    files: &[(String, std::fs::DirEntry)],
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
    (set, seen): (&mut Vec<(String, Entry)>, &mut usize),
) -> Result<(), ScanError> {
    for (rel, e) in files {
        let Ok(meta) = e.metadata() else {
            continue;
        };
        let stat = (
            meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            meta.ino(),
        );
        let mode = meta.mode() & 0o7777;
        if let Some(p) = previous.get(rel.as_str()) {
            *seen += 1;
            if p.stat == stat && p.size == meta.len() && p.mode == mode {
                continue;
            }
        }
        let kind = if meta.file_type().is_symlink() {
            match std::fs::read_link(e.path()) {
                Ok(t) => Kind::Link(t.to_string_lossy().into_owned()),
                Err(_) => continue,
            }
        } else if meta.len() > rules.max_file && !rules.tracked.contains(rel.as_str()) {
            Kind::TooLarge
        } else {
            // Never through a link the agent's tree put on the way since the walk (the
            // wrapper would keep, and undo would restore into the workspace, a file of the
            // person's outside it), nor a FIFO put where a file was: gone, unreadable or no
            // longer a file reached without a link, it is not there for this checkpoint.
            let Ok(file) = crate::beneath::open_file(&e.path()) else {
                continue;
            };
            match store.keep_file(file) {
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

/// Whether a walk would reach `rel` (no part of it excluded or `.git`).
fn walked(rules: &Rules, rel: &str) -> bool {
    let mut prefix = String::new();
    for part in rel.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if part == ".git" || rules.excluded(part, &prefix) {
            return false;
        }
    }
    true
}

/// The manifest of what is in `root` now: `previous` with a walk's changes.
pub(crate) fn manifest(
    root: &Path,
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
) -> Result<Manifest, ScanError> {
    let delta = scan(root, rules, previous, store)?;
    let mut now = previous.clone();
    delta.apply(&mut now);
    Ok(now)
}

impl Rules {
    fn excluded(&self, name: &str, rel: &str) -> bool {
        self.exclude.iter().any(|x| x == name || x == rel)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree large enough to be looked at by two threads: a change, a deletion and a new
    /// file are each found once, and an unchanged tree gives an empty delta.
    #[test]
    fn a_large_tree_is_walked_by_two_threads_and_every_change_found() {
        let dir = tempfile::tempdir().unwrap();
        let (root, store) = (dir.path().join("ws"), Store::at(dir.path().join("store")));
        store.create().unwrap();
        for i in 0..(PARALLEL_FROM + 100) {
            let sub = root.join(format!("d{}", i % 7));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{i}")), format!("{i}\n")).unwrap();
        }
        std::fs::create_dir_all(root.join("node_modules/x")).unwrap();
        std::fs::write(root.join("node_modules/x/skipped.js"), "").unwrap();
        let rules = Rules {
            exclude: vec!["node_modules".into()],
            tracked: HashSet::new(),
            max_file: 1 << 20,
            max_files: 1 << 20,
        };
        let first = manifest(&root, &rules, &Manifest::new(), &store).unwrap();
        assert_eq!(first.len(), PARALLEL_FROM + 100);
        assert!(scan(&root, &rules, &first, &store).unwrap().is_empty());
        std::fs::write(root.join("d1/f1"), "changed\n").unwrap();
        std::fs::remove_file(root.join("d2/f2")).unwrap();
        std::fs::write(root.join("d3/new"), "new\n").unwrap();
        let delta = scan(&root, &rules, &first, &store).unwrap();
        let mut set: Vec<&str> = delta.set.iter().map(|(p, _)| p.as_str()).collect();
        set.sort();
        assert_eq!(set, ["d1/f1", "d3/new"]);
        assert_eq!(delta.deleted, ["d2/f2"]);
        let changed = &delta.set.iter().find(|(p, _)| p == "d1/f1").unwrap().1;
        let Kind::File(hash) = &changed.kind else {
            panic!("a file: {changed:?}");
        };
        assert_eq!(store.read(hash).unwrap(), b"changed\n");
    }
}
