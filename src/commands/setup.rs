//! `ahp-wrap setup <framework> [--remove]`: installs, once and as root, the file an agent
//! needs before users who are not root can be supervised (Gemini CLI's system settings;
//! see `adapter::shared::system_file`), or removes it. `--remove` without a framework
//! removes every such file (what `install.sh --uninstall` runs as root).
//!
//! The file names the hook executable beside this `ahp-wrap`, which must then be root's
//! alone: an executable a user could replace would run in place of every check. Written
//! atomically (`statefile::merge::write_atomic_as`), 0644 in directories 0755, all root's.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use crate::exit::{self, CommandResult, Exit, Failure};
use crate::frameworks::{self, adapter, Framework, SystemFile};
use crate::statefile::merge::write_atomic_as;

/// The set-up that is no framework's: the AppArmor profile for Ubuntu's restriction.
#[cfg(target_os = "linux")]
const APPARMOR: &str = "apparmor";

/// What `ahp-wrap setup` does: install `framework`'s file, or remove it (or every one).
pub fn setup(framework: Option<&str>, remove: bool) -> CommandResult {
    let fail = |why: String| Failure::new(Exit::Problem, why);
    let self_exe =
        std::env::current_exe().map_err(|e| fail(format!("cannot find this executable: {e}")))?;
    let hook_exe = crate::run::hook_executable(&self_exe);
    let need_root = |what: &str| {
        if nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        Err(fail(format!(
            "setup writes where only root can: run `sudo {} setup {what}`",
            self_exe.display()
        )))
    };
    let remove_flag = if remove { " --remove" } else { "" };
    #[cfg(target_os = "linux")]
    if framework == Some(APPARMOR) {
        need_root(&format!("{APPARMOR}{remove_flag}"))?;
        let said = super::setup_apparmor::apply(&self_exe, remove, false).map_err(fail)?;
        exit::print(&format!("{APPARMOR}: {}\n", said.unwrap_or_default()));
        return Ok(Exit::OK);
    }
    let chosen: Vec<&'static dyn Framework> = match framework {
        Some(name) => {
            let f = frameworks::find(name).ok_or_else(|| {
                Failure::new(
                    Exit::Error,
                    format!(
                        "nothing to set up by the name {name:?}: apparmor, container-profile, or a framework (gemini)"
                    ),
                )
            })?;
            vec![f]
        }
        None if remove => frameworks::all().to_vec(),
        None => {
            return Err(Failure::new(
                Exit::Error,
                "name the framework to set up (ahp-wrap setup gemini), or --remove",
            ))
        }
    };
    let mut files: Vec<(&str, SystemFile)> = chosen
        .iter()
        .filter_map(|f| Some((f.name(), f.system_file(&hook_exe)?)))
        .map(|(name, file)| {
            file.map(|file| (name, file))
                .map_err(|e| fail(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    if framework.is_none() {
        // Every file, as an uninstall removes them: only those whose hooks run this
        // install's executable (another install's stay).
        files.retain(|(_, file)| names_exe(&file.path, &hook_exe));
    }
    if let (Some(name), true) = (framework, files.is_empty()) {
        exit::print(&format!(
            "{name}: nothing to set up (its hooks are injected for each run, for every user)\n"
        ));
        return Ok(Exit::OK);
    }
    need_root(format!("{}{remove_flag}", framework.unwrap_or("")).trim_start())?;
    for (name, file) in &files {
        let said = if remove {
            remove_file(file)
        } else {
            install(file, &hook_exe)
        }
        .map_err(|why| fail(format!("{name}: {why}")))?;
        exit::print(&format!("{name}: {said}\n"));
    }
    // Every file: the AppArmor profile too, when it is this install's.
    #[cfg(target_os = "linux")]
    if framework.is_none() {
        if let Some(said) = super::setup_apparmor::apply(&self_exe, true, true).map_err(fail)? {
            exit::print(&format!("{APPARMOR}: {said}\n"));
        }
    }
    Ok(Exit::OK)
}

/// Refuses an executable that a user other than root could replace, since what the set-up
/// installs would then lend `consequence` to whatever is put there.
pub(super) fn roots_alone(exe: &Path, consequence: &str) -> Result<(), String> {
    if crate::run::only_root_can_write(exe) {
        return Ok(());
    }
    Err(format!(
        "{} can be changed by a user other than root, and {consequence}: install ahp-wrap where \
         only root can write first (`sudo PREFIX=/usr/local ./install.sh`), then run its `ahp-wrap \
         setup`",
        exe.display()
    ))
}

/// Whether the file at `path` names `exe` (its hooks run it).
fn names_exe(path: &Path, exe: &Path) -> bool {
    let exe = exe.as_os_str().as_encoded_bytes();
    std::fs::read(path).is_ok_and(|text| text.windows(exe.len()).any(|w| w == exe))
}

/// Writes `file` in place (root's, 0644), unless it is current already; what was done.
fn install(file: &SystemFile, hook_exe: &Path) -> Result<String, String> {
    roots_alone(hook_exe, "the file would make every run call it")?;
    let path = &file.path;
    let was = file.state();
    if was == adapter::Installed::Current {
        return Ok(format!("{} is installed and current", path.display()));
    }
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no directory", path.display()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    write_atomic_as(path, &file.content, 0o644).map_err(|e| crate::error_chain(&e))?;
    // A file Gemini would not trust is no installation: say why, and leave nothing behind.
    if let adapter::Installed::Unsafe(why) = file.state() {
        let _ = std::fs::remove_file(path);
        return Err(format!(
            "{} was written, but {why}; removed it",
            path.display()
        ));
    }
    let verb = if was == adapter::Installed::Absent {
        "installed"
    } else {
        "updated"
    };
    Ok(format!(
        "{verb} {} (its hooks run {}); users who are not root are supervised from now on",
        path.display(),
        hook_exe.display()
    ))
}

/// Removes `file`, and the directories it leaves empty up to the installed files' own.
fn remove_file(file: &SystemFile) -> Result<String, String> {
    let path = &file.path;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(format!("{} is not installed", path.display()))
        }
        Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
    }
    let top = adapter::shared::system_file::system_dir();
    for dir in path.ancestors().skip(1) {
        // Stops at the first directory that is not empty (remove_dir refuses it).
        if !dir.starts_with(&top) || std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
    Ok(format!("removed {}", path.display()))
}
