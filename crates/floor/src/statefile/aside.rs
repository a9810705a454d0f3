//! Protected paths the agent's tree created during a run (absent at its start, so the floor
//! had nothing to bind read-only over them): moved aside at the end into the quarantine,
//! with a record of where each came from, and put back by `ahp-wrap restore RECORD`.
//!
//! A move is a rename where the quarantine lies on the same file system, else a copy (files,
//! directories and symbolic links as they are, permissions kept) and a removal.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the quarantine keeps of one moved path (the record beside it, `….moved.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moved {
    /// Where the agent's tree created it.
    pub moved: PathBuf,
    /// Where it is now.
    pub held: PathBuf,
    /// It replaced a file that was there before the run, which the run put back: restoring
    /// it moves that one beside the record (`….before`) first.
    #[serde(default)]
    pub replaced: bool,
}

/// Moves `path` into the quarantine directory `dir` (made private when missing). Returns
/// the record written beside it. `path` is reached without following a link (the agent's
/// tree may have made one on its way: [`crate::beneath`]); its last component, a link or
/// not, is what moves.
pub fn move_aside(path: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    keep_aside(path, dir, false)
}

/// [`move_aside`], saying in the record whether what moved replaced a file that was there
/// before (which the caller puts back: restoring then moves that one aside first).
pub fn keep_aside(path: &Path, dir: &Path, replaced: bool) -> std::io::Result<PathBuf> {
    let base = new_name(dir, path)?;
    let held = dir.join(&base);
    relocate(path, &held)?;
    let record = dir.join(format!("{base}.moved.json"));
    let text = serde_json::to_vec_pretty(&Moved {
        moved: path.to_owned(),
        held,
        replaced,
    })
    .map_err(std::io::Error::other)?;
    std::fs::write(&record, text)?;
    Ok(record)
}

/// A new name in the quarantine `dir` (made, private, when missing) for what is kept of
/// `path`: the time, a random part, and `path`'s name without its leading dots.
pub fn new_name(dir: &Path, path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    Ok(format!(
        "{stamp}-{}-{}",
        crate::random_hex(3),
        name.trim_start_matches('.')
    ))
}

/// Puts what `record` describes back where the agent's tree created it, unless something is
/// there now (or a link lies on the way: it is not followed); removes the record.
pub fn put_back(record: &Path, moved: &Moved) -> std::io::Result<()> {
    let to = crate::beneath::Entry::of(&moved.moved).map_err(crate::beneath::Refused::into_io)?;
    if to
        .kind()
        .map_err(crate::beneath::Refused::into_io)?
        .is_some()
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} exists again; what was moved aside stays at {}",
                moved.moved.display(),
                moved.held.display()
            ),
        ));
    }
    relocate(&moved.held, &moved.moved)?;
    std::fs::remove_file(record)
}

/// Renames `from` to `to`, or copies it across file systems and removes it; both reached
/// without following a link on the way ([`crate::beneath`]), the last component of each, a
/// link or not, being what moves. The copy goes by path: it is made after the agent's tree has
/// ended, once `from` was reached without a link, and copies links as links.
pub(crate) fn relocate(from: &Path, to: &Path) -> std::io::Result<()> {
    let refused = crate::beneath::Refused::into_io;
    let source = crate::beneath::Entry::of(from).map_err(refused)?;
    let dest = crate::beneath::Entry::of(to).map_err(refused)?;
    match source.rename_to(&dest) {
        Err(e) if e.raw_os_error() == Some(nix::libc::EXDEV) => {
            copy_all(from, to)?;
            remove_all(from)
        }
        other => other,
    }
}

fn copy_all(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = from.symlink_metadata()?;
    if meta.is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_all(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::set_permissions(to, meta.permissions())
    } else {
        std::fs::copy(from, to).map(drop)
    }
}

fn remove_all(path: &Path) -> std::io::Result<()> {
    if path.symlink_metadata()?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_tree_is_moved_aside_and_put_back_whole() {
        let t = tempfile::tempdir().unwrap();
        let made = t.path().join("ws/.claude/commands");
        std::fs::create_dir_all(made.join("deep")).unwrap();
        std::fs::write(made.join("deep/x.md"), "run me").unwrap();
        std::os::unix::fs::symlink("deep/x.md", made.join("link")).unwrap();
        let q = t.path().join("state/quarantine");
        let record = move_aside(&made, &q).unwrap();
        assert!(!made.exists());
        let moved: Moved = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        assert_eq!(moved.moved, made);
        assert_eq!(
            std::fs::read_to_string(moved.held.join("deep/x.md")).unwrap(),
            "run me"
        );
        std::fs::create_dir(&made).unwrap();
        assert!(put_back(&record, &moved).is_err(), "something is there");
        std::fs::remove_dir(&made).unwrap();
        put_back(&record, &moved).unwrap();
        assert_eq!(
            std::fs::read_link(made.join("link")).unwrap(),
            Path::new("deep/x.md")
        );
        assert!(!record.exists() && !moved.held.exists());
    }

    #[test]
    fn across_file_systems_it_is_copied_and_removed() {
        let Ok(shm) = tempfile::tempdir_in("/dev/shm") else {
            return; // no second file system here
        };
        let t = crate::test_dir();
        let made = shm.path().join("tasks.json");
        std::fs::write(&made, "{}").unwrap();
        let record = move_aside(&made, t.path()).unwrap();
        assert!(!made.exists());
        let moved: Moved = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&moved.held).unwrap(), "{}");
    }
}
