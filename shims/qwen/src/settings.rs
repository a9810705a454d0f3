//! Injection for one run: a system settings file with our hooks, merged with the system
//! settings Qwen would otherwise read, passed as `QWEN_CODE_SYSTEM_SETTINGS_PATH`.
//!
//! That variable *replaces* the system settings file, so the real one is copied into ours
//! and `QWEN_CODE_SYSTEM_DEFAULTS_PATH` points back at the real defaults file. Unlike
//! Gemini, Qwen reads a system settings file from any directory, so ours stays in the
//! run directory. User and workspace settings are layered by Qwen and never touched.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{QwenEvent, NAME};
use crate::frameworks::{AgentCommand, FrameworkError, RunContext};

/// The file we write in the run directory.
pub const SETTINGS_FILE: &str = "qwen-system-settings.json";
pub const ENV_SYSTEM_SETTINGS: &str = "QWEN_CODE_SYSTEM_SETTINGS_PATH";
pub const ENV_SYSTEM_DEFAULTS: &str = "QWEN_CODE_SYSTEM_DEFAULTS_PATH";
/// Where Qwen looks for system settings on Linux when the variable is not set.
pub const DEFAULT_SYSTEM_SETTINGS: &str = "/etc/qwen-code/settings.json";
/// Seconds our registered hook timeout exceeds the wrapper's budget (Qwen counts seconds;
/// a timeout fails open, so the shim must always answer first).
pub const HOOK_TIMEOUT_MARGIN_S: u64 = 5;
/// Flags with which Qwen runs no hooks at all: a wrapped run refuses them.
const HOOKLESS_FLAGS: [&str; 2] = ["--bare", "--safe-mode"];

fn err(why: impl Into<String>) -> FrameworkError {
    FrameworkError::Prepare {
        framework: NAME,
        why: why.into(),
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The hook command for one event; the per-run nonce keeps it distinct from any user hook.
pub fn hook_command(
    self_exe: &Path,
    nonce: &str,
    event: QwenEvent,
) -> Result<String, FrameworkError> {
    let exe = self_exe.to_string_lossy();
    if exe.contains('$') {
        return Err(err(format!(
            "the ahp-wrap path {exe} contains a '$', which the settings loader would expand"
        )));
    }
    Ok(format!(
        "AHP_WRAP_RUN={nonce} exec {} hook {NAME} {}",
        shell_quote(&exe),
        event.name()
    ))
}

/// Appends our hooks to `settings` and makes sure hooks are on.
pub fn merge(
    mut settings: Map<String, Value>,
    self_exe: &Path,
    nonce: &str,
    timeout_s: u64,
) -> Result<Map<String, Value>, FrameworkError> {
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| err("\"hooks\" in the system settings is not an object"))?;
    for event in QwenEvent::ALL {
        let mut group = json!({"hooks": [{
            "type": "command",
            "command": hook_command(self_exe, nonce, event)?,
            "timeout": timeout_s,
        }]});
        if event.is_tool_event() {
            group["matcher"] = "*".into();
        }
        hooks
            .entry(event.name())
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| {
                err(format!(
                    "\"hooks.{}\" in the system settings is not a list",
                    event.name()
                ))
            })?
            .push(group);
    }
    // System settings win over user and workspace ones: a user's `disableAllHooks: true`
    // cannot switch supervision off.
    settings.insert("disableAllHooks".into(), false.into());
    Ok(settings)
}

fn load_system_settings(path: &Path) -> Result<Map<String, Value>, FrameworkError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => {
            return Err(err(format!(
                "cannot read the system settings {}: {e}",
                path.display()
            )))
        }
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(err(format!("{} is not a JSON object", path.display()))),
        Err(e) => Err(err(format!("{} is not valid JSON: {e}", path.display()))),
    }
}

pub fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    for arg in cmd.args.iter().filter_map(|a| a.to_str()) {
        if arg == "--" {
            break;
        }
        if HOOKLESS_FLAGS.contains(&arg) {
            return Err(err(format!(
                "{arg} turns off Qwen Code's hooks, so the run could not be supervised"
            )));
        }
    }
    let real: PathBuf = std::env::var_os(ENV_SYSTEM_SETTINGS)
        .filter(|v| !v.is_empty())
        .map_or_else(|| DEFAULT_SYSTEM_SETTINGS.into(), PathBuf::from);
    let defaults: OsString = std::env::var_os(ENV_SYSTEM_DEFAULTS)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            real.parent()
                .unwrap_or(Path::new("/"))
                .join("system-defaults.json")
                .into()
        });
    let timeout_s = run.hook_budget_ms.div_ceil(1000) + HOOK_TIMEOUT_MARGIN_S;
    let nonce = crate::random_hex(8);
    let merged = merge(
        load_system_settings(&real)?,
        &run.self_exe,
        &nonce,
        timeout_s,
    )?;
    let path = run.run_dir.join(SETTINGS_FILE);
    let text = serde_json::to_vec_pretty(&Value::Object(merged))
        .map_err(|e| err(format!("cannot encode the settings: {e}")))?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &text))
        .map_err(|e| err(format!("cannot write {}: {e}", path.display())))?;
    cmd.env.push((ENV_SYSTEM_SETTINGS.into(), path.into()));
    cmd.env.push((ENV_SYSTEM_DEFAULTS.into(), defaults));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
