//! Which paths of the workspace a checkpoint keeps: all but `.git` and the directories
//! `[checkpoints] exclude` leaves out, and within those, the few files a later command runs
//! without anyone reviewing them (a package's executables in `node_modules/.bin`, a virtual
//! environment's `bin/` and its start-up files, `*.pth` and `sitecustomize.py`).
//!
//! A name of `exclude` that is a build tool's output is left out only where that tool puts
//! it: `node_modules` beside a `package.json`, `target` beside a `Cargo.toml` (or Maven's
//! `pom.xml`, sbt's `build.sbt`), `venv` and `.venv` holding a `pyvenv.cfg`. A Go package
//! `internal/target/` is source, and kept. Another name is left out at any depth, a path
//! with a `/` where it is.

use std::path::Path;

/// Where a build tool puts the directory `name`: beside one of these files, or holding one.
enum Marker {
    /// A file beside it.
    Beside(&'static [&'static str]),
    /// A file inside it.
    Inside(&'static str),
}

fn marker(name: &str) -> Option<Marker> {
    match name {
        "node_modules" => Some(Marker::Beside(&["package.json"])),
        "target" => Some(Marker::Beside(&["Cargo.toml", "pom.xml", "build.sbt"])),
        "venv" | ".venv" => Some(Marker::Inside("pyvenv.cfg")),
        _ => None,
    }
}

/// A left-out directory's parts kept anyway: paths relative to it, by component (`*` any
/// name, `*.x` any name ending in `.x`).
type Parts = &'static [&'static [&'static str]];

const NODE_MODULES: Parts = &[&[".bin", "*"]];
const VENV: Parts = &[
    &["bin", "*"],
    &["lib", "*", "site-packages", "*.pth"],
    &["lib", "*", "site-packages", "sitecustomize.py"],
    &["lib", "*", "site-packages", "usercustomize.py"],
];

fn parts(name: &str) -> Option<Parts> {
    match name {
        "node_modules" => Some(NODE_MODULES),
        "venv" | ".venv" => Some(VENV),
        _ => None,
    }
}

/// Where a walk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Within {
    /// Where everything is kept.
    All,
    /// In a left-out directory, `depth` components down: only its kept `parts` (those whose
    /// components so far matched, by bit).
    Kept {
        /// The directory's kept parts.
        parts: Parts,
        /// How far down.
        depth: usize,
        /// Which parts still match.
        mask: u32,
    },
}

/// What a walk does with a directory's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Not kept, not walked.
    Skip,
    /// A file (or a link) kept.
    File,
    /// A directory walked, in this state.
    Dir(Within),
    /// A left-out directory, walked only for its kept parts (this state).
    LeftOut(Within),
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some("") => true,
        Some(suffix) => name.ends_with(suffix) && name.len() > suffix.len(),
        None => pattern == name,
    }
}

/// What becomes of the entry `name` (a directory or not) of the directory `parent` (its
/// path, relative `parent_rel`) that a walk reached in the state `within`; `exclude` is the
/// policy's list.
pub(crate) fn child(
    exclude: &[String],
    parent: &Path,
    parent_rel: &str,
    within: Within,
    name: &str,
    is_dir: bool,
) -> Take {
    match within {
        Within::All => {
            if name == ".git" {
                return Take::Skip;
            }
            if excluded(exclude, parent, parent_rel, name) {
                return match (is_dir, parts(name)) {
                    (true, Some(parts)) => Take::LeftOut(Within::Kept {
                        parts,
                        depth: 0,
                        mask: (1u32 << parts.len()) - 1,
                    }),
                    (true, None) => Take::LeftOut(Within::Kept {
                        parts: &[],
                        depth: 0,
                        mask: 0,
                    }),
                    (false, _) => Take::Skip,
                };
            }
            if is_dir {
                Take::Dir(Within::All)
            } else {
                Take::File
            }
        }
        Within::Kept { parts, depth, mask } => {
            let (mut dirs, mut file) = (0u32, false);
            for (i, p) in parts.iter().enumerate() {
                if mask & (1 << i) == 0 || !p.get(depth).is_some_and(|c| matches(c, name)) {
                    continue;
                }
                if p.len() > depth + 1 {
                    dirs |= 1 << i;
                } else {
                    file = true;
                }
            }
            match is_dir {
                true if dirs != 0 => Take::Dir(Within::Kept {
                    parts,
                    depth: depth + 1,
                    mask: dirs,
                }),
                false if file => Take::File,
                _ => Take::Skip,
            }
        }
    }
}

