//! The paths git tracks in a repository, read from its index file, without running git.
//!
//! Running git in the workspace outside the floor would run what the agent's tree left in
//! the repository's configuration (`core.fsmonitor` is a command `git ls-files` runs, and
//! `.git/commondir` can point git at a configuration anywhere): the wrapper would run the
//! agent's code with the person's full authority. The index is data: its format is
//! documented (`gitformat-index(5)`, <https://git-scm.com/docs/index-format>), and reading it
//! runs nothing. Versions 2, 3 and 4 are read; a split index (`link` extension) adds the
//! shared index's entries; SHA-1 and SHA-256 repositories both. Anything it cannot read
//! gives no tracked paths, which only means large tracked files are kept by the size limit
//! that applies to untracked ones.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The files git tracks in the repository `root` lies in, relative to `root`; none when it
/// is not in one, or its index cannot be read.
pub(crate) fn tracked(root: &Path) -> HashSet<String> {
    let Some(top) = root.ancestors().find(|d| d.join(".git").exists()) else {
        return HashSet::new();
    };
    let Some(git_dir) = git_dir(&top.join(".git")) else {
        return HashSet::new();
    };
    let hash_len = if sha256(&git_dir) { 32 } else { 20 };
    let Ok(bytes) = std::fs::read(git_dir.join("index")) else {
        return HashSet::new();
    };
    let Some(index) = parse(&bytes, hash_len) else {
        return HashSet::new();
    };
    let mut paths = index.paths;
    if let Some(shared) = index.shared {
        if let Some(more) = std::fs::read(git_dir.join(format!("sharedindex.{shared}")))
            .ok()
            .and_then(|b| parse(&b, hash_len))
        {
            paths.extend(more.paths);
        }
    }
    // Relative to `root`, as `git -C root ls-files` gives them.
    let below = root.strip_prefix(top).unwrap_or(Path::new(""));
    let prefix = match below.as_os_str().is_empty() {
        true => String::new(),
        false => format!("{}/", below.display()),
    };
    paths
        .into_iter()
        .filter_map(|p| p.strip_prefix(&prefix).map(str::to_owned))
        .collect()
}

/// The git directory `dot_git` names: itself, or the one a `gitdir: PATH` file (a worktree,
/// a submodule) points to.
fn git_dir(dot_git: &Path) -> Option<PathBuf> {
    if dot_git.is_dir() {
        return Some(dot_git.to_owned());
    }
    let text = std::fs::read_to_string(dot_git).ok()?;
    let to = text.strip_prefix("gitdir:")?.trim();
    let to = Path::new(to);
    Some(match to.is_absolute() {
        true => to.to_owned(),
        false => dot_git.parent()?.join(to),
    })
}

/// Whether the repository names its objects by SHA-256 (`extensions.objectFormat`).
fn sha256(git_dir: &Path) -> bool {
    std::fs::read_to_string(git_dir.join("config")).is_ok_and(|c| {
        c.lines().any(|l| {
            let l = l.trim().to_ascii_lowercase();
            l.starts_with("objectformat") && l.ends_with("sha256")
        })
    })
}

/// What one index file holds.
#[derive(Debug, Default, PartialEq, Eq)]
struct Index {
    paths: Vec<String>,
    /// The shared index it is split from (its hash, hex), when it has a `link` extension.
    shared: Option<String>,
}

