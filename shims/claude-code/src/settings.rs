//! Injection for one run: our hooks, merged with the user's `--settings`, written to a file
//! in the run directory and passed as the one `--settings` Claude sees.
//!
//! Claude keeps only the *last* `--settings` it is given, so we take the user's (a JSON
//! string or a file), append our hooks to theirs, and replace it. Their settings files are
//! never touched: Claude itself layers user, project and local settings under ours.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{ClaudeEvent, HookName, SHIM};
use ahp_wrap_adapter::shared::{settings, timeout};
use ahp_wrap_adapter::{run_nonce, AgentCommand, FrameworkError, RunContext};

/// The file we write in the run directory.
pub(crate) const SETTINGS_FILE: &str = "claude-code-settings.json";

/// The variable Claude Code reads for the program named in its exit hint
/// (`<program> --resume <id>`; one word, else ignored).
pub(crate) const RESUME_HINT_ENV: &str = "CLAUDE_CODE_RESUME_HINT_COMMAND";
/// Flags with which Claude would run no hooks at all: a wrapped run refuses them.
const HOOKLESS_FLAGS: [&str; 2] = ["--bare", "--safe-mode"];
/// Subcommands that do not start an agent session (and may not accept `--settings`).
pub(super) const SUBCOMMANDS: [&str; 9] = [
    "config",
    "mcp",
    "migrate-installer",
    "setup-token",
    "doctor",
    "update",
    "install",
    "plugin",
    "auth",
];

/// What we found on the user's command line.
#[derive(Debug, Default, PartialEq)]
struct Scan {
    /// `-p` / `--print`: Claude runs headless.
    headless: bool,
    /// The value of the last `--settings`, which is the only one Claude would use.
    user_settings: Option<OsString>,
    /// Indices of the arguments that carried a `--settings`, to be replaced by ours.
    settings_args: Vec<usize>,
    /// The first argument is a subcommand, not an agent session.
    subcommand: bool,
}

fn scan(args: &[OsString]) -> Result<Scan, FrameworkError> {
    let mut scan = Scan {
        subcommand: args
            .first()
            .and_then(|a| a.to_str())
            .is_some_and(|a| SUBCOMMANDS.contains(&a)),
        ..Scan::default()
    };
    let mut i = 0;
    while i < args.len() {
        // Arguments that are not UTF-8 are never one of Claude's flags.
        let Some(arg) = args[i].to_str() else {
            i += 1;
            continue;
        };
        match arg {
            "--" => break,
            "-p" | "--print" => scan.headless = true,
            "--settings" => {
                let value = args
                    .get(i + 1)
                    .ok_or_else(|| SHIM.prepare_error("--settings is missing its value"))?;
                scan.user_settings = Some(value.clone());
                scan.settings_args.extend([i, i + 1]);
                i += 1;
            }
            _ if HOOKLESS_FLAGS.contains(&arg) => {
                return Err(SHIM.prepare_error(format!(
                    "{arg} turns off Claude Code's hooks, so the run could not be supervised"
                )))
            }
            _ => {
                if let Some(value) = arg.strip_prefix("--settings=") {
                    scan.user_settings = Some(value.into());
                    scan.settings_args.push(i);
                }
            }
        }
        i += 1;
    }
    Ok(scan)
}

/// The user's `--settings` value as a JSON object: inline JSON, or a file to read.
fn load_user_settings(value: &OsStr) -> Result<Map<String, Value>, FrameworkError> {
    let (text, from) = match value.to_str().map(str::trim_start) {
        Some(s) if s.starts_with('{') => (s.to_owned(), "the --settings JSON".to_owned()),
        _ => {
            let path = Path::new(value);
            let text = std::fs::read_to_string(path).map_err(|e| {
                SHIM.prepare_error(format!(
                    "cannot read the --settings file {}: {e}",
                    path.display()
                ))
            })?;
            (text, format!("the --settings file {}", path.display()))
        }
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(SHIM.prepare_error(format!("{from} is not a JSON object"))),
        Err(e) => Err(SHIM.prepare_error(format!("{from} is not valid JSON: {e}"))),
    }
}

/// The hook command for one event. The per-run nonce makes it unique, so Claude's
/// de-duplication of identical hook commands can never merge it with a user's hook.
pub(crate) fn hook_command(
    self_exe: &Path,
    nonce: &str,
    event: ClaudeEvent,
    headless: bool,
) -> String {
    SHIM.hook_command(self_exe, nonce, &HookName::registered(event, headless))
}

