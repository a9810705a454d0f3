//! Where git runs a repository's hooks from, as git itself says, asked only when the answer
//! can differ from `.git/hooks`.
//!
//! Asking git (`git rev-parse --git-path hooks`) costs a process: 1.5 to 4 ms on the start of
//! every run in a repository, where the agent waits. Almost every repository keeps its hooks
//! in `.git/hooks`, which the policy already protects, and that answer is certain when no
//! configuration file git reads mentions `hooksPath` or an include, and nothing in the
//! environment moves git's directory or configuration. Those files are read (a few small
//! reads); git is asked only otherwise, and then its answer is the one taken.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Variables that move git's directory or add configuration: with any of them set, git is
/// asked.
const MOVES: [&str; 9] = [
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CEILING_DIRECTORIES",
];

/// The directory git runs the hooks of the repository `workspace` lies in from, when it is
/// not `.git/hooks` (which the policy protects): `core.hooksPath` (husky's `.husky/_`, a
/// shared `~/.githooks`), as git itself reads it from the system, global and repository
/// configuration with their includes. `None` outside a repository, or without git.
pub fn git_hooks(workspace: &Path) -> Option<PathBuf> {
    let top = workspace.ancestors().find(|d| d.join(".git").exists())?;
    let git = which::which("git").ok()?;
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let config = Config {
        etc: Path::new("/etc/gitconfig"),
        git: &git,
        dot_git: &top.join(".git"),
        home: env("HOME"),
        xdg_config_home: env("XDG_CONFIG_HOME"),
        moved: MOVES.iter().any(|name| env(name).is_some()),
    };
    if config.surely_default() {
        return None;
    }
    ask_git(&git, workspace)
}

/// What decides whether git's answer can differ from `.git/hooks`.
struct Config<'a> {
    /// The system file of a distribution's git, `/etc/gitconfig`.
    etc: &'a Path,
    /// The git on `PATH`.
    git: &'a Path,
    /// The repository's `.git`.
    dot_git: &'a Path,
    home: Option<OsString>,
    xdg_config_home: Option<OsString>,
    /// One of [`MOVES`] is set.
    moved: bool,
}

impl Config<'_> {
    /// True when git would surely answer `.git/hooks`: nothing in the environment moving
    /// its directory or configuration, `.git` a directory (not the pointer file of a
    /// worktree or submodule), and no configuration file git reads naming `hooksPath` or an
    /// include. Any file that cannot be read (but is there) means git is asked.
    ///
    /// The system file is where git's build puts it: `/etc/gitconfig` for a distribution's
    /// git (prefix `/usr`), `PREFIX/etc/gitconfig` for any other prefix (`/usr/local`, a
    /// home-made or Homebrew git), which is also where a relocatable build looks; both are
    /// read, for the git on `PATH` and for the file it links to. A git built with its
    /// system file anywhere else would have that file's `hooksPath` missed (the policy
    /// still refuses commands that set or use one).
    fn surely_default(&self) -> bool {
        // `commondir` points git at another directory's configuration and hooks.
        if self.moved || !self.dot_git.is_dir() || self.dot_git.join("commondir").exists() {
            return false;
        }
        let beside = |git: &Path| Some(git.parent()?.parent()?.join("etc/gitconfig"));
        let real = std::fs::canonicalize(self.git).ok();
        let xdg = match (&self.xdg_config_home, &self.home) {
            (Some(x), _) => Some(PathBuf::from(x).join("git/config")),
            (None, Some(h)) => Some(PathBuf::from(h).join(".config/git/config")),
            (None, None) => None,
        };
        let files = [
            Some(self.etc.to_owned()),
            beside(self.git),
            real.as_deref().and_then(beside),
            xdg,
            self.home
                .as_ref()
                .map(|h| PathBuf::from(h).join(".gitconfig")),
            Some(self.dot_git.join("config")),
            Some(self.dot_git.join("config.worktree")),
        ];
        files.iter().flatten().all(|f| silent(f))
    }
}

