//! Path resolution for rules: `~` expansion, cwd joining, `..` and symlinks, workspace predicates.

use std::path::{Component, Path, PathBuf};

/// How many symlinks one path may traverse before we stop following (as the kernel does).
const MAX_SYMLINKS: usize = 40;

/// Resolves the words of a command or the paths of a file tool into absolute paths.
#[derive(Debug, Clone)]
pub(crate) struct Resolver {
    /// The (canonical) home directory, for `~` and for `~/…` patterns.
    pub home: PathBuf,
    /// Whether to consult the file system (symlinks). Off for policy examples, so that they
    /// give the same answer on every machine.
    pub follow_symlinks: bool,
    /// Whether to read the code a command runs from disk (scripts, build files), and since
    /// when a changed file counts as untrusted (the agent's own work). `None` for policy
    /// examples, which never touch the file system.
    pub code_since: Option<std::time::SystemTime>,
    /// Other homes the `~/…` patterns also cover: the user's home in the password database
    /// when `HOME` points elsewhere (an agent started with `HOME=/tmp/x` still has its keys
    /// in the real one).
    pub other_homes: Vec<PathBuf>,
    /// The files the event's session wrote earlier, with what it wrote in them: code run
    /// from one is read as written too (`None`: no session memory, or nothing written).
    pub written: Option<std::sync::Arc<super::memory::Files>>,
}

/// An absolute, normalised path, plus its `~/…` spelling when it lies under the home directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedPath {
    pub abs: PathBuf,
    pub tilde: Option<String>,
}

impl Resolver {
    /// Resolves `word` (as the shell would see it after quote removal) against `cwd`.
    pub(crate) fn resolve(&self, word: &str, cwd: &Path) -> ResolvedPath {
        let expanded: PathBuf = if word == "~" {
            self.home.clone()
        } else if let Some(rest) = word.strip_prefix("~/") {
            self.home.join(rest)
        } else {
            cwd.join(word)
        };
        self.resolve_path(expanded)
    }

    /// Resolves a shell word after expansion: `~` was the shell's to expand, so a `~` left
    /// here is a literal name (`rm -rf '~'`).
    pub(crate) fn resolve_word(&self, word: &str, cwd: &Path) -> ResolvedPath {
        self.resolve_path(cwd.join(word))
    }

    /// Like [`Resolver::resolve_word`], but a symlink in the last component is not followed:
    /// what `rm -rf link` removes is the link (`rm -rf link/` is resolved in full).
    pub(crate) fn resolve_word_nofollow(&self, word: &str, cwd: &Path) -> ResolvedPath {
        let full = cwd.join(word);
        let name = match full.components().next_back() {
            Some(Component::Normal(n)) if !word.ends_with('/') => n.to_owned(),
            _ => return self.resolve_word(word, cwd),
        };
        let parent = full
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        let mut abs = self.resolve_path(parent).abs;
        abs.push(name);
        self.with_tilde(abs)
    }

    fn with_tilde(&self, abs: PathBuf) -> ResolvedPath {
        let tilde = std::iter::once(&self.home)
            .chain(&self.other_homes)
            .find_map(|h| abs.strip_prefix(h).ok())
            .map(|rest| {
                if rest.as_os_str().is_empty() {
                    "~".to_owned()
                } else {
                    format!("~/{}", rest.display())
                }
            });
        ResolvedPath { abs, tilde }
    }

    fn resolve_path(&self, expanded: PathBuf) -> ResolvedPath {
        let abs = if self.follow_symlinks {
            resolve_on_disk(&expanded)
        } else {
            normalise(&expanded)
        };
        self.with_tilde(abs)
    }

    /// Resolves a directory that is already absolute (a cwd or workspace root).
    pub(crate) fn resolve_dir(&self, dir: &Path) -> PathBuf {
        self.resolve(&dir.to_string_lossy(), Path::new("/")).abs
    }
}