/// Whether `exclude` leaves out the entry `name` of the directory `parent` (relative
/// `parent_rel`).
fn excluded(exclude: &[String], parent: &Path, parent_rel: &str, name: &str) -> bool {
    exclude.iter().any(|x| {
        if x.contains('/') {
            let rel = if parent_rel.is_empty() {
                name.to_owned()
            } else {
                format!("{parent_rel}/{name}")
            };
            return *x == rel;
        }
        if x != name {
            return false;
        }
        match marker(name) {
            None => true,
            Some(Marker::Beside(files)) => files.iter().any(|f| parent.join(f).exists()),
            Some(Marker::Inside(file)) => parent.join(name).join(file).exists(),
        }
    })
}

/// What a walk from `root` does with `rel` (a directory or not): [`Take::Skip`] when it
/// does not reach it.
pub(crate) fn reach(exclude: &[String], root: &Path, rel: &str, is_dir: bool) -> Take {
    let mut within = Within::All;
    let mut start = 0;
    let mut names = rel.split('/').peekable();
    while let Some(name) = names.next() {
        let last = names.peek().is_none();
        let parent_rel = if start == 0 { "" } else { &rel[..start - 1] };
        let take = child(
            exclude,
            &root.join(parent_rel),
            parent_rel,
            within,
            name,
            !last || is_dir,
        );
        if last {
            return take;
        }
        match take {
            Take::Dir(w) | Take::LeftOut(w) => within = w,
            Take::Skip | Take::File => return Take::Skip,
        }
        start += name.len() + 1;
    }
    Take::Skip
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Vec<String> {
        [
            "node_modules",
            "target",
            ".venv",
            "venv",
            "__pycache__",
            "build/out",
        ]
        .map(String::from)
        .to_vec()
    }

    /// Build outputs are left out where their tool puts them, and only there; their
    /// executables and start-up files are kept anyway.
    #[test]
    fn build_outputs_are_left_out_beside_their_tool_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            "rust/target/debug",
            "internal/target",
            "web/node_modules/.bin",
            "web/node_modules/left-pad",
            ".venv/lib/python3.11/site-packages/pkg",
            ".venv/bin",
            "notes/venv",
            "build/out",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("rust/Cargo.toml"), "").unwrap();
        std::fs::write(root.join("web/package.json"), "{}").unwrap();
        std::fs::write(root.join(".venv/pyvenv.cfg"), "").unwrap();
        let x = defaults();
        let file = |rel: &str| reach(&x, root, rel, false) == Take::File;
        assert!(!file("rust/target/debug/app"), "cargo's output");
        assert!(
            file("internal/target/target.go"),
            "a Go package named target"
        );
        assert!(!file("web/node_modules/left-pad/index.js"));
        assert!(
            file("web/node_modules/.bin/jest"),
            "an executable a later npm test runs"
        );
        assert!(!file("web/node_modules/.bin/sub/x"));
        assert!(file(".venv/bin/pytest"));
        assert!(file(".venv/lib/python3.11/site-packages/evil.pth"));
        assert!(file(".venv/lib/python3.11/site-packages/sitecustomize.py"));
        assert!(!file(".venv/lib/python3.11/site-packages/pkg/__init__.py"));
        assert!(!file(".venv/lib/python3.11/site-packages/.pth"));
        assert!(
            file("notes/venv/readme.md"),
            "no pyvenv.cfg: not a virtual environment"
        );
        assert!(
            !file("a/__pycache__/m.pyc"),
            "a name without a tool's marker, at any depth"
        );
        assert!(!file("build/out/x"), "a path, where it is");
        assert!(!file(".git/config"));
        assert!(matches!(
            reach(&x, root, "web/node_modules", true),
            Take::LeftOut(_)
        ));
        assert!(matches!(
            reach(&x, root, "web/node_modules/.bin", true),
            Take::Dir(Within::Kept { .. })
        ));
        assert_eq!(
            reach(&x, root, "web/node_modules/left-pad", true),
            Take::Skip
        );
    }
}
