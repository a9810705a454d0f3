//! Injection for one run: `COPILOT_HOME` points at a private overlay in the run directory
//! that layers over the user's real Copilot home (`$COPILOT_HOME`, else `~/.copilot`).
//!
//! Every top-level entry of the real home is symlinked into the overlay, so what Copilot
//! reads and writes there (config, session state, logs, plugins) is the user's own. Only
//! `hooks/` is a real directory: it holds a symlink to each of the user's hook files plus
//! our `ahp-wrap-<nonce>.json`. Nothing in the real home is created, changed or removed.
//! An entry the real home lacks is created by Copilot inside the overlay and removed with
//! the run directory (see the README).

use std::os::unix::fs::{symlink, DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{CopilotEvent, SHIM};
use ahp_wrap_adapter::shared::timeout;
use ahp_wrap_adapter::{
    run_nonce, AgentCommand, FrameworkError, KeyRule, RunContext, StateFile, StateFormat, Treatment,
};

/// The variable naming Copilot's home directory.
pub(crate) const ENV_HOME: &str = "COPILOT_HOME";
/// The overlay's directory name in the run directory.
pub(crate) const OVERLAY_DIR: &str = "copilot-home";
/// The directory Copilot loads user hook files (`*.json`) from.
pub(crate) const HOOKS_DIR: &str = "hooks";

/// The Copilot home the agent would use without us (absolute).
pub(crate) fn real_home(
    copilot_home: Option<&str>,
    home: Option<&Path>,
) -> Result<PathBuf, HomeError> {
    let path = match copilot_home.filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h),
        None => home.ok_or(HomeError::NoHome)?.join(".copilot"),
    };
    if path.is_absolute() {
        Ok(path)
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .map_err(HomeError::Resolve)
    }
}

/// Our hook file: every event we map, calling `ahp-wrap hook copilot <event>`, with a
/// timeout in seconds.
pub(crate) fn hook_file(self_exe: &Path, nonce: &str, timeout_s: u64) -> Value {
    let mut hooks = Map::new();
    for event in CopilotEvent::ALL {
        let command = SHIM.hook_command(self_exe, nonce, event.name());
        hooks.insert(
            event.name().into(),
            json!([{"type": "command", "bash": command, "timeoutSec": timeout_s}]),
        );
    }
    json!({"version": 1, "hooks": hooks})
}

/// Builds the overlay for `real` in `overlay` (which must not exist yet) with our hook file.
pub(crate) fn build_overlay(
    real: &Path,
    overlay: &Path,
    ours: &Value,
    nonce: &str,
) -> Result<(), HomeError> {
    let mkdir = |d: &Path| {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(d)
            .map_err(|e| HomeError::Io("create", d.to_owned(), e))
    };
    let link = |target: &Path, at: &Path| {
        symlink(target, at).map_err(|e| HomeError::Io("link", at.to_owned(), e))
    };
    let entries = |dir: &Path| -> Result<Vec<std::ffi::OsString>, HomeError> {
        match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .map(|e| e.map(|e| e.file_name()))
                .collect::<Result<_, _>>()
                .map_err(|e| HomeError::Io("list", dir.to_owned(), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(HomeError::Io("list", dir.to_owned(), e)),
        }
    };
    mkdir(overlay)?;
    for name in entries(real)? {
        if name != HOOKS_DIR {
            link(&real.join(&name), &overlay.join(&name))?;
        }
    }
    let hooks = overlay.join(HOOKS_DIR);
    mkdir(&hooks)?;
    let real_hooks = real.join(HOOKS_DIR);
    if real_hooks.is_dir() {
        for name in entries(&real_hooks)? {
            link(&real_hooks.join(&name), &hooks.join(&name))?;
        }
    }
    let file = hooks.join(format!("ahp-wrap-{nonce}.json"));
    let text = serde_json::to_vec_pretty(ours).map_err(HomeError::Encode)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &text))
        .map_err(|e| HomeError::Io("write", file, e))
}

