//! Gemini for users who are not root: the system settings file root installs once
//! (`ahp-wrap setup gemini`, at `/etc/ahp-wrap/gemini/settings.json`), which every run of
//! every user points Gemini at.
//!
//! No place a normal user can write passes Gemini's check on a system settings file (it
//! and every directory above it owned by root, writable by no one else), so a run cannot
//! write its own as a root run does. The installed file holds the same hooks, naming the
//! installed `ahp-wrap-hook` (which finds its run in the environment the wrapper gives the
//! agent, as for any hook) and the machine's own system settings merged in as a root run
//! merges them. A run uses it only when it is exactly what this build would install now:
//! anything else (absent, writable by a user, an earlier version's, or the machine's system
//! settings changed since) refuses the run with the command that fixes it.

use std::path::Path;

use super::settings::{
    load_system_settings, merge, Hooks, DEFAULT_SYSTEM_SETTINGS, ENV_HOOK_NONCE,
    ENV_SYSTEM_SETTINGS, SYSTEM,
};
use super::{NAME, SHIM};
use ahp_wrap_adapter::shared::system_file::{setup_command, system_dir};
use ahp_wrap_adapter::shared::timeout;
use ahp_wrap_adapter::{run_nonce, AgentCommand, FrameworkError, RunContext, SystemFile};

/// The installed file's hook timeout, in milliseconds: longer than any run's hook budget
/// (a run whose budget is longer refuses), since Gemini lets a tool call through when its
/// timeout fires first. The hook itself fails closed at the run's budget.
pub(crate) const INSTALLED_TIMEOUT_MS: u64 = 3_600_000;

/// Why the floor gives a non-root Gemini no namespaces of its own.
pub(crate) const NO_NAMESPACES: &str = "Gemini CLI run by a user who is not root gets no namespaces: \
    in one it would see no file owned by root and ignore its hooks (run as root for the whole floor)";

/// The installed file and this build's content for it, for hooks that run `hook_exe`: the
/// system settings at Gemini's default path (when Gemini would trust them) with our hooks.
pub(crate) fn system_file(hook_exe: &Path) -> Result<SystemFile, FrameworkError> {
    let system = load_system_settings(Path::new(DEFAULT_SYSTEM_SETTINGS))?;
    let merged = merge(system, hook_exe, Hooks::Installed, INSTALLED_TIMEOUT_MS)?;
    let mut content = serde_json::to_vec_pretty(&merged)
        .map_err(|e| SHIM.prepare_error(format!("cannot encode the settings: {e}")))?;
    content.push(b'\n');
    Ok(SystemFile {
        path: system_dir().join(NAME).join("settings.json"),
        content,
    })
}

/// The installed file, when a run of this user can use it; else why not, with the command
/// that fixes it.
fn current(hook_exe: &Path) -> Result<SystemFile, Unusable> {
    let file = system_file(hook_exe).map_err(Unusable::NotBuilt)?;
    match file.refusal(&setup_command(hook_exe, NAME)) {
        None => Ok(file),
        Some(why) => Err(Unusable::Refused(why)),
    }
}

/// Why a run of this user cannot use the installed file.
#[derive(Debug)]
enum Unusable {
    /// The file a run would need cannot be built.
    NotBuilt(FrameworkError),
    /// The installed file is missing, not root's, or not current: why, with the command
    /// that fixes it.
    Refused(String),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::NotBuilt(e) => e.fmt(f),
            Unusable::Refused(why) => write!(
                f,
                "Gemini CLI reads injected hooks only from a system settings file that root owns, \
                 so a run of a user who is not root uses the one root installs: {why}"
            ),
        }
    }
}

/// Why a run of this user cannot use the installed file, with the command that fixes it.
pub(crate) fn refusal(hook_exe: &Path) -> Option<String> {
    current(hook_exe).err().map(|e| e.to_string())
}

/// Points Gemini at the installed file for this run, when it is current.
pub(crate) fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    let file = current(&run.self_exe).map_err(|why| SHIM.prepare_error(why))?;
    let needed = timeout::hook_timeout_ms(run);
    if needed > INSTALLED_TIMEOUT_MS {
        return Err(SHIM.prepare_error(format!(
            "this run's hook budget ({needed} ms with its margin) is longer than the installed \
             Gemini settings' hook timeout ({INSTALLED_TIMEOUT_MS} ms), after which Gemini would \
             let a tool call through: shorten --timeout or --ask-timeout"
        )));
    }
    if let Some(own) = std::env::var_os(ENV_SYSTEM_SETTINGS).filter(|v| !v.is_empty()) {
        eprintln!(
            "ahp-wrap: warning: {ENV_SYSTEM_SETTINGS}={} is not read in this run: Gemini reads the \
             installed system settings, which carry those of {DEFAULT_SYSTEM_SETTINGS}",
            Path::new(&own).display()
        );
    }
    SYSTEM.point_at(cmd, &file.path, Some(Path::new(DEFAULT_SYSTEM_SETTINGS)));
    cmd.env.push((ENV_HOOK_NONCE.into(), run_nonce().into()));
    // In a user namespace of this user's, root is not mapped: every root-owned file shows
    // as the overflow uid, and Gemini would skip the file (with only a warning) and run
    // with no hooks at all. So the floor confines this agent without namespaces.
    cmd.no_namespaces = Some(NO_NAMESPACES.to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn the_installed_file_names_the_hook_and_takes_the_nonce_from_the_run() {
        let file = system_file(Path::new("/usr/local/bin/ahp-wrap-hook")).unwrap();
        assert!(file.path.ends_with("gemini/settings.json"));
        let v: Value = serde_json::from_slice(&file.content).unwrap();
        let ours = &v["hooks"]["BeforeTool"].as_array().unwrap().last().unwrap()["hooks"][0];
        assert_eq!(
            ours["command"],
            "exec '/usr/local/bin/ahp-wrap-hook' hook gemini BeforeTool"
        );
        assert_eq!(ours["name"], "ahp-wrap-${AHP_WRAP_HOOK_NONCE}-BeforeTool");
        assert_eq!(ours["timeout"], INSTALLED_TIMEOUT_MS);
        assert_eq!(v["hooksConfig"]["enabled"], true);
        // The same build, the same hook: the same bytes (what "current" compares).
        assert_eq!(
            file,
            system_file(Path::new("/usr/local/bin/ahp-wrap-hook")).unwrap()
        );
        assert_ne!(
            file.content,
            system_file(Path::new("/opt/ahp-wrap-hook"))
                .unwrap()
                .content
        );
        assert!(system_file(Path::new("/opt/$X/ahp-wrap-hook")).is_err());
    }
}
