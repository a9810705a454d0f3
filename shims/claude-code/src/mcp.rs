//! `--wrap-mcp`: each stdio MCP server Claude Code would start in this run is started
//! behind `ahp-wrap mcp --via-run` instead, so that its tool calls are decided and audited
//! by the run, without touching the user's files.
//!
//! Claude Code (checked on 2.1.330) takes, for one server name, the definition of the last
//! `--mcp-config` that names it over every configuration file. So the run reads the servers
//! Claude would start, from the places it reads them, in its order (later wins): the user
//! scope (`mcpServers` of `~/.claude.json`, or `$CLAUDE_CONFIG_DIR/.claude.json`), the
//! project's `.mcp.json` in the working directory, the local scope (`projects[<cwd>]` of
//! the same file), then the user's own `--mcp-config` values in order. It removes the
//! user's `--mcp-config` arguments and passes one file of its own, written in the run
//! directory, where every stdio server is wrapped and every other one is copied as it is.
//! With `--strict-mcp-config`, only the user's `--mcp-config` servers are read, as Claude
//! would. Servers from plugins or managed settings are not seen, so not wrapped.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::SHIM;
use ahp_wrap_adapter::{AgentCommand, FrameworkError, RunContext};

/// MCP servers by name, as a configuration's `mcpServers` holds them.
type Servers = Map<String, Value>;

/// The file written in the run directory.
pub(crate) const MCP_FILE: &str = "claude-code-mcp.json";

/// Puts every stdio server behind `wrapper mcp --via-run`; see the module's doc.
pub(crate) fn wrap(
    run: &RunContext,
    cmd: &mut AgentCommand,
    wrapper: &Path,
) -> Result<(), FrameworkError> {
    let cwd = std::env::current_dir()
        .map_err(|e| SHIM.prepare_error(format!("--wrap-mcp: no working directory ({e})")))?;
    let (flags, kept) = take_flags(&cmd.args, &cwd)?;
    let strict = cmd.args.iter().any(|a| a == "--strict-mcp-config");
    let mut servers = Map::new();
    if !strict {
        for layer in scopes(&config_home(), &cwd, run.interactive, &mut cmd.warnings) {
            servers.extend(layer);
        }
    }
    for layer in flags {
        servers.extend(layer);
    }
    let mut wrapped = Map::new();
    for (name, server) in servers {
        let def = match wrap_one(&name, &server, wrapper) {
            Ok(def) => def,
            Err(why) => {
                cmd.warnings.push(format!(
                    "--wrap-mcp: the MCP server {name:?} is not wrapped ({why}): its calls are not supervised"
                ));
                server
            }
        };
        wrapped.insert(name, def);
    }
    if wrapped.is_empty() {
        cmd.warnings
            .push("--wrap-mcp: Claude Code has no MCP server configured for this directory".into());
    }
    let file = run.run_dir.join(MCP_FILE);
    let body = json!({"mcpServers": wrapped}).to_string();
    std::fs::write(&file, body)
        .map_err(|e| SHIM.prepare_error(format!("cannot write {}: {e}", file.display())))?;
    let mut flag = OsString::from("--mcp-config=");
    flag.push(&file);
    // `--mcp-config` takes several values: the `=` form ends it, so that nothing after it
    // is read as one more configuration.
    cmd.args = std::iter::once(flag).chain(kept).collect();
    Ok(())
}

/// Where Claude Code keeps `.claude.json`.
fn config_home() -> Option<PathBuf> {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .or_else(|| std::env::var_os("HOME"))
        .map(PathBuf::from)
}

/// The servers of each configuration scope, in Claude's order (later wins).
fn scopes(
    home: &Option<PathBuf>,
    cwd: &Path,
    interactive: bool,
    warnings: &mut Vec<String>,
) -> Vec<Map<String, Value>> {
    let state = home
        .as_ref()
        .and_then(|h| read_json(&h.join(".claude.json")))
        .unwrap_or_default();
    let local = state["projects"][cwd.to_string_lossy().as_ref()].clone();
    let mut project = read_json(&cwd.join(".mcp.json"))
        .map(|v| servers_of(&v))
        .unwrap_or_default();
    // A project server loads only once approved; Claude asks in an interactive session,
    // and a wrapped definition would not be asked about.
    let listed = |key: &str, name: &str| {
        local[key]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == name))
    };
    let all = local["enableAllProjectMcpServers"] == true;
    project.retain(|name, _| {
        let approved = all || listed("enabledMcpjsonServers", name);
        let keep = !listed("disabledMcpjsonServers", name) && (approved || !interactive);
        if !keep && !listed("disabledMcpjsonServers", name) {
            warnings.push(format!(
                "--wrap-mcp: the project's MCP server {name:?} is not approved yet, so it is not wrapped: if you approve it in Claude Code, it runs unsupervised"
            ));
        }
        keep
    });
    vec![servers_of(&state), project, servers_of(&local)]
}

/// The user's `--mcp-config` values, read (in order), and the arguments without them.
fn take_flags(
    args: &[OsString],
    cwd: &Path,
) -> Result<(Vec<Servers>, Vec<OsString>), FrameworkError> {
    let (mut values, mut kept) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].to_str().unwrap_or("");
        if arg == "--" {
            kept.extend_from_slice(&args[i..]);
            break;
        }
        if let Some(v) = arg.strip_prefix("--mcp-config=") {
            values.push(v.to_owned());
        } else if arg == "--mcp-config" {
            // Like Claude: every following argument up to the next option is a value.
            while let Some(v) = args.get(i + 1).and_then(|a| a.to_str()) {
                if v.starts_with('-') {
                    break;
                }
                values.push(v.to_owned());
                i += 1;
            }
        } else {
            kept.push(args[i].clone());
        }
        i += 1;
    }
    let layers = values
        .iter()
        .map(|v| user_config(v, cwd))
        .collect::<Result<_, _>>()?;
    Ok((layers, kept))
}