/// Why the Copilot home or its overlay cannot be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HomeError {
    /// No variable names a home.
    #[error("neither COPILOT_HOME nor HOME is set")]
    NoHome,
    /// A relative Copilot home, with no current directory to resolve it against.
    #[error("cannot resolve the Copilot home: {0}")]
    Resolve(#[source] std::io::Error),
    /// The hook file cannot be encoded.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    /// A step on a path (`create`, `link`, `list`, `write`) failed.
    #[error("cannot {} {}: {}", .0, .1.display(), .2)]
    Io(&'static str, PathBuf, #[source] std::io::Error),
}

/// Copilot's `config.json`, written through the overlay: its own bookkeeping (first launch,
/// tips, the theme and model) and this project's trust are merged; trust in any other
/// folder, and anything that names a server or a hook, is kept aside.
fn config_file(real: &Path, overlay: &Path) -> StateFile {
    use Treatment::{Guarded, Own};
    StateFile {
        path: real.join(CONFIG),
        format: StateFormat::Json,
        rules: vec![
            KeyRule::new("trustedFolders.{workspace}", Own),
            KeyRule::new("trustedFolders", Guarded),
            KeyRule::new("trusted_folders.{workspace}", Own),
            KeyRule::new("trusted_folders", Guarded),
            KeyRule::new("mcpServers", Guarded),
            KeyRule::new("hooks", Guarded),
        ],
        other: Own,
        through: Some(overlay.join(CONFIG)),
        lock: None,
    }
}

/// Copilot's settings file of its own, in its home.
const CONFIG: &str = "config.json";

pub(crate) fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    // Copilot hands the hook command to a shell.
    SHIM.check_plain_exe(&run.self_exe)?;
    let copilot_home = std::env::var(ENV_HOME).ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let real = real_home(copilot_home.as_deref(), home.as_deref())
        .map_err(|why| SHIM.prepare_error(why))?;
    prepare_over(run, cmd, &real)
}

/// [`prepare`] over the real Copilot home `real`.
fn prepare_over(
    run: &RunContext,
    cmd: &mut AgentCommand,
    real: &Path,
) -> Result<(), FrameworkError> {
    // Copilot counts seconds, and a hook timeout lets the tool call through: the hook
    // process answers first.
    let timeout_s = timeout::hook_timeout_s(run);
    let nonce = run_nonce();
    let overlay = run.run_dir.join(OVERLAY_DIR);
    build_overlay(
        real,
        &overlay,
        &hook_file(&run.self_exe, &nonce, timeout_s),
        &nonce,
    )
    .map_err(|why| SHIM.prepare_error(why))?;
    // Copilot creates what the real home lacks inside the overlay; our hooks stay ours.
    cmd.floor.state.push(overlay.clone());
    cmd.floor.protected.push(overlay.join(HOOKS_DIR));
    // Copilot replaces its config.json by a rename, which turns the overlay's link into a
    // file of the run's: what it saved there (a folder's trust) is sorted and merged back.
    cmd.floor.mixed.push(config_file(real, &overlay));
    cmd.env.push((ENV_HOME.into(), overlay.into()));
    // Copilot fires sessionStart in every session: without it the hooks were not loaded.
    cmd.expect_hook = Some(CopilotEvent::SessionStart.name().to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_home_is_copilot_home_else_dot_copilot() {
        let h = Path::new("/home/u");
        assert_eq!(real_home(Some("/c"), Some(h)).unwrap(), Path::new("/c"));
        assert_eq!(
            real_home(Some(""), Some(h)).unwrap(),
            Path::new("/home/u/.copilot")
        );
        assert!(real_home(None, None).is_err());
    }

    #[test]
    fn the_overlay_links_the_real_home_and_adds_our_hook_file() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("hooks")).unwrap();
        std::fs::create_dir_all(real.join("session-state")).unwrap();
        std::fs::write(real.join("config.json"), "{}").unwrap();
        std::fs::write(real.join("hooks/mine.json"), "{}").unwrap();
        let run = ahp_wrap_adapter::testing::run_in(&dir.path().join("run"));
        std::fs::create_dir(&run.run_dir).unwrap();
        let mut cmd = AgentCommand::default();
        prepare_over(&run, &mut cmd, &real).unwrap();
        let overlay = run.run_dir.join(OVERLAY_DIR);
        assert_eq!(cmd.env, vec![(ENV_HOME.into(), overlay.clone().into())]);
        assert_eq!(cmd.expect_hook.as_deref(), Some("sessionStart"));
        for name in ["config.json", "session-state", "hooks/mine.json"] {
            assert_eq!(
                std::fs::read_link(overlay.join(name)).unwrap(),
                real.join(name)
            );
        }
        assert!(!overlay.join("hooks").is_symlink());
        let ours: Vec<_> = std::fs::read_dir(overlay.join("hooks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("ahp-wrap-"))
            .collect();
        assert_eq!(ours.len(), 1);
        let file: Value =
            serde_json::from_slice(&std::fs::read(overlay.join("hooks").join(&ours[0])).unwrap())
                .unwrap();
        let pre = &file["hooks"]["preToolUse"][0];
        assert_eq!(file["version"], 1);
        assert_eq!(pre["timeoutSec"], 18);
        assert!(pre["bash"]
            .as_str()
            .unwrap()
            .ends_with("exec '/bin/ahp-wrap' hook copilot preToolUse"));
        // The real home is untouched.
        assert_eq!(std::fs::read_dir(real.join("hooks")).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_real_home_gives_an_overlay_with_only_our_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let overlay = dir.path().join("o");
        build_overlay(&dir.path().join("absent"), &overlay, &json!({}), "n").unwrap();
        assert!(overlay.join("hooks/ahp-wrap-n.json").is_file());
        assert!(!dir.path().join("absent").exists());
    }
}
