//! What a run as another user needs, put where that user can reach it. The suites that run
//! an agent as an unprivileged user run as root from a checkout that may lie where no other
//! user can pass (a clone in root's own home, mode 0700): there, the user's run could not
//! start the wrapper, the agent or the harness. Those are then linked (or copied) into a
//! directory of root's that every user can pass through and only root can write (what
//! Gemini and `ahp-wrap setup` ask of the hook's directories); where the checkout is
//! reachable already, its own paths are used.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the copies go when the target directory is out of other users' reach.
const ELSEWHERE: &str = "/var/lib/ahp-wrap-tests";

/// Held while a copy is made: the suite's tests ask for the same copies at once.
static COPYING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether a user other than the owner passes through every directory to `path` (each has
/// `o+x`) and `path` itself can be read (`o+r`).
pub fn reachable_by_others(path: &Path) -> bool {
    let passes = path
        .ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 != 0));
    passes && std::fs::metadata(path).is_ok_and(|m| m.mode() & 0o004 != 0)
}

/// Whether `dir` and every directory above it is root's and writable by root alone.
fn roots_alone(dir: &Path) -> bool {
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}

/// A directory of root's, writable by root alone, that every user can pass through: the
/// target's `tmp/` when it is so, else this process's own under `/var/lib/ahp-wrap-tests/`
/// (those of processes that have ended are removed first).
pub fn base() -> PathBuf {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let tmp = crate::target_tmpdir();
        if reachable_by_others(&tmp) && roots_alone(&tmp) {
            return tmp;
        }
        let top = Path::new(ELSEWHERE);
        std::fs::create_dir_all(top).expect("a directory for what other users run");
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
        for e in std::fs::read_dir(top).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let ended = name
                .strip_prefix("run-")
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            if ended {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let mine = top.join(format!("run-{}", std::process::id()));
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
        mine
    })
    .clone()
}

/// `path` (a file or a directory) where other users reach it: itself when they do, else a
/// copy in [`base`] named `name`, made once per process.
pub fn for_others(path: &Path, name: &str) -> PathBuf {
    if reachable_by_others(path) {
        return path.to_owned();
    }
    let copy = base().join(name);
    let _one_at_a_time = COPYING.lock().unwrap_or_else(|e| e.into_inner());
    if !copy.exists() {
        let partial = base().join(format!(".{name}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        let _ = std::fs::remove_file(&partial);
        link_or_copy(path, &partial, (path, &copy))
            .unwrap_or_else(|e| panic!("cannot copy {} for another user: {e}", path.display()));
        std::fs::rename(&partial, &copy).unwrap();
    }
    copy
}

/// This build's wrapper (`ahp-wrap`, with `ahp-wrap-hook` beside it), where other users
/// reach it.
pub fn wrapper_for_others() -> PathBuf {
    let wrapper = crate::wrap_bin();
    if reachable_by_others(&wrapper)
        && reachable_by_others(&wrapper.with_file_name("ahp-wrap-hook"))
    {
        return wrapper;
    }
    let bin = base().join("bin");
    let _one_at_a_time = COPYING.lock().unwrap_or_else(|e| e.into_inner());
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    for name in ["ahp-wrap", "ahp-wrap-hook"] {
        let copy = bin.join(name);
        if !copy.exists() {
            let from = wrapper.with_file_name(name);
            link_or_copy(&from, &copy, (&from, &copy)).unwrap();
        }
    }
    bin.join("ahp-wrap")
}

/// The test kit's scripts (`tests/support/*`, its crate's sources left out), where other
/// users reach them.
pub fn support_for_others() -> PathBuf {
    let dir = crate::root().join("tests/support");
    if reachable_by_others(&dir.join("script_harness.py")) {
        return dir;
    }
    let copy = base().join("support");
    let _one_at_a_time = COPYING.lock().unwrap_or_else(|e| e.into_inner());
    if !copy.exists() {
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                let (from, to) = (e.path(), copy.join(e.file_name()));
                link_or_copy(&from, &to, (&dir, &copy)).unwrap();
            }
        }
    }
    copy
}

/// Puts `from` at `to`: a file hard-linked (else copied, its mode kept), a symbolic link
/// made again as it reads (one to an absolute path within `roots.0`, the tree copied, to the
/// same path within its copy `roots.1`), a directory made (mode 0755) and filled the same way.
fn link_or_copy(from: &Path, to: &Path, roots: (&Path, &Path)) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from)?;
        let target = match target.strip_prefix(roots.0) {
            Ok(rest) if target.is_absolute() => roots.1.join(rest),
            _ => target,
        };
        return std::os::unix::fs::symlink(target, to);
    }
    if meta.is_dir() {
        std::fs::create_dir(to)?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            link_or_copy(&e.path(), &to.join(e.file_name()), roots)?;
        }
        return Ok(());
    }
    if std::fs::hard_link(from, to).is_ok() {
        // A hard link keeps the file's mode: readable by others, as a copy is made below.
        let mode = meta.mode() & 0o7777;
        if mode & 0o004 == 0 {
            std::fs::remove_file(to)?;
        } else {
            return Ok(());
        }
    }
    std::fs::copy(from, to)?;
    let mode = meta.mode() & 0o777 | 0o444 | if meta.mode() & 0o100 != 0 { 0o111 } else { 0 };
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode & !0o022))
}
