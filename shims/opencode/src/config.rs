//! Injection for one run: our plugin (`plugin.js`, filled in for the run) written into the run
//! directory, and added to OpenCode's configuration through `OPENCODE_CONFIG_CONTENT`.
//!
//! OpenCode layers that variable over the global, custom, project and `.opencode` configs,
//! and gathers the `plugin` lists of every layer, so the user's own config files and plugins
//! still load and nothing of theirs is edited. A value the user already set is kept: our
//! plugin is appended to its `plugin` list.

use std::path::Path;

use serde_json::{Map, Value};

#[cfg(test)]
use super::OPENCODE;
use super::{Flavor, OpenCodeEvent};
use ahp_wrap_adapter::shared::timeout;
use ahp_wrap_adapter::{run_nonce, AgentCommand, FrameworkError, RunContext};

/// The plugin's source; `__AHP_WRAP_…__` placeholders are filled in for the run.
const PLUGIN_TEMPLATE: &str = include_str!("plugin.js");
/// The hook every OpenCode prompt goes through: if it never reaches the wrapper, our
/// plugin did not load (see `AgentCommand::expect_hook`).
pub(crate) const CANARY: OpenCodeEvent = OpenCodeEvent::ChatMessage;

/// The plugin for one run: the hook executable, the time it may take, the framework it
/// speaks for and the agent's name, as JS literals.
pub(crate) fn plugin_source(
    flavor: &Flavor,
    hook_exe: &Path,
    timeout_ms: u64,
) -> Result<String, FrameworkError> {
    let exe = hook_exe
        .to_str()
        .ok_or_else(|| flavor.shim.prepare_error("the ahp-wrap path is not UTF-8"))?;
    // A JSON string is a JavaScript string literal.
    let literal = |s: &str| Value::from(s).to_string();
    Ok(PLUGIN_TEMPLATE
        .replace("\"__AHP_WRAP_HOOK_EXE__\"", &literal(exe))
        .replace(
            "\"__AHP_WRAP_FRAMEWORK__\"",
            &literal(flavor.shim.framework),
        )
        .replace("\"__AHP_WRAP_AGENT__\"", &literal(flavor.shim.agent))
        .replace("__AHP_WRAP_TIMEOUT_MS__", &timeout_ms.to_string()))
}

/// `path` as a `file://` URL, every byte outside the unreserved set (and `/`) escaped.
pub(crate) fn file_url(flavor: &Flavor, path: &Path) -> Result<String, FrameworkError> {
    let s = path.to_str().ok_or_else(|| {
        flavor
            .shim
            .prepare_error("the run directory's path is not UTF-8")
    })?;
    let mut url = String::from("file://");
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            url.push(char::from(b));
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(url)
}

/// The config content the agent gets: the user's own `OPENCODE_CONFIG_CONTENT` (if any) with
/// our plugin appended to its `plugin` list.
pub(crate) fn config_content(
    flavor: &Flavor,
    user: Option<&str>,
    plugin_url: &str,
) -> Result<String, FrameworkError> {
    let (shim, env) = (flavor.shim, flavor.env_config_content);
    let mut config = match user.map(str::trim).filter(|s| !s.is_empty()) {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Err(shim.prepare_error(format!(
                    "{env} is set but is not a plain JSON object, so ahp-wrap \
                     cannot add its plugin to it"
                )))
            }
        },
    };
    config
        .entry("plugin")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| shim.prepare_error(format!("\"plugin\" in {env} is not a list")))?
        .push(plugin_url.into());
    Ok(Value::Object(config).to_string())
}

/// Why `OPENCODE_PURE` (its value `pure_env`) leaves our plugin unloaded, when it does.
pub(crate) fn pure_refusal(flavor: &Flavor, pure_env: Option<&str>) -> Option<String> {
    let truthy = |v: &str| matches!(v.to_ascii_lowercase().as_str(), "1" | "true");
    pure_env.is_some_and(truthy).then(|| {
        format!(
            "{} is set: {} would load no external plugin, so the run could not be supervised",
            flavor.env_pure, flavor.shim.agent
        )
    })
}

/// Refuses what would leave our plugin unloaded, or the session on another machine.
fn refuse_unsupervised(
    flavor: &Flavor,
    cmd: &AgentCommand,
    pure_env: Option<&str>,
) -> Result<(), FrameworkError> {
    let (shim, agent) = (flavor.shim, flavor.shim.agent);
    if let Some(why) = pure_refusal(flavor, pure_env) {
        return Err(shim.prepare_error(why));
    }
    let args: Vec<&str> = cmd.args.iter().filter_map(|a| a.to_str()).collect();
    for (i, arg) in args.iter().enumerate() {
        if *arg == "--" {
            break;
        }
        if *arg == "--pure" || arg.starts_with("--pure=") && !arg.ends_with("=false") {
            return Err(shim.prepare_error(format!(
                "--pure turns off {agent}'s external plugins, so the run could not be supervised"
            )));
        }
        let first_word = args[..i].iter().all(|a| a.starts_with('-'));
        if *arg == "--attach" || arg.starts_with("--attach=") || (*arg == "attach" && first_word) {
            return Err(shim.prepare_error(format!(
                "attaching to a running {agent} server runs the session in that server, \
                 outside this run, so it could not be supervised"
            )));
        }
    }
    Ok(())
}