/// Appends our hooks to `settings` and makes sure hooks are on.
pub(crate) fn merge(
    mut settings: Map<String, Value>,
    self_exe: &Path,
    nonce: &str,
    timeout_s: u64,
    headless: bool,
) -> Result<Map<String, Value>, FrameworkError> {
    let groups = ClaudeEvent::ALL.map(|event| {
        let command = hook_command(self_exe, nonce, event, headless);
        let matcher = event.is_tool_event().then_some("*");
        (
            event.name(),
            settings::command_group(command, timeout_s, matcher),
        )
    });
    settings::append_hook_groups(&mut settings, "the user's --settings", groups)
        .map_err(|why| SHIM.prepare_error(why))?;
    // Without this, a `disableAllHooks: true` anywhere in the user's settings would switch
    // our hooks off too and leave the run unsupervised. A wrapped run is supervised or it
    // does not run; the price is that the user's own hooks run as well (see the README).
    settings.insert("disableAllHooks".into(), false.into());
    Ok(settings)
}

/// Settings files Claude reads besides `--settings`, for the `disableAllHooks` warning.
fn other_settings_files() -> Vec<PathBuf> {
    let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".claude")));
    let mut files: Vec<PathBuf> = config_dir
        .map(|d| d.join("settings.json"))
        .into_iter()
        .collect();
    files.push(PathBuf::from(".claude/settings.json"));
    files.push(PathBuf::from(".claude/settings.local.json"));
    files
}

/// Whether Claude Code started with `args` in `workspace` runs its Bash calls in its sandbox
/// (`sandbox.enabled`): the settings files it reads, the later one deciding over the earlier
/// (the user's, the project's, the project's local, `--settings`, the managed ones).
pub(crate) fn sandbox_enabled(args: &[OsString], home: &Path, workspace: &Path) -> bool {
    let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join(".claude"), PathBuf::from);
    let read = |path: &Path| -> Option<Map<String, Value>> {
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    };
    let mut layers = vec![
        read(&config_dir.join("settings.json")),
        read(&workspace.join(".claude/settings.json")),
        read(&workspace.join(".claude/settings.local.json")),
    ];
    if let Some(value) = scan(args).ok().and_then(|s| s.user_settings) {
        layers.push(load_user_settings(&value).ok());
    }
    layers.push(read(Path::new("/etc/claude-code/managed-settings.json")));
    layers
        .iter()
        .rev()
        .flatten()
        .filter_map(|s| s.get("sandbox")?.get("enabled")?.as_bool())
        .next()
        .unwrap_or(false)
}

fn disables_hooks(settings: &Map<String, Value>) -> bool {
    settings.get("disableAllHooks") == Some(&Value::Bool(true))
}

