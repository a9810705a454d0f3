//! Paths made canonical for the floor's plan: symbolic links resolved where the path exists,
//! the longest existing ancestor where it does not, and whether each exists and is a
//! directory, every directory on the way looked at once.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Paths with symlinks resolved where they exist, otherwise their longest existing ancestor
/// resolved and the rest appended (`..` and `.` folded), for many paths at once: each
/// directory on the way is looked at once
/// (`lstat`, and `realpath` only for a symbolic link), where `realpath` of each path would
/// read every component again (a plan resolves a hundred paths beneath the same few
/// directories); and what it found answers whether a path exists, and is a directory,
/// without another `stat`.
#[derive(Default)]
pub(super) struct Resolver {
    /// An absolute path as [`plain`] writes it (bytes: a `Path` hashes and splits itself
    /// component by component), and what it resolves to when it exists.
    seen: std::collections::HashMap<Vec<u8>, Option<Found>>,
}

/// An existing path, resolved.
#[derive(Debug, Clone)]
struct Found {
    path: PathBuf,
    dir: bool,
}

impl Resolver {
    pub(super) fn canonical(&mut self, path: &Path) -> PathBuf {
        self.look(path).0
    }

    /// The canonical path of an existing directory (symbolic links followed).
    pub(super) fn dir(&mut self, path: &Path) -> Option<PathBuf> {
        match self.look(path) {
            (p, Some(true)) => Some(p),
            _ => None,
        }
    }

    /// [`Self::canonical`], and whether the path exists: `Some(is a directory)`.
    pub(super) fn look(&mut self, path: &Path) -> (PathBuf, Option<bool>) {
        let Some(plain) = plain(path) else {
            let p = slow_canonical(path);
            let kind = p.metadata().ok().map(|m| m.is_dir());
            return (p, kind);
        };
        if let Some(found) = self.resolve(&plain) {
            return (found.path, Some(found.dir));
        }
        // The longest existing ancestor, resolved, and the rest as written.
        let mut at = plain.len();
        while let Some(cut) = plain[..at].iter().rposition(|&b| b == b'/') {
            if let Some(found) = self.resolve(&plain[..cut.max(1)]) {
                let mut out = found.path.into_os_string().into_vec();
                if out.last() != Some(&b'/') {
                    out.push(b'/');
                }
                out.extend_from_slice(&plain[cut + 1..]);
                return (PathBuf::from(OsString::from_vec(out)), None);
            }
            at = cut;
        }
        (path.to_owned(), None)
    }

    /// Where `path` (absolute, written as [`plain`] writes it) leads, when it exists.
    fn resolve(&mut self, path: &[u8]) -> Option<Found> {
        if let Some(known) = self.seen.get(path) {
            return known.clone();
        }
        let found = match path.iter().rposition(|&b| b == b'/') {
            Some(cut) if path.len() > 1 => self.resolve(&path[..cut.max(1)]).and_then(|dir| {
                let at = dir.path.join(OsStr::from_bytes(&path[cut + 1..]));
                match std::fs::symlink_metadata(&at) {
                    Ok(m) if m.file_type().is_symlink() => {
                        let path = std::fs::canonicalize(&at).ok()?;
                        let dir = path.is_dir();
                        Some(Found { path, dir })
                    }
                    Ok(m) => Some(Found {
                        path: at,
                        dir: m.is_dir(),
                    }),
                    Err(_) => None,
                }
            }),
            // The root.
            _ => Some(Found {
                path: PathBuf::from("/"),
                dir: true,
            }),
        };
        self.seen.insert(path.to_vec(), found.clone());
        found
    }
}

/// An absolute path without `.` or `..` as bytes, one `/` between names and none at the
/// end; `None` for any other path.
fn plain(path: &Path) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(path.as_os_str().len());
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(name) => {
                out.push(b'/');
                out.extend_from_slice(name.as_bytes());
            }
            _ => return None,
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    path.is_absolute().then_some(out)
}

/// [`Resolver::canonical`] of a relative path or one with `.` or `..`, one `realpath` per
/// ancestor.
fn slow_canonical(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let mut rest = Vec::new();
    let mut at = path;
    while let Some(parent) = at.parent() {
        if let Some(name) = at.file_name() {
            rest.push(name.to_owned());
        }
        if let Ok(base) = std::fs::canonicalize(parent) {
            let mut out = base;
            out.extend(rest.iter().rev());
            return out;
        }
        at = parent;
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resolver_agrees_with_realpath_and_stat_on_links_missing_and_dangling_paths() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("real/deep")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        std::os::unix::fs::symlink("real/deep", root.join("rel")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).unwrap();
        std::fs::write(root.join("real/file"), "").unwrap();
        let mut r = Resolver::default();
        for p in [
            "real",
            "real/deep",
            "real/file",
            "link",
            "link/deep",
            "link/file",
            "link/none/x",
            "rel",
            "rel/y",
            "dangling",
            "dangling/z",
            "none",
            "none/a/b",
            "real/file/under",
        ] {
            let path = root.join(p);
            assert_eq!(r.canonical(&path), slow_canonical(&path), "{p}");
            // Whether it exists and is a directory, as `stat` (links followed) says.
            let kind = path.metadata().ok().map(|m| m.is_dir());
            assert_eq!(r.look(&path).1, kind, "{p}");
            assert_eq!(r.dir(&path).is_some(), kind == Some(true), "{p}");
        }
        assert_eq!(r.canonical(&root.join("link/deep")), root.join("real/deep"));
        assert_eq!(
            r.canonical(&root.join("link/none/x")),
            root.join("real/none/x")
        );
    }
}
