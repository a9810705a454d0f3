//! Files that root installs once so that users who are not root can be supervised
//! (`ahp-wrap setup <framework>`): some agents read injected hooks only from a file that
//! root owns, in directories only root can write (Gemini CLI's system settings).
//!
//! A shim says where its file goes and what this build would put in it
//! ([`SystemFile`]); a run compares the two ([`SystemFile::state`]) and refuses, with the
//! one command that fixes it, unless the file is there, is this build's, and is safe from
//! every user but root. Writing and removing the file is the core's `setup` command.

use std::path::{Path, PathBuf};

use crate::only_root_can_write;

/// The variable that moves the directory of installed files (packagers, tests). Read by
/// the set-up and by every run alike, so both agree on where the file is.
pub(crate) const ENV_SYSTEM_DIR: &str = "AHP_WRAP_SYSTEM_DIR";
/// Where installed files go unless `ENV_SYSTEM_DIR` says otherwise.
pub(crate) const DEFAULT_SYSTEM_DIR: &str = "/etc/ahp-wrap";

/// The directory of installed files: `ENV_SYSTEM_DIR`, else `DEFAULT_SYSTEM_DIR`.
pub fn system_dir() -> PathBuf {
    std::env::var_os(ENV_SYSTEM_DIR)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_SYSTEM_DIR), PathBuf::from)
}

/// One framework's installed file: where it goes and what this build would write there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemFile {
    /// Where the file is installed, under [`system_dir`] (e.g.
    /// `/etc/ahp-wrap/gemini/settings.json`).
    pub path: PathBuf,
    /// The exact bytes this build writes there; an installed file with other bytes is
    /// [`Installed::Stale`].
    pub content: Vec<u8>,
}

/// What is at a [`SystemFile`]'s path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// This build's content, owned by root, in directories only root can write.
    Current,
    /// Nothing there.
    Absent,
    /// There, but a user other than root could change it (or it cannot be read): the
    /// agent would skip it, or could be made to run anything.
    Unsafe(String),
    /// There and safe, but not what this build writes: an earlier version's, one written
    /// for another `ahp-wrap`, one changed by hand, or written before what it merges in
    /// changed.
    Stale,
}

impl SystemFile {
    /// What is installed at the path, compared with what this build would write.
    pub fn state(&self) -> Installed {
        let found = match std::fs::read(&self.path) {
            Ok(found) => found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Installed::Absent,
            Err(e) => return Installed::Unsafe(format!("it cannot be read: {e}")),
        };
        if !only_root_can_write(&self.path) {
            return Installed::Unsafe(
                "it, or a directory above it, is not owned by root or is writable by others"
                    .to_owned(),
            );
        }
        if found == self.content {
            Installed::Current
        } else {
            Installed::Stale
        }
    }

    /// Why a run cannot use the file as it is, with the command that fixes it; `None`
    /// when it is current. `setup` is that command (`sudo /usr/local/bin/ahp-wrap setup
    /// gemini`).
    pub fn refusal(&self, setup: &str) -> Option<String> {
        let path = self.path.display();
        match self.state() {
            Installed::Current => None,
            Installed::Absent => Some(format!(
                "{path} is not installed; root installs it once for every user with `{setup}`"
            )),
            Installed::Unsafe(why) => Some(format!(
                "{path} cannot be trusted: {why}; reinstall it with `{setup}`"
            )),
            Installed::Stale => Some(format!(
                "{path} is not what this ahp-wrap installs (an earlier version's, one for \
                 another ahp-wrap, one edited, or what it merges in changed since); \
                 update it with `{setup}`"
            )),
        }
    }
}

/// The set-up command to tell a person, for the wrapper beside `hook_exe` (the executable
/// hooks run: `ahp-wrap-hook` or `ahp-wrap` itself).
pub fn setup_command(hook_exe: &Path, framework: &str) -> String {
    let wrapper = hook_exe.with_file_name("ahp-wrap");
    format!("sudo {} setup {framework}", wrapper.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_current_only_when_safe_and_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let file = SystemFile {
            path: dir.path().join("x/settings.json"),
            content: b"{}\n".to_vec(),
        };
        assert_eq!(file.state(), Installed::Absent);
        let refusal = file.refusal("sudo ahp-wrap setup fw").unwrap();
        assert!(refusal.contains("`sudo ahp-wrap setup fw`"), "{refusal}");
        std::fs::create_dir(dir.path().join("x")).unwrap();
        std::fs::write(&file.path, "{}\n").unwrap();
        // Under the world-writable temp directory: never safe.
        assert!(matches!(file.state(), Installed::Unsafe(_)));
        let refusal = file.refusal("sudo ahp-wrap setup fw").unwrap();
        assert!(refusal.contains("writable by others"), "{refusal}");
    }

    #[test]
    fn a_safe_file_is_current_when_the_same_and_stale_when_not() {
        // As root, a run directory lies where only root can write.
        let dir = ahp_wrap_floor::rundir::RunDir::create().unwrap();
        if !only_root_can_write(dir.path()) {
            return;
        }
        let file = SystemFile {
            path: dir.path().join("settings.json"),
            content: b"{}\n".to_vec(),
        };
        std::fs::write(&file.path, "{}\n").unwrap();
        assert_eq!(file.state(), Installed::Current);
        assert_eq!(file.refusal("x"), None);
        std::fs::write(&file.path, "{} \n").unwrap();
        assert_eq!(file.state(), Installed::Stale);
        assert!(file.refusal("x").unwrap().contains("update it with `x`"));
    }

    #[test]
    fn the_setup_command_names_the_wrapper_beside_the_hook() {
        assert_eq!(
            setup_command(Path::new("/usr/local/bin/ahp-wrap-hook"), "gemini"),
            "sudo /usr/local/bin/ahp-wrap setup gemini"
        );
    }
}