pub(crate) fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    let scan = scan(&cmd.args)?;
    if scan.subcommand {
        // `claude mcp …`, `claude config …`: no session, no hooks to register.
        return Ok(());
    }
    let user = match &scan.user_settings {
        Some(value) => load_user_settings(value)?,
        None => Map::new(),
    };
    let disabled_by_user = disables_hooks(&user)
        || other_settings_files().iter().any(|f| {
            std::fs::read_to_string(f)
                .ok()
                .and_then(|t| serde_json::from_str::<Map<String, Value>>(&t).ok())
                .is_some_and(|s| disables_hooks(&s))
        });
    if disabled_by_user {
        // Printed before Claude clears the screen, and again by the wrapper after it exits.
        cmd.warnings.push(
            "your Claude Code settings say disableAllHooks; this wrapped run turned hooks back \
             on (your own hooks ran too), because without them it could not be supervised"
                .to_owned(),
        );
    }
    // Claude counts seconds, and its hook timeout fails open: the hook process answers first.
    let timeout_s = timeout::hook_timeout_s(run);
    let nonce = run_nonce();
    let merged = merge(user, &run.self_exe, &nonce, timeout_s, scan.headless)?;
    let path = run.run_dir.join(SETTINGS_FILE);
    let text = serde_json::to_vec_pretty(&Value::Object(merged))
        .map_err(|e| SHIM.prepare_error(format!("cannot encode the settings: {e}")))?;
    std::fs::write(&path, text)
        .map_err(|e| SHIM.prepare_error(format!("cannot write {}: {e}", path.display())))?;

    let mut args = Vec::with_capacity(cmd.args.len() + 2);
    // Ours goes first, before any `--` or positional prompt.
    args.push(OsString::from("--settings"));
    args.push(path.into_os_string());
    args.extend(
        std::mem::take(&mut cmd.args)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !scan.settings_args.contains(i))
            .map(|(_, a)| a),
    );
    cmd.args = args;
    // Claude's exit hint ("Resume this session with: claude --settings <file> --resume <id>")
    // repeats our --settings, a file in the run directory that is gone by then. With a
    // one-word launcher set here, Claude 2.1.330 prints `<launcher> --resume <id>` and no
    // flags: a command that works. The wrapper adds its own hint to resume supervised. A
    // launcher the user set themselves is kept: it omits the flags all the same.
    if std::env::var_os(RESUME_HINT_ENV).is_none() {
        cmd.env.push((RESUME_HINT_ENV.into(), "claude".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_sandbox_is_on_as_the_last_settings_file_that_names_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let (home, ws) = (dir.path().join("home"), dir.path().join("ws"));
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        let on = |args: &[&str]| sandbox_enabled(&os(args), &home, &ws);
        assert!(!on(&["-p", "x"]));
        std::fs::write(
            home.join(".claude/settings.json"),
            r#"{"sandbox":{"enabled":true}}"#,
        )
        .unwrap();
        assert!(on(&["-p", "x"]));
        std::fs::write(
            ws.join(".claude/settings.local.json"),
            r#"{"sandbox":{"enabled":false}}"#,
        )
        .unwrap();
        assert!(!on(&[]));
        assert!(on(&["--settings", r#"{"sandbox":{"enabled":true}}"#]));
    }

    #[test]
    fn scan_finds_print_mode_and_the_last_settings() {
        let s = scan(&os(&[
            "-p",
            "hi",
            "--settings",
            "a.json",
            "--settings={\"x\":1}",
        ]))
        .unwrap();
        assert!(s.headless);
        assert_eq!(s.user_settings, Some("{\"x\":1}".into()));
        assert_eq!(s.settings_args, vec![2, 3, 4]);
        let s = scan(&os(&["--", "--settings", "x", "--bare"])).unwrap();
        assert_eq!(s, Scan::default());
        assert!(scan(&os(&["mcp", "list"])).unwrap().subcommand);
    }

    #[test]
    fn flags_that_turn_hooks_off_are_refused() {
        for flag in HOOKLESS_FLAGS {
            let e = scan(&os(&["-p", "x", flag])).unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
        assert!(scan(&os(&["--settings"])).is_err());
    }

    #[test]
    fn merge_appends_to_user_hooks_and_turns_hooks_on() {
        let user: Map<String, Value> = serde_json::from_value(json!({
            "model": "x",
            "disableAllHooks": true,
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]},
        }))
        .unwrap();
        let m = merge(user, Path::new("/opt/ahp wrap"), "abc", 17, true).unwrap();
        assert_eq!(m["model"], "x");
        assert_eq!(m["disableAllHooks"], false);
        let pre = m["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "mine");
        assert_eq!(pre[1]["matcher"], "*");
        assert_eq!(pre[1]["hooks"][0]["timeout"], 17);
        assert_eq!(
            pre[1]["hooks"][0]["command"],
            "AHP_WRAP_RUN=abc exec '/opt/ahp wrap' hook claude-code PreToolUse.print"
        );
        assert!(m["hooks"]["Stop"][0].get("matcher").is_none());
        for event in ClaudeEvent::ALL {
            assert!(m["hooks"][event.name()].is_array(), "{}", event.name());
        }
        let bad: Map<String, Value> = serde_json::from_value(json!({"hooks": []})).unwrap();
        assert!(merge(bad, Path::new("x"), "n", 1, false).is_err());
    }

    #[test]
    fn prepare_replaces_the_users_settings_with_a_merged_file() {
        let dir = tempfile::tempdir().unwrap();
        let user_file = dir.path().join("user.json");
        std::fs::write(&user_file, r#"{"env":{"A":"1"}}"#).unwrap();
        let run = ahp_wrap_adapter::testing::run_in(dir.path());
        let mut cmd = AgentCommand {
            program: "claude".into(),
            args: vec![
                "-p".into(),
                "--settings".into(),
                user_file.clone().into(),
                "hello".into(),
            ],
            env: Vec::new(),
            expect_hook: None,
            warnings: Vec::new(),
            ..AgentCommand::default()
        };
        prepare(&run, &mut cmd).unwrap();
        let path = dir.path().join(SETTINGS_FILE);
        assert_eq!(
            cmd.args,
            vec![
                OsString::from("--settings"),
                path.clone().into(),
                "-p".into(),
                "hello".into()
            ]
        );
        let written: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(written["env"]["A"], "1");
        assert_eq!(written["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"], 18);
        // The user's file is untouched.
        assert_eq!(
            std::fs::read_to_string(&user_file).unwrap(),
            r#"{"env":{"A":"1"}}"#
        );
        cmd.args = os(&["-p", "--settings", "{not json"]);
        assert!(prepare(&run, &mut cmd).is_err());
    }
}
