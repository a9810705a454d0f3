//! Hook registration in JSON settings files of the Claude-style shape
//! (`hooks.<Event>: [{matcher?, hooks: [{type: "command", command, timeout}]}]`), and the
//! system-settings layer some agents let an environment variable replace.

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::{AgentCommand, FrameworkError, RunContext};

/// Quotes `s` for a POSIX shell (agents run hook commands through one).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command an agent runs for one of our hooks: `ahp-wrap hook <framework> <hook>`.
/// The per-run nonce makes it unique, so no agent can merge it with a user's hook as a
/// duplicate, and it tells the hook process which run it belongs to.
pub(crate) fn hook_command(self_exe: &Path, nonce: &str, framework: &str, hook: &str) -> String {
    format!(
        "AHP_WRAP_RUN={nonce} exec {} hook {framework} {hook}",
        shell_quote(&self_exe.to_string_lossy())
    )
}

/// The command of a hook in a file installed once for every run
/// ([`super::system_file`]): `exec <ahp-wrap-hook> hook <framework> <hook>`, the same for
/// every run (the hook finds its run in its environment).
pub(crate) fn installed_hook_command(self_exe: &Path, framework: &str, hook: &str) -> String {
    format!(
        "exec {} hook {framework} {hook}",
        shell_quote(&self_exe.to_string_lossy())
    )
}

/// Refuses an `ahp-wrap` path that a settings loader or shell could expand (`$VAR`,
/// backticks): the hook command must run exactly the executable we name. Agents that
/// expand variables in settings values (Gemini, Qwen) or hand the command to a shell
/// (Copilot) use this before registering our hooks.
pub(crate) fn check_plain_exe(
    self_exe: &Path,
    framework: &'static str,
) -> Result<(), FrameworkError> {
    let exe = self_exe.to_string_lossy();
    if exe.contains('$') || exe.contains('`') {
        return Err(FrameworkError::Prepare {
            framework,
            why: format!(
                "the ahp-wrap path {exe} contains a '$' or '`', which {framework} would expand in the hook command"
            ),
        });
    }
    Ok(())
}

/// One hook group running `command`, for tool events with a tool-name `matcher`.
pub fn command_group(command: String, timeout: u64, matcher: Option<&str>) -> Value {
    let mut group = json!({"hooks": [{
        "type": "command",
        "command": command,
        "timeout": timeout,
    }]});
    if let Some(m) = matcher {
        group["matcher"] = m.into();
    }
    group
}

/// Appends each `(event, group)` to `settings.hooks.<event>`, after whatever is there.
/// `source` names the settings in errors ("the system settings").
pub fn append_hook_groups(
    settings: &mut Map<String, Value>,
    source: &str,
    groups: impl IntoIterator<Item = (&'static str, Value)>,
) -> Result<(), SettingsError> {
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| SettingsError::NotAnObject(format!("\"hooks\" in {source}")))?;
    for (event, group) in groups {
        hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| SettingsError::NotAList(format!("\"hooks.{event}\" in {source}")))?
            .push(group);
    }
    Ok(())
}

/// An agent's system settings file, which an environment variable can replace, with a
/// defaults file that is looked for next to it unless a second variable names it.
///
/// A run replaces it with a merged copy in the run directory: the real file's settings
/// plus our hooks, and the defaults variable pointing back at the real defaults file.
#[derive(Debug)]
pub struct SystemSettings<'a> {
    /// The shim's name, for errors.
    pub framework: &'static str,
    /// The variable naming the system settings file.
    pub env_settings: &'a str,
    /// The variable naming the system defaults file, and that file's name beside the
    /// system settings when the variable is not set.
    pub defaults: Option<(&'a str, &'a str)>,
    /// Where the agent looks when `env_settings` is not set, if anywhere.
    pub default_path: Option<&'a str>,
    /// The merged copy's file name in the run directory.
    pub file_name: &'a str,
}

