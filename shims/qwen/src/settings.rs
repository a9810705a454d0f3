//! Injection for one run: a system settings file with our hooks, merged with the system
//! settings Qwen would otherwise read, passed as `QWEN_CODE_SYSTEM_SETTINGS_PATH`.
//!
//! That variable *replaces* the system settings file, so the real one is copied into ours
//! and `QWEN_CODE_SYSTEM_DEFAULTS_PATH` points back at the real defaults file. Unlike
//! Gemini, Qwen reads a system settings file from any directory, so ours stays in the
//! run directory. User and workspace settings are layered by Qwen and never touched.

use std::path::Path;

use serde_json::{Map, Value};

use super::{QwenEvent, NAME, SHIM};
use crate::frameworks::adapter::shared::settings::{
    append_hook_groups, command_group, SystemSettings,
};
use crate::frameworks::adapter::shared::timeout;
use crate::frameworks::adapter::{run_nonce, AgentCommand, FrameworkError, RunContext};

/// The file we write in the run directory.
pub const SETTINGS_FILE: &str = "qwen-system-settings.json";
pub const ENV_SYSTEM_SETTINGS: &str = "QWEN_CODE_SYSTEM_SETTINGS_PATH";
pub const ENV_SYSTEM_DEFAULTS: &str = "QWEN_CODE_SYSTEM_DEFAULTS_PATH";
/// Where Qwen looks for system settings on Linux when the variable is not set.
pub const DEFAULT_SYSTEM_SETTINGS: &str = "/etc/qwen-code/settings.json";
/// Flags with which Qwen runs no hooks at all: a wrapped run refuses them.
const HOOKLESS_FLAGS: [&str; 2] = ["--bare", "--safe-mode"];

const SYSTEM: SystemSettings = SystemSettings {
    framework: NAME,
    env_settings: ENV_SYSTEM_SETTINGS,
    env_defaults: ENV_SYSTEM_DEFAULTS,
    default_path: DEFAULT_SYSTEM_SETTINGS,
    file_name: SETTINGS_FILE,
};

/// The hook command for one event; the per-run nonce keeps it distinct from any user hook.
pub fn hook_command(
    self_exe: &Path,
    nonce: &str,
    event: QwenEvent,
) -> Result<String, FrameworkError> {
    SHIM.plain_hook_command(self_exe, nonce, event.name())
}

/// Appends our hooks to `settings` and makes sure hooks are on.
pub fn merge(
    mut settings: Map<String, Value>,
    self_exe: &Path,
    nonce: &str,
    timeout_s: u64,
) -> Result<Map<String, Value>, FrameworkError> {
    let mut groups = Vec::new();
    for event in QwenEvent::ALL {
        let command = hook_command(self_exe, nonce, event)?;
        let matcher = event.is_tool_event().then_some("*");
        groups.push((event.name(), command_group(command, timeout_s, matcher)));
    }
    append_hook_groups(&mut settings, "the system settings", groups)
        .map_err(|why| SHIM.prepare_error(why))?;
    // System settings win over user and workspace ones: a user's `disableAllHooks: true`
    // cannot switch supervision off.
    settings.insert("disableAllHooks".into(), false.into());
    Ok(settings)
}

pub fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    for arg in cmd.args.iter().filter_map(|a| a.to_str()) {
        if arg == "--" {
            break;
        }
        if HOOKLESS_FLAGS.contains(&arg) {
            return Err(SHIM.prepare_error(format!(
                "{arg} turns off Qwen Code's hooks, so the run could not be supervised"
            )));
        }
    }
    let real = SYSTEM.real_path();
    // Qwen counts seconds, and its hook timeout fails open: the hook process answers first.
    let timeout_s = timeout::hook_timeout_s(run);
    let nonce = run_nonce();
    let merged = merge(SYSTEM.read(&real)?, &run.self_exe, &nonce, timeout_s)?;
    SYSTEM.install(run, cmd, &real, merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_appends_to_system_hooks_and_turns_hooks_on() {
        let system: Map<String, Value> = serde_json::from_value(json!({
            "disableAllHooks": true,
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]},
        }))
        .unwrap();
        let m = merge(system, Path::new("/opt/ahp-wrap"), "abc", 17).unwrap();
        assert_eq!(m["disableAllHooks"], false);
        let pre = m["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "mine");
        assert_eq!(pre[1]["matcher"], "*");
        assert_eq!(pre[1]["hooks"][0]["timeout"], 17);
        assert_eq!(
            pre[1]["hooks"][0]["command"],
            "AHP_WRAP_RUN=abc exec '/opt/ahp-wrap' hook qwen PreToolUse"
        );
        assert!(m["hooks"]["Stop"][0].get("matcher").is_none());
        let bad: Map<String, Value> = serde_json::from_value(json!({"hooks": []})).unwrap();
        assert!(merge(bad, Path::new("x"), "n", 1).is_err());
    }

    #[test]
    fn prepare_writes_merged_settings_and_refuses_hookless_flags() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunContext {
            self_exe: "/bin/ahp-wrap".into(),
            run_dir: dir.path().to_owned(),
            hook_budget_ms: 12_001,
            interactive: false,
        };
        let mut cmd = AgentCommand {
            program: "qwen".into(),
            args: vec!["hello".into(), "--yolo".into()],
            ..AgentCommand::default()
        };
        prepare(&run, &mut cmd).unwrap();
        let path = dir.path().join(SETTINGS_FILE);
        assert_eq!(
            cmd.env[0],
            (ENV_SYSTEM_SETTINGS.into(), path.clone().into())
        );
        assert_eq!(cmd.env[1].0, ENV_SYSTEM_DEFAULTS);
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(written["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"], 18);
        cmd.args = vec!["--bare".into()];
        assert!(prepare(&run, &mut cmd).is_err());
    }
}
