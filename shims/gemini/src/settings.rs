//! Injection for one run: a system settings file with our hooks, merged with the system
//! settings Gemini would otherwise read, passed as `GEMINI_CLI_SYSTEM_SETTINGS_PATH`.
//!
//! That variable *replaces* the system settings file, so we copy the real one into ours
//! (when Gemini would have trusted it) and point `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` back at
//! the real defaults file. User and workspace settings are layered by Gemini itself and
//! never touched. Gemini reads a system settings file only when the file and every
//! directory above it are owned by root and writable by no one else: the run directory is
//! such a place when the wrapper runs as root (see `RunDir::create`), and nothing a normal
//! user can write is (see the README).

use std::path::Path;

use serde_json::{Map, Value};

use super::{installed, GeminiEvent, NAME, SHIM};
use ahp_wrap_adapter::shared::settings::{append_hook_groups, command_group, SystemSettings};
use ahp_wrap_adapter::shared::timeout;
use ahp_wrap_adapter::{only_root_can_write, run_nonce, AgentCommand, FrameworkError, RunContext};

/// The file we write in the run directory.
pub(crate) const SETTINGS_FILE: &str = "gemini-system-settings.json";
/// The variable naming the system settings file (it replaces the default one).
pub(crate) const ENV_SYSTEM_SETTINGS: &str = "GEMINI_CLI_SYSTEM_SETTINGS_PATH";
/// The variable naming the system defaults file (else: next to the system settings).
pub(crate) const ENV_SYSTEM_DEFAULTS: &str = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH";
/// The variable that gives the hooks of the installed file this run's nonce.
pub(crate) const ENV_HOOK_NONCE: &str = "AHP_WRAP_HOOK_NONCE";
/// Where Gemini looks for system settings on Linux when the variable is not set.
pub(crate) const DEFAULT_SYSTEM_SETTINGS: &str = "/etc/gemini-cli/settings.json";

pub(crate) const SYSTEM: SystemSettings<'static> = SystemSettings {
    framework: NAME,
    env_settings: ENV_SYSTEM_SETTINGS,
    defaults: Some((ENV_SYSTEM_DEFAULTS, "system-defaults.json")),
    default_path: Some(DEFAULT_SYSTEM_SETTINGS),
    file_name: SETTINGS_FILE,
};

/// The hook command for one event. Gemini expands `$VAR` anywhere in a settings value, even
/// inside single quotes, so a `$` in it could change what runs: it is refused.
pub(crate) fn hook_command(
    self_exe: &Path,
    nonce: &str,
    event: GeminiEvent,
) -> Result<String, FrameworkError> {
    SHIM.plain_hook_command(self_exe, nonce, event.name())
}

/// How our hooks are named and what they run: for one run, or in the file root installs.
#[derive(Clone, Copy)]
pub(crate) enum Hooks<'a> {
    /// The run's own settings file: the nonce is in each hook's name and command.
    Run { nonce: &'a str },
    /// The installed file, the same for every run: each name takes the run's nonce from
    /// the variable [`ENV_HOOK_NONCE`] when Gemini loads the file (it expands `${VAR}` in
    /// every settings value), so no `hooksConfig.disabled` entry written beforehand can
    /// name it either.
    Installed,
}

/// Appends our hooks to `settings` and makes sure hooks are on. Each hook's `name` carries
/// the per-run nonce, so no `hooksConfig.disabled` entry written beforehand can name it.
pub(crate) fn merge(
    mut settings: Map<String, Value>,
    self_exe: &Path,
    hooks: Hooks<'_>,
    timeout_ms: u64,
) -> Result<Map<String, Value>, FrameworkError> {
    let mut groups = Vec::new();
    for event in GeminiEvent::ALL {
        let (command, nonce) = match hooks {
            Hooks::Run { nonce } => (hook_command(self_exe, nonce, event)?, nonce.to_owned()),
            Hooks::Installed => (
                SHIM.installed_hook_command(self_exe, event.name())?,
                format!("${{{ENV_HOOK_NONCE}}}"),
            ),
        };
        let mut group = command_group(command, timeout_ms, event.is_tool_event().then_some(".*"));
        group["hooks"][0]["name"] = format!("ahp-wrap-{nonce}-{}", event.name()).into();
        groups.push((event.name(), group));
    }
    append_hook_groups(&mut settings, "the system settings", groups)
        .map_err(|why| SHIM.prepare_error(why))?;
    // System settings take precedence over user and workspace ones, so this keeps a user's
    // `hooksConfig.enabled: false` from switching supervision off.
    let config = settings
        .entry("hooksConfig")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| {
            SHIM.prepare_error("\"hooksConfig\" in the system settings is not an object")
        })?;
    config.insert("enabled".into(), true.into());
    Ok(settings)
}

/// The system settings Gemini would read without us, when it would trust them.
pub(crate) fn load_system_settings(path: &Path) -> Result<Map<String, Value>, FrameworkError> {
    if !path.exists() {
        return Ok(Map::new());
    }
    if !only_root_can_write(path) {
        // Gemini itself skips such a file with a warning; we must not launder it into ours.
        eprintln!(
            "ahp-wrap: warning: the Gemini system settings {} are not owned by root or are writable by others; \
             Gemini would skip them, and so does this run",
            path.display()
        );
        return Ok(Map::new());
    }
    SYSTEM.read(path)
}