impl SystemSettings<'_> {
    fn err(&self, why: impl std::fmt::Display) -> FrameworkError {
        FrameworkError::Prepare {
            framework: self.framework,
            why: why.to_string(),
        }
    }

    /// The system settings file the agent would read without us, if any.
    pub fn real_path(&self) -> Option<PathBuf> {
        std::env::var_os(self.env_settings)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| self.default_path.map(PathBuf::from))
    }

    /// The system defaults file the agent would read without us.
    fn defaults_path(&self, env: &str, file: &str, real: &Path) -> OsString {
        std::env::var_os(env)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| real.parent().unwrap_or(Path::new("/")).join(file).into())
    }

    /// The settings in `path`: a JSON object, or nothing when there is no such file.
    pub fn read(&self, path: &Path) -> Result<Map<String, Value>, FrameworkError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => {
                return Err(self.err(format!(
                    "cannot read the system settings {}: {e}",
                    path.display()
                )))
            }
        };
        match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(self.err(format!("{} is not a JSON object", path.display()))),
            Err(e) => Err(self.err(format!("{} is not valid JSON: {e}", path.display()))),
        }
    }

    /// Writes `merged` (the settings from `real`, if any, plus ours) as this run's system
    /// settings file (0600, never over an existing file) and points the agent at it.
    pub fn install(
        &self,
        run: &RunContext,
        cmd: &mut AgentCommand,
        real: Option<&Path>,
        merged: Map<String, Value>,
    ) -> Result<(), FrameworkError> {
        let path = write_private(run, self.file_name, &Value::Object(merged))
            .map_err(|why| self.err(why))?;
        self.point_at(cmd, &path, real);
        Ok(())
    }

    /// Points the agent at `path` as its system settings, and its defaults variable back at
    /// the defaults file it would read beside `real`.
    pub fn point_at(&self, cmd: &mut AgentCommand, path: &Path, real: Option<&Path>) {
        cmd.env.push((self.env_settings.into(), path.into()));
        if let (Some((env, file)), Some(real)) = (self.defaults, real) {
            let defaults = self.defaults_path(env, file, real);
            cmd.env.push((env.into(), defaults));
        }
    }
}

/// Writes `settings` as `file_name` in the run directory (0600, never over an existing
/// file); its path.
pub fn write_private(
    run: &RunContext,
    file_name: &str,
    settings: &Value,
) -> Result<PathBuf, SettingsError> {
    let path = run.run_dir.join(file_name);
    let text = serde_json::to_vec_pretty(settings).map_err(SettingsError::Encode)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &text))
        .map_err(|e| SettingsError::Write(path.clone(), e))?;
    Ok(path)
}

/// Why settings cannot be merged or written.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A member that must be an object is not (named with where it is).
    #[error("{0} is not an object")]
    NotAnObject(String),
    /// A member that must be a list is not (named with where it is).
    #[error("{0} is not a list")]
    NotAList(String),
    /// The settings cannot be encoded as JSON.
    #[error("cannot encode the settings: {0}")]
    Encode(#[source] serde_json::Error),
    /// The file cannot be written.
    #[error("cannot write {}: {}", .0.display(), .1)]
    Write(PathBuf, #[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expandable_exe_path_is_refused() {
        assert!(check_plain_exe(Path::new("/usr/local/bin/ahp-wrap-hook"), "gemini").is_ok());
        for bad in ["/opt/$HOME/ahp-wrap", "/opt/`id`/ahp-wrap"] {
            let e = check_plain_exe(Path::new(bad), "gemini")
                .unwrap_err()
                .to_string();
            assert!(e.contains("would expand"), "{e}");
        }
    }

    #[test]
    fn hook_commands_are_quoted_for_the_shell() {
        assert_eq!(
            hook_command(Path::new("/opt/it's here"), "n1", "fw", "Pre.x"),
            r"AHP_WRAP_RUN=n1 exec '/opt/it'\''s here' hook fw Pre.x"
        );
    }

    #[test]
    fn groups_are_appended_after_the_existing_ones() {
        let mut s: Map<String, Value> =
            serde_json::from_value(json!({"hooks": {"A": [{"mine": 1}]}})).unwrap();
        append_hook_groups(
            &mut s,
            "the settings",
            [
                ("A", command_group("a".into(), 3, Some("*"))),
                ("B", command_group("b".into(), 3, None)),
            ],
        )
        .unwrap();
        assert_eq!(s["hooks"]["A"][0], json!({"mine": 1}));
        assert_eq!(
            s["hooks"]["A"][1],
            json!({"matcher": "*", "hooks": [{"type": "command", "command": "a", "timeout": 3}]})
        );
        assert!(s["hooks"]["B"][0].get("matcher").is_none());
        let mut bad: Map<String, Value> =
            serde_json::from_value(json!({"hooks": {"A": {}}})).unwrap();
        let e = append_hook_groups(&mut bad, "the settings", [("A", json!({}))]).unwrap_err();
        assert_eq!(e.to_string(), "\"hooks.A\" in the settings is not a list");
    }

    #[test]
    fn a_missing_system_settings_file_is_empty_and_a_bad_one_an_error() {
        let s = SystemSettings {
            framework: "fw",
            env_settings: "AHP_WRAP_TEST_UNSET_SETTINGS",
            defaults: Some(("AHP_WRAP_TEST_UNSET_DEFAULTS", "system-defaults.json")),
            default_path: Some("/etc/fw/settings.json"),
            file_name: "fw.json",
        };
        assert_eq!(
            s.real_path().as_deref(),
            Some(Path::new("/etc/fw/settings.json"))
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(s.read(&dir.path().join("absent.json")).unwrap().is_empty());
        std::fs::write(dir.path().join("list.json"), "[]").unwrap();
        assert!(s.read(&dir.path().join("list.json")).is_err());
    }
}
