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
pub struct Entry {
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
pub enum Kind {
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
    pub fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind && self.mode == other.mode
    }
}

/// A workspace's files: relative path (`/`-separated) to entry.
pub type Manifest = BTreeMap<String, Entry>;

/// How a walk goes.
pub struct Rules {
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
pub enum ScanError {
    /// The workspace holds more files than `max_files`.
    TooMany(u64),
    /// The store could not keep a file.
    Store(std::io::Error),
}

/// Walks `root`, each file's content kept in `store` unless `previous` has it with the same
/// stat; the manifest of what is there now.
pub fn scan(
    root: &Path,
    rules: &Rules,
    previous: &Manifest,
    store: &Store,
) -> Result<Manifest, ScanError> {
    let mut out = Manifest::new();
    let mut dirs: Vec<(PathBuf, String)> = vec![(root.to_owned(), String::new())];
    let mut count = 0u64;
    while let Some((dir, rel)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let path_rel = if rel.is_empty() {
                name.to_owned()
            } else {
                format!("{rel}/{name}")
            };
            if name == ".git" || rules.excluded(name, &path_rel) {
                continue;
            }
            let Ok(ft) = e.file_type() else {
                continue;
            };
            if ft.is_dir() {
                dirs.push((e.path(), path_rel));
                continue;
            }
            if !ft.is_file() && !ft.is_symlink() {
                continue;
            }
            count += 1;
            if count > rules.max_files {
                return Err(ScanError::TooMany(rules.max_files));
            }
            let Ok(meta) = e.metadata() else {
                continue;
            };
            let stat = (
                meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
                meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
                meta.ino(),
            );
            let mode = meta.mode() & 0o7777;
            if let Some(p) = previous.get(&path_rel) {
                if p.stat == stat && p.size == meta.len() && p.mode == mode {
                    out.insert(path_rel, p.clone());
                    continue;
                }
            }
            let kind = if ft.is_symlink() {
                match std::fs::read_link(e.path()) {
                    Ok(t) => Kind::Link(t.to_string_lossy().into_owned()),
                    Err(_) => continue,
                }
            } else if meta.len() > rules.max_file && !rules.tracked.contains(&path_rel) {
                Kind::TooLarge
            } else {
                match store.keep(&e.path()) {
                    Ok(hash) => Kind::File(hash),
                    // Gone or unreadable since the walk saw it: not there for this checkpoint.
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => continue,
                    Err(err) => return Err(ScanError::Store(err)),
                }
            };
            let entry = Entry {
                kind,
                mode,
                size: meta.len(),
                stat,
            };
            out.insert(path_rel, entry);
        }
    }
    Ok(out)
}

impl Rules {
    fn excluded(&self, name: &str, rel: &str) -> bool {
        self.exclude.iter().any(|x| x == name || x == rel)
    }
}

/// The files git tracks in `root` (relative to it), or none when it is not in a repository
/// (no git started then).
pub fn tracked(root: &Path) -> HashSet<String> {
    if !root.ancestors().any(|d| d.join(".git").exists()) {
        return HashSet::new();
    }
    // Relative to the directory it runs in, and unquoted with -z.
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => out
            .stdout
            .split(|b| *b == 0)
            .filter_map(|p| std::str::from_utf8(p).ok())
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => HashSet::new(),
    }
}

/// What changed from `before` to `after`: created, changed and deleted paths (stat-only
/// changes left out).
pub fn diff(before: &Manifest, after: &Manifest) -> Changes {
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
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.changed.is_empty() && self.deleted.is_empty()
    }
}
