//! Injection for one run: our hooks as `-c` overrides (Codex's session-flags layer), trusted
//! by a `hooks.state` entry for exactly those hooks, merged with any `-c hooks…` the user
//! passed. Their config files are never touched.
//!
//! Codex skips non-managed hooks that are not trusted, silently. Trust is a `hooks.state`
//! entry keyed by the hook's source, event, group and handler index, holding a SHA-256 of
//! the hook's normalised form. We compute the entries for our own hooks only, so none of
//! the user's untrusted hooks starts running (which `--dangerously-bypass-hook-trust`
//! would do). See the README for the trade-off.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toml::{Table, Value as Toml};

#[cfg(test)]
use super::args::parse_value;
use super::args::{apply, scan, Scan};
use super::{CodexEvent, SHIM};
use ahp_wrap_adapter::shared::timeout;
use ahp_wrap_adapter::{run_nonce, AgentCommand, FrameworkError, RunContext};

/// The source Codex names `-c` hooks by in trust keys.
pub const SESSION_FLAGS_SOURCE: &str = "/<session-flags>/config.toml";
/// Codex clamps SessionEnd hooks to this many seconds (and hashes the clamped value).
const SESSION_END_TIMEOUT_S: u64 = 3;
/// The hook that fires first in every `codex exec` session: if it never reaches the wrapper,
/// our hooks did not run (see `AgentCommand::expect_hook`).
pub(crate) const CANARY: CodexEvent = CodexEvent::SessionStart;

/// JSON with object keys sorted at every level, as Codex hashes it.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::from(k.as_str()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The trust hash Codex 0.169 computes for a hook: SHA-256 of the canonical JSON of the
/// event label, the group's matcher (if any) and the one normalised handler.
pub fn trust_hash(
    event: CodexEvent,
    matcher: Option<&str>,
    command: &str,
    timeout_s: u64,
) -> String {
    let mut identity = json!({
        "event_name": event.label(),
        "hooks": [{"type": "command", "command": command, "timeout": timeout_s, "async": false}],
    });
    if let Some(m) = matcher {
        identity["matcher"] = m.into();
    }
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical(&identity).as_bytes()))
    )
}

/// The hook command for one event. The per-run nonce keeps it distinct from any hook of
/// the user's, should Codex ever de-duplicate identical commands.
pub(crate) fn hook_command(self_exe: &Path, nonce: &str, event: CodexEvent) -> String {
    SHIM.hook_command(self_exe, nonce, event.name())
}

/// The user's `-c hooks…` (already applied, as a table) with our hooks appended to each
/// event's groups and a trust entry for each of ours added to `state`.
pub(crate) fn merge(
    user: Option<Toml>,
    self_exe: &Path,
    nonce: &str,
    timeout_s: u64,
) -> Result<Table, FrameworkError> {
    let mut hooks = match user {
        None => Table::new(),
        Some(Toml::Table(t)) => t,
        Some(_) => return Err(SHIM.prepare_error("the -c hooks=… value is not a table")),
    };
    let mut trust = Table::new();
    for event in CodexEvent::ALL {
        let command = hook_command(self_exe, nonce, event);
        let timeout = match event {
            CodexEvent::SessionEnd => timeout_s.min(SESSION_END_TIMEOUT_S),
            _ => timeout_s,
        };
        let matcher = event.is_tool_event().then_some("*");
        let mut handler = Table::new();
        handler.insert("type".into(), "command".into());
        handler.insert("command".into(), command.clone().into());
        handler.insert("timeout".into(), Toml::Integer(timeout as i64));
        let mut group = Table::new();
        if let Some(m) = matcher {
            group.insert("matcher".into(), m.into());
        }
        group.insert("hooks".into(), Toml::Array(vec![Toml::Table(handler)]));
        let groups = hooks
            .entry(event.name())
            .or_insert_with(|| Toml::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| {
                SHIM.prepare_error(format!("the -c hooks.{} value is not a list", event.name()))
            })?;
        let key = format!(
            "{SESSION_FLAGS_SOURCE}:{}:{}:0",
            event.label(),
            groups.len()
        );
        groups.push(Toml::Table(group));
        let mut entry = Table::new();
        entry.insert(
            "trusted_hash".into(),
            trust_hash(event, matcher, &command, timeout).into(),
        );
        trust.insert(key, Toml::Table(entry));
    }
    hooks
        .entry("state")
        .or_insert_with(|| Toml::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| SHIM.prepare_error("the -c hooks.state value is not a table"))?
        .extend(trust);
    Ok(hooks)
}