/// Removes `.` and `..` lexically (no file system access).
pub(crate) fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Canonicalises the part of `path` that exists, component by component, so that a symlink
/// followed by `..` goes where the kernel would go; the missing rest is normalised lexically.
fn resolve_on_disk(path: &Path) -> PathBuf {
    // Fast path: the whole path exists.
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let mut out = PathBuf::from("/");
    let mut exists = true;
    let mut followed = 0;
    for c in path.components() {
        match c {
            Component::Normal(part) => {
                out.push(part);
                if !exists {
                    continue;
                }
                match std::fs::symlink_metadata(&out) {
                    Ok(m) if m.file_type().is_symlink() && followed < MAX_SYMLINKS => {
                        followed += 1;
                        match std::fs::canonicalize(&out) {
                            Ok(target) => out = target,
                            // A dangling link: say where it points, as far as we can tell.
                            Err(_) => {
                                if let Ok(target) = std::fs::read_link(&out) {
                                    out.pop();
                                    out = normalise(&out.join(target));
                                }
                                exists = false;
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(_) => exists = false,
                }
            }
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Where a path lies relative to the workspace, the home directory and the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Where {
    /// Not the workspace and not below it.
    OutsideWorkspace,
    /// The workspace or below it.
    InsideWorkspace,
    /// Exactly the workspace root.
    Workspace,
    /// A strict ancestor of the workspace (deleting it deletes the workspace).
    WorkspaceAncestor,
    /// Exactly the home directory.
    Home,
    /// Exactly `/`.
    Root,
    /// The wrapper's own files: its executables, its run directory, its control socket.
    Wrapper,
}

impl Where {
    pub(crate) fn holds(
        self,
        path: &ResolvedPath,
        workspace: &Path,
        home: &Path,
        wrapper: &[PathBuf],
    ) -> bool {
        let p = path.abs.as_path();
        match self {
            Where::OutsideWorkspace => !p.starts_with(workspace),
            Where::InsideWorkspace => p.starts_with(workspace),
            Where::Workspace => p == workspace,
            Where::WorkspaceAncestor => workspace.starts_with(p) && p != workspace,
            Where::Home => p == home,
            Where::Root => p == Path::new("/"),
            // The file itself, anything inside it, or a directory that holds it.
            Where::Wrapper => wrapper
                .iter()
                .any(|w| p.starts_with(w) || (w.starts_with(p) && p != Path::new("/"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexical(home: &str) -> Resolver {
        Resolver {
            home: PathBuf::from(home),
            follow_symlinks: false,
            code_since: None,
            written: None,
            other_homes: Vec::new(),
        }
    }

    #[test]
    fn tilde_dotdot_and_relative_paths_resolve() {
        let r = lexical("/home/u");
        let cwd = Path::new("/work/x");
        assert_eq!(r.resolve("~", cwd).abs, PathBuf::from("/home/u"));
        assert_eq!(r.resolve("~", cwd).tilde.as_deref(), Some("~"));
        let p = r.resolve("../../home/u/.ssh/id_rsa", cwd);
        assert_eq!(p.abs, PathBuf::from("/home/u/.ssh/id_rsa"));
        assert_eq!(p.tilde.as_deref(), Some("~/.ssh/id_rsa"));
        assert_eq!(r.resolve("./b/../c", cwd).abs, PathBuf::from("/work/x/c"));
        assert_eq!(r.resolve("/../..", cwd).abs, PathBuf::from("/"));
        assert_eq!(r.resolve("~user", cwd).abs, PathBuf::from("/work/x/~user"));
    }

    #[test]
    fn another_home_is_spelled_with_a_tilde_too() {
        let mut r = lexical("/tmp/fake-home");
        r.other_homes = vec![PathBuf::from("/home/u")];
        let cwd = Path::new("/w");
        assert_eq!(
            r.resolve("/home/u/.bashrc", cwd).tilde.as_deref(),
            Some("~/.bashrc")
        );
        assert_eq!(
            r.resolve("~/.ssh/id_rsa", cwd).tilde.as_deref(),
            Some("~/.ssh/id_rsa")
        );
        assert_eq!(r.resolve("/srv/x", cwd).tilde, None);
    }

    #[test]
    fn symlinks_are_followed_before_dotdot() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("real/inner")).unwrap();
        std::os::unix::fs::symlink(base.join("real/inner"), base.join("link")).unwrap();
        let r = Resolver {
            home: PathBuf::from("/nonexistent"),
            follow_symlinks: true,
            code_since: None,
            written: None,
            other_homes: Vec::new(),
        };
        // link/.. is real/, not base/.
        let p = r.resolve("link/../missing/file", &base);
        assert_eq!(p.abs, base.join("real/missing/file"));
    }

    #[test]
    fn where_predicates() {
        let ws = Path::new("/home/u/proj");
        let home = Path::new("/home/u");
        let r = lexical("/home/u");
        let at = |s: &str| r.resolve(s, ws);
        assert!(Where::OutsideWorkspace.holds(&at("/etc"), ws, home, &[]));
        assert!(!Where::OutsideWorkspace.holds(&at("build"), ws, home, &[]));
        assert!(Where::InsideWorkspace.holds(&at("."), ws, home, &[]));
        assert!(Where::Workspace.holds(&at("."), ws, home, &[]));
        assert!(Where::WorkspaceAncestor.holds(&at(".."), ws, home, &[]));
        assert!(!Where::WorkspaceAncestor.holds(&at("."), ws, home, &[]));
        assert!(Where::Home.holds(&at("~"), ws, home, &[]));
        assert!(Where::Root.holds(&at("/"), ws, home, &[]));
        // A sibling with a common string prefix is outside.
        assert!(Where::OutsideWorkspace.holds(&at("/home/u/project2"), ws, home, &[]));
    }
}