pub(crate) fn prepare(
    flavor: &Flavor,
    run: &RunContext,
    cmd: &mut AgentCommand,
) -> Result<(), FrameworkError> {
    let env = flavor.env_config_content;
    refuse_unsupervised(flavor, cmd, std::env::var(flavor.env_pure).ok().as_deref())?;
    // OpenCode never times a plugin hook out; ours gives up (and blocks) after the
    // wrapper's budget plus a margin, so the wrapper always answers first.
    let source = plugin_source(flavor, &run.self_exe, timeout::hook_timeout_ms(run))?;
    let file = run.run_dir.join(format!(
        "ahp-wrap-{}-{}.js",
        flavor.shim.framework,
        run_nonce()
    ));
    std::fs::write(&file, source).map_err(|e| {
        flavor
            .shim
            .prepare_error(format!("cannot write the plugin {}: {e}", file.display()))
    })?;
    let user = std::env::var(env).ok();
    let content = config_content(flavor, user.as_deref(), &file_url(flavor, &file)?)?;
    cmd.env.push((env.into(), content.into()));
    cmd.expect_hook = Some(CANARY.name().to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cmd(args: &[&str]) -> AgentCommand {
        AgentCommand {
            program: "opencode".into(),
            args: args.iter().map(Into::into).collect(),
            ..AgentCommand::default()
        }
    }

    #[test]
    fn the_plugin_gets_the_hook_executable_and_the_timeout() {
        let src = plugin_source(
            &OPENCODE,
            Path::new("/opt/it's \"here\"/ahp-wrap-hook"),
            15_000,
        )
        .unwrap();
        assert!(src.contains(r#"const HOOK_EXE = "/opt/it's \"here\"/ahp-wrap-hook";"#));
        assert!(src.contains("const TIMEOUT_MS = 15000;"));
        assert!(!src.contains("__AHP_WRAP_"));
        for hook in OpenCodeEvent::ALL {
            assert!(src.contains(&format!("\"{}\"", hook.name())), "{hook:?}");
        }
    }

    #[test]
    fn config_content_keeps_the_users_and_adds_the_plugin() {
        let ours = "file:///run/p.js";
        let v: Value =
            serde_json::from_str(&config_content(&OPENCODE, None, ours).unwrap()).unwrap();
        assert_eq!(v, json!({"plugin": [ours]}));
        let user = r#"{"model": "a/b", "plugin": ["mine"]}"#;
        let v: Value =
            serde_json::from_str(&config_content(&OPENCODE, Some(user), ours).unwrap()).unwrap();
        assert_eq!(v, json!({"model": "a/b", "plugin": ["mine", ours]}));
        assert!(config_content(&OPENCODE, Some("// jsonc\n{}"), ours).is_err());
        assert!(config_content(&OPENCODE, Some(r#"{"plugin": "x"}"#), ours).is_err());
        assert_eq!(
            file_url(&OPENCODE, Path::new("/tmp/a b/ü.js")).unwrap(),
            "file:///tmp/a%20b/%C3%BC.js"
        );
    }

    #[test]
    fn runs_that_would_go_unsupervised_are_refused() {
        assert!(refuse_unsupervised(&OPENCODE, &cmd(&["run", "hi"]), None).is_ok());
        assert!(refuse_unsupervised(&OPENCODE, &cmd(&["run", "--", "--pure"]), None).is_ok());
        assert!(refuse_unsupervised(&OPENCODE, &cmd(&["run", "attach"]), None).is_ok());
        assert!(refuse_unsupervised(&OPENCODE, &cmd(&["run", "hi"]), Some("0")).is_ok());
        for bad in [
            &["run", "--pure", "hi"][..],
            &["--attach=http://x", "run"],
            &["attach", "http://x"],
        ] {
            assert!(
                refuse_unsupervised(&OPENCODE, &cmd(bad), None).is_err(),
                "{bad:?}"
            );
        }
        assert!(refuse_unsupervised(&OPENCODE, &cmd(&["run"]), Some("true")).is_err());
    }

    #[test]
    fn prepare_writes_the_plugin_and_sets_the_config_content() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunContext {
            self_exe: "/bin/ahp-wrap-hook".into(),
            run_dir: dir.path().to_owned(),
            hook_budget_ms: 10_000,
            interactive: false,
        };
        let mut c = cmd(&["run", "hi"]);
        prepare(&OPENCODE, &run, &mut c).unwrap();
        let (name, value) = &c.env[0];
        assert_eq!(name, OPENCODE.env_config_content);
        let v: Value = serde_json::from_str(value.to_str().unwrap()).unwrap();
        let url = v["plugin"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .as_str()
            .unwrap();
        let file = url.strip_prefix("file://").unwrap();
        let src = std::fs::read_to_string(file).unwrap();
        assert!(src.contains("const TIMEOUT_MS = 15000;"));
        assert_eq!(c.expect_hook.as_deref(), Some("chat.message"));
    }
}