/// The `-c` arguments for this run: hooks switched on, and the merged hooks table.
fn overrides(
    scan: &Scan,
    self_exe: &Path,
    nonce: &str,
    timeout_s: u64,
) -> Result<[OsString; 4], FrameworkError> {
    if scan.overrides.iter().any(|o| o.path == ["features"]) {
        return Err(SHIM.prepare_error(
            "-c features=… replaces the whole features table, which could switch hooks off; \
             set features one by one (-c features.<name>=…)",
        ));
    }
    let mut user = apply(&scan.overrides);
    let features_off = user
        .get("features")
        .and_then(|f| f.get("hooks"))
        .is_some_and(|h| h.as_bool() != Some(true));
    if features_off {
        return Err(SHIM.prepare_error(
            "-c features.hooks turns off Codex's hooks, so the run could not be supervised",
        ));
    }
    let hooks = merge(user.remove("hooks"), self_exe, nonce, timeout_s)?;
    Ok([
        "-c".into(),
        // Hooks are on by default; this wins over a `[features] hooks = false` in the
        // user's config files (the -c layer is Codex's highest).
        "features.hooks=true".into(),
        "-c".into(),
        format!("hooks={}", Toml::Table(hooks)).into(),
    ])
}

pub(crate) fn prepare(run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
    let scan = scan(&cmd.args)?;
    // Codex counts seconds, and its hook timeout fails open: the hook process answers first.
    let timeout_s = timeout::hook_timeout_s(run);
    let ours = overrides(&scan, &run.self_exe, &run_nonce(), timeout_s)?;
    // `-c` is a global option: before any subcommand, it applies to all of them, and it
    // never lands in a subcommand's trailing arguments (`codex sandbox linux -- …`).
    let mut args = Vec::with_capacity(cmd.args.len() + ours.len());
    args.extend(ours);
    args.extend(
        std::mem::take(&mut cmd.args)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !scan.hook_args.contains(i))
            .map(|(_, a)| a),
    );
    cmd.args = args;
    if scan.exec {
        cmd.expect_hook = Some(CANARY.name().to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn trust_hashes_match_the_ones_codex_accepted() {
        // Computed by the script that was checked against codex 0.169.0 itself (a wrong
        // hash there means the hook is skipped); the e2e tests check ours on the real CLI.
        assert_eq!(
            trust_hash(CodexEvent::PreToolUse, Some("*"), "echo hi", 30),
            "sha256:6e4e918f0015bc3f3fac7864fd00f035ac12d2ba415b6dcdc80415135dbf4c44"
        );
        assert_eq!(
            trust_hash(CodexEvent::SessionStart, None, "echo hi", 30),
            "sha256:59cef8dd19f237d2b895f105e1b58dbe36fc741179e521988935609cfe668f31"
        );
        assert_eq!(
            trust_hash(
                CodexEvent::SessionEnd,
                None,
                "AHP_WRAP_RUN=ab exec '/opt/ahp wrap' hook codex SessionEnd",
                3
            ),
            "sha256:74c4cb934e54b755a765490eee8dc9894e1c4631ffe40d25fea6241ba78b979c"
        );
        assert_eq!(
            trust_hash(CodexEvent::PermissionRequest, Some("*"), "x é \"q\"", 17),
            "sha256:097aa8c00878246ee4b916ca790816c390fb5dbd8487aed162d8ae828bc356f1"
        );
    }

    #[test]
    fn switching_hooks_off_is_refused() {
        for args in [
            &["--disable", "hooks", "exec"][..],
            &["exec", "--disable=hooks"],
            &["-c", "features.hooks=false", "exec"],
            &["-c", "features={hooks=true}"],
            &["-c"],
            &["-c", "hooks"],
        ] {
            let s =
                scan(&os(args)).and_then(|s| overrides(&s, Path::new("/x"), "n", 10).map(|_| ()));
            assert!(s.is_err(), "{args:?}");
        }
        let s = scan(&os(&["-c", "features.hooks=true", "--disable", "plugins"])).unwrap();
        assert!(overrides(&s, Path::new("/x"), "n", 10).is_ok());
    }

    #[test]
    fn merge_appends_ours_after_the_users_and_trusts_only_ours() {
        let s = scan(&os(&[
            "-c",
            "hooks.PreToolUse=[{matcher=\"Bash\",hooks=[{type=\"command\",command=\"mine\"}]}]",
            "-c",
            "hooks.state={\"/<session-flags>/config.toml:pre_tool_use:0:0\"={trusted_hash=\"sha256:mine\"}}",
        ]))
        .unwrap();
        let mut user = apply(&s.overrides);
        let hooks = merge(user.remove("hooks"), Path::new("/opt/ahp wrap"), "ab", 17).unwrap();
        let pre = hooks["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"].as_str(), Some("mine"));
        let ours = &pre[1]["hooks"][0];
        let command = "AHP_WRAP_RUN=ab exec '/opt/ahp wrap' hook codex PreToolUse";
        assert_eq!(ours["command"].as_str(), Some(command));
        assert_eq!(ours["timeout"].as_integer(), Some(17));
        assert_eq!(pre[1]["matcher"].as_str(), Some("*"));
        let state = hooks["state"].as_table().unwrap();
        // The user's own entry is kept as it was; ours is keyed by our group's index.
        assert_eq!(
            state["/<session-flags>/config.toml:pre_tool_use:0:0"]["trusted_hash"].as_str(),
            Some("sha256:mine")
        );
        let expected = trust_hash(CodexEvent::PreToolUse, Some("*"), command, 17);
        assert_eq!(
            state["/<session-flags>/config.toml:pre_tool_use:1:0"]["trusted_hash"].as_str(),
            Some(expected.as_str())
        );
        assert_eq!(state.len(), 1 + CodexEvent::ALL.len());
        // SessionEnd is registered (and hashed) with Codex's 3 s cap; Stop has no matcher.
        assert_eq!(
            hooks["SessionEnd"][0]["hooks"][0]["timeout"].as_integer(),
            Some(3)
        );
        assert!(hooks["Stop"][0].get("matcher").is_none());
        assert!(merge(Some(Toml::Integer(1)), Path::new("x"), "n", 1).is_err());
        let bad = apply(&scan(&os(&["-c", "hooks.Stop=3"])).unwrap().overrides);
        assert!(merge(bad.get("hooks").cloned(), Path::new("x"), "n", 1).is_err());
    }

    #[test]
    fn prepare_puts_one_merged_hooks_override_first() {
        let dir = tempfile::tempdir().unwrap();
        let run = ahp_wrap_adapter::testing::run_in(dir.path());
        let mut cmd = AgentCommand {
            program: "codex".into(),
            args: os(&["exec", "-c", "hooks.Stop=[]", "--json", "do it"]),
            env: Vec::new(),
            expect_hook: None,
            warnings: Vec::new(),
            ..AgentCommand::default()
        };
        prepare(&run, &mut cmd).unwrap();
        assert_eq!(cmd.expect_hook.as_deref(), Some("SessionStart"));
        let args: Vec<String> = cmd
            .args
            .iter()
            .map(|a| a.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(args[..3], ["-c", "features.hooks=true", "-c"]);
        assert_eq!(args[4..], ["exec", "--json", "do it"]);
        // The value is one inline TOML table, as Codex parses a -c value.
        let hooks = parse_value(args[3].strip_prefix("hooks=").unwrap());
        let pre = &hooks["PreToolUse"][0]["hooks"][0];
        assert_eq!(pre["timeout"].as_integer(), Some(18));
        assert!(pre["command"]
            .as_str()
            .unwrap()
            .ends_with("hook codex PreToolUse"));
        assert_eq!(hooks["Stop"].as_array().unwrap().len(), 1);
        assert!(hooks["state"]
            .as_table()
            .unwrap()
            .contains_key("/<session-flags>/config.toml:stop:0:0"));
        // Other subcommands get the hooks too (harmless), but no start-up expectation.
        cmd.args = os(&["mcp", "list"]);
        cmd.expect_hook = None;
        prepare(&run, &mut cmd).unwrap();
        assert_eq!(cmd.expect_hook, None);
        assert_eq!(cmd.args[4..], os(&["mcp", "list"]));
    }
}
