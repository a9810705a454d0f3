//! The floor's refusals as the agent's own tools report them, found so that the agent (and
//! the person) can be told why, without the kernel's audit log.
//!
//! A refusal is taken for the floor's only on facts: a line of a tool's output names a
//! refusal (`Permission denied`, `Read-only file system`, `Device or resource busy`, their
//! errno names) and a path on the same line; that path is one this run's floor does not let
//! the tree write (beneath no writable root, or protected beneath one); and the same user
//! without the floor could have written it (the wrapper, outside the floor, checks with
//! `access(2)`, and that its file system is not read-only). A refusal the machine itself
//! would have made is never explained as the floor's.

use std::path::{Component, Path, PathBuf};

use nix::unistd::AccessFlags;

use super::plan::Plan;

/// How many lines of one tool result are looked at, and how many bytes: a result is
/// looked at on every tool call, so a huge one is not read to its end.
const MAX_BYTES: usize = 256 << 10;
const MAX_FOUND: usize = 8;

/// What a tool reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// `EACCES` or `EPERM`: Landlock's answer beneath no writable root.
    Denied,
    /// `EROFS`: a path bound read-only.
    ReadOnly,
    /// `EBUSY`: a protected path bound over, which cannot be removed or renamed.
    Busy,
}

impl Refusal {
    /// The error's message as `strerror` words it (what tools print).
    pub fn text(self) -> &'static str {
        match self {
            Refusal::Denied => "Permission denied",
            Refusal::ReadOnly => "Read-only file system",
            Refusal::Busy => "Device or resource busy",
        }
    }
}

/// Why the floor refuses the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Why {
    /// It is beneath none of the run's writable roots.
    Outside,
    /// It is protected beneath a writable root (what a later session obeys or runs, the
    /// wrapper's own files).
    Protected,
}

/// One refusal of the floor, as a tool reported it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Met {
    /// The path the tool could not write: absolute and normalised (`~/`, `.`, `..` expanded).
    pub path: PathBuf,
    /// Which refusal the tool's line named.
    pub refusal: Refusal,
    /// Which of the floor's lines the path falls on.
    pub why: Why,
}

/// The lines this run's floor draws for writes.
#[derive(Debug, Clone)]
pub struct Lines {
    writable: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    home: Option<PathBuf>,
    /// Whether the same user without the floor could write a path.
    without_floor: fn(&Path) -> bool,
}

const PHRASES: &[(&str, Refusal)] = &[
    ("permission denied", Refusal::Denied),
    ("operation not permitted", Refusal::Denied),
    ("eacces", Refusal::Denied),
    ("eperm", Refusal::Denied),
    ("read-only file system", Refusal::ReadOnly),
    ("erofs", Refusal::ReadOnly),
    ("device or resource busy", Refusal::Busy),
    ("ebusy", Refusal::Busy),
];

/// The first refusal `line` names: where, the phrase, and which.
fn refusal_in(line: &str) -> Option<(usize, &'static str, Refusal)> {
    PHRASES
        .iter()
        .find_map(|(p, r)| find_ascii_ci(line, p).map(|at| (at, *p, *r)))
}

/// Whether `text` names a refusal at all: what a tool result must do before it is read
/// further (most do not, and are left at that).
pub fn names_refusal(text: &str) -> bool {
    refusal_in(text).is_some()
}

/// Where `needle` (ASCII lowercase) first occurs in `hay`, ASCII case aside, without making
/// a lowercase copy of `hay` (this runs over every tool result).
pub fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    if h.len() < n.len() {
        return None;
    }
    (0..=h.len() - n.len())
        .find(|&i| h[i].to_ascii_lowercase() == first && h[i..i + n.len()].eq_ignore_ascii_case(n))
}

impl Lines {
    /// The lines of `plan`; `home` expands `~/` in what tools print.
    pub fn new(plan: &Plan, home: Option<PathBuf>) -> Lines {
        let mut protected = plan.read_only.clone();
        protected.extend(plan.absent.iter().cloned());
        protected.extend(plan.hidden.iter().cloned());
        Lines {
            writable: plan.writable.clone(),
            protected,
            home,
            without_floor: writable_without_floor,
        }
    }

    /// Lines from their parts (for tests and tools).
    pub fn from_parts(
        writable: Vec<PathBuf>,
        protected: Vec<PathBuf>,
        home: Option<PathBuf>,
    ) -> Lines {
        Lines {
            writable,
            protected,
            home,
            without_floor: writable_without_floor,
        }
    }