/// Reads an index file: its header, entries and extensions.
fn parse(b: &[u8], hash_len: usize) -> Option<Index> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    if b.get(..4)? != b"DIRC" {
        return None;
    }
    let version = u32_at(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = u32_at(8)? as usize;
    let mut at = 12;
    let mut paths = Vec::with_capacity(count.min(1 << 20));
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        // ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each), the object name.
        at += 40 + hash_len;
        let flags = u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?);
        at += 2;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2; // extended flags
        }
        let name = if version == 4 {
            // The name is the previous one less N bytes from its end, then a NUL-ended suffix.
            let (strip, used) = varint(b.get(at..)?)?;
            at += used;
            let end = at + b.get(at..)?.iter().position(|c| *c == 0)?;
            let keep = previous.len().checked_sub(strip)?;
            let mut name = previous[..keep].to_vec();
            name.extend_from_slice(&b[at..end]);
            at = end + 1;
            name
        } else {
            let end = at + b.get(at..)?.iter().position(|c| *c == 0)?;
            let name = b[at..end].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 from the entry's start.
            let len = end - start;
            at = start + (len + 8) / 8 * 8;
            name
        };
        // (A split index's entry that replaces a shared one has no name: the shared one's.)
        if let Ok(s) = std::str::from_utf8(&name).map(str::to_owned) {
            if !s.is_empty() {
                paths.push(s);
            }
        }
        previous = name;
    }
    // Extensions until the trailing checksum: a signature, a size, the data.
    let mut shared = None;
    while at + 8 + hash_len <= b.len() {
        let sig = b.get(at..at + 4)?;
        let size = u32_at(at + 4)? as usize;
        if sig == b"link" {
            let id = b.get(at + 8..at + 8 + hash_len)?;
            shared = Some(id.iter().map(|x| format!("{x:02x}")).collect());
        }
        at += 8 + size;
    }
    Some(Index { paths, shared })
}

/// Git's offset encoding (`varint.c`): 7 bits a byte, high bit set while more follow, each
/// continuation adding one before the shift. The value and the bytes it took.
fn varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *b.first()?;
    let mut v = usize::from(c & 0x7f);
    while c & 0x80 != 0 {
        i += 1;
        c = *b.get(i)?;
        v = v.checked_add(1)?.checked_shl(7)? | usize::from(c & 0x7f);
    }
    Some((v, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn ls_files(dir: &Path) -> HashSet<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["ls-files", "-z"])
            .output()
            .unwrap();
        out.stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8(p.to_vec()).unwrap())
            .collect()
    }

    /// Each index version git writes (and a split index) reads as `git ls-files` lists it,
    /// from the repository's top and from a directory below it.
    #[test]
    fn every_index_version_reads_as_git_lists_it() {
        for setup in [
            &["update-index", "--index-version", "2"][..],
            &["update-index", "--index-version", "3"],
            &["update-index", "--index-version", "4"],
            &["update-index", "--split-index"],
        ] {
            let t = tempfile::tempdir().unwrap();
            let ws = t.path().canonicalize().unwrap();
            git(&ws, &["init", "-q"]);
            for p in [
                "a.txt",
                "src/lib.rs",
                "src/deep/x y.rs",
                "src/deep/z.rs",
                "Ünï.md",
            ] {
                let path = ws.join(p);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, p).unwrap();
            }
            git(&ws, &["add", "."]);
            git(&ws, setup);
            // An entry with the extended flag (intent to add), after the others.
            std::fs::write(ws.join("zz-later"), "").unwrap();
            git(&ws, &["add", "-N", "zz-later"]);
            let want = ls_files(&ws);
            assert_eq!(want.len(), 6, "{setup:?}");
            assert_eq!(tracked(&ws), want, "{setup:?}");
            let want_below = ls_files(&ws.join("src"));
            assert_eq!(tracked(&ws.join("src")), want_below, "{setup:?} from src/");
        }
    }

    /// What the agent may leave in the repository's configuration runs nothing when the
    /// tracked files are read (it would with `git ls-files`).
    #[test]
    fn the_repositorys_configuration_runs_nothing() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().canonicalize().unwrap();
        git(&ws, &["init", "-q"]);
        std::fs::write(ws.join("a"), "a").unwrap();
        git(&ws, &["add", "a"]);
        let ran = ws.join("ran");
        let monitor = format!("touch {}; false", ran.display());
        git(&ws, &["config", "core.fsmonitor", &monitor]);
        assert_eq!(tracked(&ws), HashSet::from(["a".to_owned()]));
        assert!(!ran.exists(), "nothing ran");
    }

    #[test]
    fn what_is_not_an_index_gives_nothing() {
        assert_eq!(parse(b"DIRC\0\0\0\x09\0\0\0\0", 20), None);
        assert_eq!(parse(b"junk", 20), None);
        let truncated = b"DIRC\0\0\0\x02\0\0\0\x05";
        assert_eq!(parse(truncated, 20), None);
    }
}