/// True when the configuration file `path` is missing, or names neither `hooksPath` nor an
/// include (git's names are case-insensitive).
fn silent(path: &Path) -> bool {
    match std::fs::read(path) {
        Ok(text) => {
            let text = text.to_ascii_lowercase();
            let names = |word: &[u8]| text.windows(word.len()).any(|w| w == word);
            !names(b"hookspath") && !names(b"include")
        }
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Git's own answer, from `git rev-parse --git-path hooks` run in `workspace`.
fn ask_git(git: &Path, workspace: &Path) -> Option<PathBuf> {
    // `rev-parse` runs no command of the configuration; the switches are there should a
    // later git start to (the repository's configuration is the agent's to write: the
    // wrapper must never run what it names outside the floor).
    let out = std::process::Command::new(git)
        .args(["-c", "core.fsmonitor=false"])
        .arg("-C")
        .arg(workspace)
        .args(["rev-parse", "--git-path", "hooks"])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?;
    let path = workspace.join(text.trim_end_matches('\n'));
    // husky 9 points git at `.husky/_`, whose scripts run the hooks kept in `.husky`.
    let path = match path.file_name() {
        Some(n) if n == "_" => path.parent()?.to_owned(),
        _ => path,
    };
    (!path.ends_with(".git/hooks")).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(t: &Path) -> PathBuf {
        let dot_git = t.join("repo/.git");
        std::fs::create_dir_all(&dot_git).unwrap();
        std::fs::write(dot_git.join("config"), "[core]\n\tbare = false\n").unwrap();
        dot_git
    }

    fn config<'a>(dot_git: &'a Path, home: &Path) -> Config<'a> {
        Config {
            etc: Path::new("/nonexistent/gitconfig"),
            git: Path::new("/usr/bin/git"),
            dot_git,
            home: Some(home.into()),
            xdg_config_home: None,
            moved: false,
        }
    }

    #[test]
    fn git_is_not_asked_when_nothing_it_reads_can_move_the_hooks() {
        let t = tempfile::tempdir().unwrap();
        let dot_git = repo(t.path());
        std::fs::write(t.path().join(".gitconfig"), "[user]\n\tname = A\n").unwrap();
        let etc = t.path().join("gitconfig");
        std::fs::write(&etc, "[credential]\n\thelper = store\n").unwrap();
        let quiet = Config {
            etc: &etc,
            ..config(&dot_git, t.path())
        };
        assert!(quiet.surely_default());
    }

    #[test]
    fn git_is_asked_when_a_file_it_reads_names_hooks_path_or_an_include() {
        let t = tempfile::tempdir().unwrap();
        let dot_git = repo(t.path());
        let home = t.path();
        for (file, text) in [
            (home.join("etc-gitconfig"), "[core]\n\thooksPath = /h\n"),
            (dot_git.join("config"), "[core]\n\thooksPath = .husky/_\n"),
            (dot_git.join("config.worktree"), "[CORE]\n\tHOOKSPATH = x\n"),
            (home.join(".gitconfig"), "[include]\n\tpath = ~/more\n"),
            (
                home.join(".config/git/config"),
                "[includeIf \"gitdir:~/w/\"]\n\tpath = w\n",
            ),
        ] {
            let kept = std::fs::read(&file).ok();
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, text).unwrap();
            let etc = home.join("etc-gitconfig");
            let read = Config {
                etc: &etc,
                ..config(&dot_git, home)
            };
            assert!(!read.surely_default(), "{}: {text}", file.display());
            match kept {
                Some(k) => std::fs::write(&file, k).unwrap(),
                None => std::fs::remove_file(&file).unwrap(),
            }
        }
    }

    #[test]
    fn git_is_asked_for_a_system_file_beside_its_prefix_a_moved_directory_or_a_worktree() {
        let t = tempfile::tempdir().unwrap();
        let dot_git = repo(t.path());
        // A git of its own prefix reads PREFIX/etc/gitconfig.
        let prefix = t.path().join("opt");
        std::fs::create_dir_all(prefix.join("etc")).unwrap();
        std::fs::write(prefix.join("etc/gitconfig"), "[core]\n\thooksPath = /h\n").unwrap();
        let git = prefix.join("bin/git");
        let other = Config {
            git: &git,
            ..config(&dot_git, t.path())
        };
        assert!(!other.surely_default());
        let moved = Config {
            moved: true,
            ..config(&dot_git, t.path())
        };
        assert!(!moved.surely_default());
        let pointer = t.path().join("wt/.git");
        std::fs::create_dir_all(pointer.parent().unwrap()).unwrap();
        std::fs::write(&pointer, "gitdir: ../repo/.git/worktrees/wt\n").unwrap();
        assert!(!config(&pointer, t.path()).surely_default());
    }
}