    /// The run's writable roots.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// The floor's refusals reported in `text`, a tool's output run in `cwd`.
    pub fn find(&self, text: &str, cwd: &Path) -> Vec<Met> {
        let mut found: Vec<Met> = Vec::new();
        let text = match text.char_indices().nth(MAX_BYTES) {
            Some((cut, _)) => &text[..cut],
            None => text,
        };
        for line in text.lines() {
            let Some((at, phrase, refusal)) = refusal_in(line) else {
                continue;
            };
            // The path the refusal is about: the one right before it (`touch: cannot touch
            // 'x': Permission denied`), else the first after it (`EACCES: permission denied,
            // open 'x'`); never another path the line names (`/bin/bash: line 1: x: …`).
            let named = candidates(line);
            let before = named.iter().rev().find(|(_, end, _)| *end <= at);
            let after = named.iter().find(|(start, ..)| *start >= at + phrase.len());
            let Some((.., candidate)) = before.or(after) else {
                continue;
            };
            let Some(path) = self.resolve(candidate, cwd) else {
                continue;
            };
            let Some(why) = self.refused(&path, refusal) else {
                continue;
            };
            let met = Met { path, refusal, why };
            if !found.contains(&met) {
                found.push(met);
            }
            if found.len() >= MAX_FOUND {
                break;
            }
        }
        found
    }

    /// `candidate` as an absolute, normalised path (`~/` and relative ones expanded).
    fn resolve(&self, candidate: &str, cwd: &Path) -> Option<PathBuf> {
        let path = match candidate.strip_prefix("~/") {
            Some(rest) => self.home.as_ref()?.join(rest),
            None if candidate.starts_with('/') => PathBuf::from(candidate),
            None => cwd.join(candidate),
        };
        let mut normal = PathBuf::new();
        for c in path.components() {
            match c {
                Component::ParentDir => {
                    normal.pop();
                }
                Component::CurDir => {}
                c => normal.push(c),
            }
        }
        normal.is_absolute().then_some(normal)
    }

    /// Why the floor refuses writing `path`, when it does and the machine itself would not
    /// have (as `refusal` says the tool met).
    fn refused(&self, path: &Path, refusal: Refusal) -> Option<Why> {
        let protected = self.protected.iter().any(|p| path.starts_with(p));
        let writable = self.writable.iter().any(|w| path.starts_with(w));
        let why = match (protected, writable, refusal) {
            (true, _, _) => Why::Protected,
            (false, false, Refusal::Denied | Refusal::ReadOnly) => Why::Outside,
            _ => return None,
        };
        (self.without_floor)(path).then_some(why)
    }
}

/// Whether this process (the same user, outside the floor) could write `path`: change it,
/// or create or remove it in its directory; and its file system is not read-only.
fn writable_without_floor(path: &Path) -> bool {
    let may_write = |p: &Path| nix::unistd::access(p, AccessFlags::W_OK).is_ok();
    let existing = path.ancestors().find(|p| p.symlink_metadata().is_ok());
    let Some(existing) = existing else {
        return false;
    };
    let read_only = nix::sys::statvfs::statvfs(existing)
        .is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY));
    if read_only {
        return false;
    }
    let parent = existing.parent().unwrap_or(existing);
    match existing == path {
        true => may_write(path) || may_write(parent),
        // Created beneath it: it must be a directory the user may write.
        false => existing.is_dir() && may_write(existing),
    }
}