/// One `--mcp-config` value: a JSON string, or a file.
fn user_config(value: &str, cwd: &Path) -> Result<Map<String, Value>, FrameworkError> {
    let parsed = if value.trim_start().starts_with('{') {
        serde_json::from_str(value).ok()
    } else {
        read_json(&cwd.join(value))
    };
    let config = parsed.ok_or_else(|| {
        SHIM.prepare_error(format!(
            "--wrap-mcp: cannot read the --mcp-config {value:?}"
        ))
    })?;
    Ok(servers_of(&config))
}

fn servers_of(config: &Value) -> Map<String, Value> {
    config["mcpServers"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Why an MCP server's definition is not wrapped.
#[derive(Debug, PartialEq, Eq)]
enum Unwrapped {
    /// A server of another transport (`http`, `sse`).
    NotStdio(String),
    /// A stdio server without a `command`.
    NoCommand,
    /// A name `ahp-wrap mcp --name` would refuse.
    NotAPlainWord,
}

impl std::fmt::Display for Unwrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unwrapped::NotStdio(kind) => write!(f, "a {kind} server: only stdio servers can be"),
            Unwrapped::NoCommand => f.write_str("it names no command"),
            Unwrapped::NotAPlainWord => f.write_str("its name is not a plain word"),
        }
    }
}

/// A stdio server's definition, behind `wrapper mcp --via-run`.
fn wrap_one(name: &str, server: &Value, wrapper: &Path) -> Result<Value, Unwrapped> {
    let kind = server["type"].as_str().unwrap_or("stdio");
    if kind != "stdio" {
        return Err(Unwrapped::NotStdio(kind.to_owned()));
    }
    let command = server["command"].as_str().ok_or(Unwrapped::NoCommand)?;
    if !ahp_wrap_adapter::is_word(name) {
        return Err(Unwrapped::NotAPlainWord);
    }
    let mut args = vec![
        json!("mcp"),
        json!("--via-run"),
        json!("--name"),
        json!(name),
        json!("--"),
        json!(command),
    ];
    args.extend(server["args"].as_array().cloned().unwrap_or_default());
    let mut def = server.clone();
    def["type"] = json!("stdio");
    def["command"] = json!(wrapper.display().to_string());
    def["args"] = Value::Array(args);
    Ok(def)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_users_mcp_configs_are_read_in_order_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"mcpServers": {"fs": {"command": "a"}}}"#,
        )
        .unwrap();
        let args = os(&[
            "-p",
            "--mcp-config",
            "a.json",
            r#"{"mcpServers": {"fs": {"command": "b"}, "web": {"type": "http", "url": "u"}}}"#,
            "--verbose",
            "--mcp-config=a.json",
            "hello",
        ]);
        let (layers, kept) = take_flags(&args, dir.path()).unwrap();
        assert_eq!(kept, os(&["-p", "--verbose", "hello"]));
        let commands: Vec<&Value> = layers.iter().map(|l| &l["fs"]["command"]).collect();
        assert_eq!(commands, [&json!("a"), &json!("b"), &json!("a")]);
        assert!(take_flags(&os(&["--mcp-config", "missing.json"]), dir.path()).is_err());
    }

    #[test]
    fn a_stdio_server_runs_behind_the_wrapper_and_keeps_its_env() {
        let server = json!({"command": "npx", "args": ["-y", "srv", "/ws"], "env": {"K": "v"}});
        let def = wrap_one("fs", &server, Path::new("/bin/ahp-wrap")).unwrap();
        assert_eq!(def["command"], "/bin/ahp-wrap");
        assert_eq!(
            def["args"],
            json!([
                "mcp",
                "--via-run",
                "--name",
                "fs",
                "--",
                "npx",
                "-y",
                "srv",
                "/ws"
            ])
        );
        assert_eq!(def["env"], json!({"K": "v"}));
        assert!(wrap_one("web", &json!({"type": "http", "url": "u"}), Path::new("/w")).is_err());
        assert!(wrap_one("a b", &server, Path::new("/w")).is_err());
    }

    #[test]
    fn scopes_are_read_in_claudes_order_and_unapproved_project_servers_left_out() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let state = json!({
            "mcpServers": {"fs": {"command": "user"}},
            "projects": {cwd.path().to_string_lossy(): {
                "mcpServers": {"fs": {"command": "local"}},
                "enabledMcpjsonServers": ["ok"],
                "disabledMcpjsonServers": ["off"],
            }},
        });
        std::fs::write(home.path().join(".claude.json"), state.to_string()).unwrap();
        let project = json!({"mcpServers": {"ok": {"command": "p1"}, "new": {"command": "p2"},
                                            "off": {"command": "p3"}}});
        std::fs::write(cwd.path().join(".mcp.json"), project.to_string()).unwrap();
        let home = Some(home.path().to_owned());
        let mut warnings = Vec::new();
        let layers = scopes(&home, cwd.path(), true, &mut warnings);
        let mut merged = Map::new();
        for l in layers {
            merged.extend(l);
        }
        assert_eq!(merged["fs"]["command"], "local");
        let names: Vec<&String> = merged.keys().collect();
        assert_eq!(names, ["fs", "ok"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("\"new\""));
        // Headless, Claude loads project servers without asking.
        let layers = scopes(&home, cwd.path(), false, &mut Vec::new());
        assert!(layers[1].contains_key("new") && !layers[1].contains_key("off"));
    }
}
