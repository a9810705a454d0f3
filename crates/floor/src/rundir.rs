//! The run directory: a private (0700) directory for one run's generated files (agent
//! settings, hook plug-ins, a path control socket where no abstract one exists), removed
//! when the run ends. At the bottom of the layers: the run makes it, the shims write in it.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Removes `dir` and everything beneath, opening up the directories it may not enter first
/// (an overlay's work directory is made with no permissions at all).
pub fn remove_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn open_up(dir: &Path) {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&e.path());
                }
            }
        }
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(_) => {
            open_up(dir);
            std::fs::remove_dir_all(dir)
        }
    }
}

/// A private (0700) directory for one run, removed when dropped (unless [`RunDir::leave`]
/// handed its removal to someone else).
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    left: bool,
}

impl RunDir {
    /// Creates a fresh private directory under `$XDG_RUNTIME_DIR` or the temp dir.
    ///
    /// As root, a base that only root can write to comes first (`$XDG_RUNTIME_DIR`, then
    /// `/run`): some agents read a configuration file only when nobody else could have
    /// written to it or to any directory above it (Gemini CLI's system settings), which a
    /// world-writable `/tmp` never passes. A framework can rely on that with
    /// [`only_root_can_write`].
    pub fn create() -> io::Result<RunDir> {
        let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir());
        let root_only = nix::unistd::geteuid().is_root().then(|| {
            runtime_dir
                .iter()
                .map(PathBuf::as_path)
                .chain([Path::new("/run")])
                .find(|p| p.is_dir() && only_root_can_write(p))
                .map(Path::to_path_buf)
        });
        let first = root_only.flatten().or(runtime_dir);
        // A base we may not write (a run inside another run's floor) gives way to the next.
        let mut last = None;
        for base in first.into_iter().chain([std::env::temp_dir()]) {
            let path = base.join(format!("ahp-wrap-{}", crate::random_hex(8)));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(RunDir { path, left: false }),
                Err(e) => last = Some(e),
            }
        }
        Err(last
            .unwrap_or_else(|| std::io::Error::other("no directory to make a run directory in")))
    }

    /// The directory: `ahp-wrap-<random>` beneath the base it was made in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Not removed when dropped: whoever it was handed to removes it.
    pub fn leave(&mut self) {
        self.left = true;
    }
}

/// Whether `path` and every directory above it are owned by root and writable by no one
/// else (no group or other write bit).
pub fn only_root_can_write(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.left {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_root_can_write_checks_every_ancestor() {
        // /tmp is world-writable (sticky), so nothing below it passes.
        assert!(!only_root_can_write(&std::env::temp_dir().join("x")));
        assert!(!only_root_can_write(Path::new("/nonexistent/dir")));
        let dir = RunDir::create().unwrap();
        assert_eq!(
            only_root_can_write(dir.path()),
            nix::unistd::geteuid().is_root() && !dir.path().starts_with(std::env::temp_dir()),
        );
    }
}