/// Injects our hooks for one run: as root, a settings file of the run's own; else the
/// file root installed once for every user (see `installed`).
pub(crate) fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    if !nix::unistd::geteuid().is_root() {
        return installed::prepare(run, cmd);
    }
    if !only_root_can_write(&run.run_dir) {
        return Err(SHIM.prepare_error(format!(
            "the run directory {} is not writable by root alone, so Gemini would ignore settings written there",
            run.run_dir.display()
        )));
    }
    let real = SYSTEM.real_path();
    // Gemini counts milliseconds, and its hook timeout fails open: the hook process
    // answers first.
    let timeout_ms = timeout::hook_timeout_ms(run);
    let nonce = run_nonce();
    let system = match &real {
        Some(path) => load_system_settings(path)?,
        None => Map::new(),
    };
    let merged = merge(
        system,
        &run.self_exe,
        Hooks::Run { nonce: &nonce },
        timeout_ms,
    )?;
    SYSTEM.install(run, cmd, real.as_deref(), merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::ffi::OsString;

    #[test]
    fn merge_appends_to_system_hooks_and_turns_hooks_on() {
        let system: Map<String, Value> = serde_json::from_value(json!({
            "model": {"name": "x"},
            "hooksConfig": {"enabled": false, "disabled": ["theirs"]},
            "hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "mine"}]}]},
        }))
        .unwrap();
        let m = merge(
            system,
            Path::new("/opt/ahp wrap"),
            Hooks::Run { nonce: "abc" },
            17_000,
        )
        .unwrap();
        assert_eq!(m["model"]["name"], "x");
        assert_eq!(
            m["hooksConfig"],
            json!({"enabled": true, "disabled": ["theirs"]})
        );
        let before = m["hooks"]["BeforeTool"].as_array().unwrap();
        assert_eq!(before.len(), 2);
        assert_eq!(before[0]["hooks"][0]["command"], "mine");
        assert_eq!(before[1]["matcher"], ".*");
        let ours = &before[1]["hooks"][0];
        assert_eq!(ours["timeout"], 17_000);
        assert_eq!(ours["name"], "ahp-wrap-abc-BeforeTool");
        assert_eq!(
            ours["command"],
            "AHP_WRAP_RUN=abc exec '/opt/ahp wrap' hook gemini BeforeTool"
        );
        assert!(m["hooks"]["BeforeAgent"][0].get("matcher").is_none());
        for event in GeminiEvent::ALL {
            assert!(m["hooks"][event.name()].is_array(), "{}", event.name());
        }
        let bad: Map<String, Value> = serde_json::from_value(json!({"hooks": []})).unwrap();
        assert!(merge(bad, Path::new("x"), Hooks::Installed, 1).is_err());
    }

    #[test]
    fn prepare_writes_into_a_run_dir_only_root_can_write() {
        let run_dir = ahp_wrap_adapter::testing::RunDir::create().unwrap();
        let run = RunContext {
            self_exe: "/bin/ahp-wrap".into(),
            run_dir: run_dir.path().to_owned(),
            hook_budget_ms: 12_000,
            interactive: false,
        };
        let mut cmd = AgentCommand {
            program: "gemini".into(),
            args: vec!["-p".into(), "hi".into()],
            ..AgentCommand::default()
        };
        if !nix::unistd::geteuid().is_root() {
            let e = prepare(&run, &mut cmd).unwrap_err().to_string();
            assert!(e.contains("setup gemini"), "{e}");
            return;
        }
        // As root the run directory avoids /tmp, so Gemini will read what we write there.
        assert!(
            only_root_can_write(run_dir.path()),
            "{}",
            run_dir.path().display()
        );
        prepare(&run, &mut cmd).unwrap();
        let path = run_dir.path().join(SETTINGS_FILE);
        assert_eq!(
            cmd.env[0],
            (ENV_SYSTEM_SETTINGS.into(), path.clone().into())
        );
        assert_eq!(cmd.env[1].0, ENV_SYSTEM_DEFAULTS);
        assert!(only_root_can_write(&path));
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"],
            17_000
        );
        assert_eq!(written["hooksConfig"]["enabled"], true);
        assert_eq!(cmd.args, vec![OsString::from("-p"), "hi".into()]);
    }

    #[test]
    fn a_dollar_in_the_hook_command_is_refused() {
        assert!(hook_command(
            Path::new("/opt/$HOME/ahp-wrap"),
            "n",
            GeminiEvent::BeforeTool
        )
        .is_err());
    }

    #[test]
    fn insecure_system_settings_are_skipped_like_gemini_does() {
        // A temp dir sits under the world-writable /tmp: Gemini would not read it.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        std::fs::write(&file, r#"{"hooks": {"BeforeTool": []}}"#).unwrap();
        if !only_root_can_write(&file) {
            assert!(load_system_settings(&file).unwrap().is_empty());
        }
        assert!(load_system_settings(&dir.path().join("absent.json"))
            .unwrap()
            .is_empty());
    }
}