/// The paths a line names, with where each starts and ends: its quoted parts, and its words
/// that look like paths.
fn candidates(line: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '`'), ('“', '”')] {
        let mut from = 0;
        while let Some(start) = line[from..].find(open).map(|i| from + i) {
            let inner = start + open.len_utf8();
            let Some(end) = line[inner..].find(close).map(|i| inner + i) else {
                break;
            };
            let quoted = &line[inner..end];
            if !quoted.is_empty() && !quoted.contains(char::is_whitespace) {
                out.push((start, end + close.len_utf8(), quoted));
            }
            from = end + close.len_utf8();
        }
    }
    let mut at = 0;
    for word in line.split_whitespace() {
        let start = at + line[at..].find(word).unwrap_or(0);
        at = start + word.len();
        let trimmed = word.trim_matches(|c: char| "'\"‘’`“”,;:()[]{}<>".contains(c));
        let quoted = out.iter().any(|(s, e, _)| *s <= start && start < *e);
        if !quoted && (trimmed.starts_with('/') || trimmed.starts_with("~/")) {
            let offset = word.find(trimmed).unwrap_or(0);
            out.push((start + offset, start + offset + trimmed.len(), trimmed));
        }
    }
    out.sort_by_key(|(start, ..)| *start);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(root: &Path) -> Lines {
        Lines::from_parts(
            vec![root.join("ws"), root.join("tmp")],
            vec![
                root.join("ws/.git/hooks"),
                root.join("home/.claude/CLAUDE.md"),
            ],
            Some(root.join("home")),
        )
    }

    #[test]
    fn a_refused_path_outside_the_writable_roots_is_the_floors() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["ws/.git/hooks", "home/.claude", "other"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let l = lines(root);
        let ws = root.join("ws");
        let text = format!(
            "Exit code 1\ntouch: cannot touch '{}/other/x': Permission denied\n\
             rm: cannot remove '.git/hooks': Device or resource busy\n\
             bash: ~/.claude/CLAUDE.md: Read-only file system\n\
             cat: notes.txt: Permission denied\n",
            root.display()
        );
        let found = l.find(&text, &ws);
        assert_eq!(
            found,
            [
                Met {
                    path: root.join("other/x"),
                    refusal: Refusal::Denied,
                    why: Why::Outside
                },
                Met {
                    path: root.join("ws/.git/hooks"),
                    refusal: Refusal::Busy,
                    why: Why::Protected
                },
                Met {
                    path: root.join("home/.claude/CLAUDE.md"),
                    refusal: Refusal::ReadOnly,
                    why: Why::Protected
                },
            ],
            "notes.txt is in the workspace: not the floor's"
        );
        // Node's and Python's forms name the path after the refusal.
        let node = format!(
            "Error: EACCES: permission denied, open '{}/other/y'",
            root.display()
        );
        assert_eq!(l.find(&node, &ws)[0].path, root.join("other/y"));
        let py = format!(
            "PermissionError: [Errno 13] Permission denied: '{}/other/../other/z'",
            root.display()
        );
        assert_eq!(l.find(&py, &ws)[0].path, root.join("other/z"));
        // The path the refusal is about, not the shell that reports it.
        let bash = format!(
            "/bin/bash: line 1: {}/other/w: Permission denied",
            root.display()
        );
        let found = l.find(&bash, &ws);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, root.join("other/w"));
        // No refusal named, or a refusal in the workspace: nothing.
        assert!(l
            .find(&format!("{}/other/x exists", root.display()), &ws)
            .is_empty());
        assert!(l
            .find(
                "mkdir: cannot create directory 'build': Permission denied",
                &ws
            )
            .is_empty());
    }

    #[test]
    fn a_phrase_is_found_where_a_lowercase_copy_would_find_it() {
        for (hay, needle) in [
            ("touch: x: Permission Denied", "permission denied"),
            ("Error: EACCES: permission denied", "eacces"),
            ("ÉCHEC: Read-only file system", "read-only file system"),
            ("nothing here", "ebusy"),
            ("eb", "ebusy"),
        ] {
            assert_eq!(
                find_ascii_ci(hay, needle),
                hay.to_ascii_lowercase().find(needle),
                "{hay}"
            );
        }
        assert!(names_refusal(
            "OSError: [Errno 30] Read-only file system: 'x'"
        ));
        assert!(!names_refusal("all good"));
    }

    #[test]
    fn a_refusal_the_machine_itself_makes_is_not_the_floors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("other")).unwrap();
        let mut l = Lines::from_parts(vec![dir.path().join("ws")], vec![], None);
        let text = format!(
            "touch: cannot touch '{}/other/x': Permission denied",
            dir.path().display()
        );
        assert_eq!(l.find(&text, dir.path()).len(), 1);
        l.without_floor = |_| false;
        assert!(
            l.find(&text, dir.path()).is_empty(),
            "the user could not have written it"
        );
    }

    #[test]
    fn the_user_could_write_what_its_permissions_and_file_system_allow() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(writable_without_floor(&file));
        assert!(writable_without_floor(&dir.path().join("new/deeper")));
        assert!(!writable_without_floor(&file.join("beneath-a-file")));
        if !nix::unistd::geteuid().is_root() {
            use std::os::unix::fs::PermissionsExt;
            let locked = dir.path().join("locked");
            std::fs::create_dir(&locked).unwrap();
            std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
            assert!(!writable_without_floor(&locked.join("x")));
        }
    }
}
