//! The `codex` shim: the OpenAI Codex CLI's hooks, injected for one run with `-c`.
//!
//! Everything Codex-specific lives in this folder (`shims/codex/`): reading the user's
//! command line (`args.rs`), the injection and hook trust (`config.rs`), the payload mapping (`map.rs`), the rendering of decisions
//! (`render.rs`), real hook payloads (`samples/`) and the README with the contract we
//! verified on the real CLI (see also `tests/codex_e2e.rs`).
//!
//! Must not touch: anything outside `ahp_wrap_adapter` (enforced by a test
//! there), the user's own config files (a run's injection lives in the run directory and on
//! the command line only), and any decision: this shim speaks Codex's hook contract,
//! the wrapper decides.

#![forbid(unsafe_code)]

mod args;
mod config;
mod map;
mod render;

pub use config::{trust_hash, SESSION_FLAGS_SOURCE};

use ahp_wrap_adapter::{
    hook_events, AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError,
    HookContext, KeyRule, Mapped, Proven, RunContext, Shim, StateFile, StateFormat, Treatment,
};

/// The framework's name on the command line and in `ahp-wrap hook codex <Event>`.
pub const NAME: &str = "codex";

/// Names the framework in errors and hook commands, and the agent in reasons.
pub const SHIM: Shim = Shim {
    framework: NAME,
    agent: "Codex",
};

hook_events! {
    /// The Codex hook events we register (in the order Codex fires them in a simple run).
    /// Tool events take a `matcher` (a regex on the tool name) in Codex's config.
    pub enum CodexEvent {
        /// A session starts or resumes; sent as `session_start`.
        SessionStart = "SessionStart",
        /// The user submitted a prompt, before the model sees it; sent as `pre_prompt`
        /// (blocking).
        UserPromptSubmit = "UserPromptSubmit",
        /// A tool call is about to run; sent as `pre_action` (blocking).
        PreToolUse = "PreToolUse" [tool],
        /// Codex would ask the person to approve a tool call; sent as `confirmation`
        /// (blocking).
        PermissionRequest = "PermissionRequest" [tool],
        /// A tool call completed; sent as `post_action` with its output.
        PostToolUse = "PostToolUse" [tool],
        /// Codex finished its response; sent as `post_response`.
        Stop = "Stop",
        /// The session ends; sent as `session_end`.
        SessionEnd = "SessionEnd",
    }
}

impl CodexEvent {
    /// The event's label in Codex's hook-trust keys and hashes (`hooks.state`).
    pub fn label(self) -> &'static str {
        match self {
            CodexEvent::SessionStart => "session_start",
            CodexEvent::UserPromptSubmit => "user_prompt_submit",
            CodexEvent::PreToolUse => "pre_tool_use",
            CodexEvent::PermissionRequest => "permission_request",
            CodexEvent::PostToolUse => "post_tool_use",
            CodexEvent::Stop => "stop",
            CodexEvent::SessionEnd => "session_end",
        }
    }
}

/// The Codex shim: hooks injected for one run with `-c` overrides.
pub struct Codex;

impl Framework for Codex {
    fn packages(&self) -> &'static [&'static str] {
        &["@openai/codex"]
    }

    fn proven(&self) -> Option<Proven> {
        Some(Proven::pinned(include_str!("../../../tests/codex/VERSION")))
    }

    fn own_env(&self, args: &[std::ffi::OsString]) -> Vec<String> {
        // Its API key, and the variable each model provider of the user's names for its key
        // (`env_key`, in config.toml or a `-c` override).
        let dir = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".codex")));
        let config = dir
            .and_then(|d| std::fs::read_to_string(d.join("config.toml")).ok())
            .unwrap_or_default();
        let mut own = vec!["OPENAI_API_KEY".to_owned(), "CODEX_API_KEY".to_owned()];
        own.extend(provider_env_keys(&config, args));
        own
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        // Its model and login (api.openai.com, auth.openai.com), ChatGPT sign-in's backend
        // (chatgpt.com) and the experiments it asks for at start (ab.chatgpt.com). Its native
        // binary is a child of the npm package's Node launcher, so these connections are not
        // the agent process's own: each host must be named.
        &[
            "api.openai.com",
            "chatgpt.com",
            "ab.chatgpt.com",
            "auth.openai.com",
        ]
    }

    // Codex runs each command in its sandbox (bubblewrap on Linux) unless told otherwise:
    // `--dangerously-bypass-approvals-and-sandbox`, or the `danger-full-access` mode from
    // `--sandbox`, a `-c sandbox_mode=` override or its config.toml.
    fn own_sandbox(
        &self,
        args: &[std::ffi::OsString],
        home: &std::path::Path,
        _: &std::path::Path,
    ) -> bool {
        let dir = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map_or_else(|| home.join(".codex"), std::path::PathBuf::from);
        let configured = std::fs::read_to_string(dir.join("config.toml"))
            .ok()
            .and_then(|text| text.parse::<toml::Table>().ok())
            .and_then(|t| t.get("sandbox_mode")?.as_str().map(str::to_owned));
        sandboxed(configured, args)
    }

    // Codex reads `AGENTS.md` from the repository's top down to its working directory, and a
    // project's `.codex` (developers.openai.com/codex/guides/agents-md).
    fn instruction_files(&self) -> &'static [&'static str] {
        &[".codex/**", "AGENTS.md", "AGENTS.override.md"]
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        &["OPENAI_BASE_URL", "CODEX_OSS_BASE_URL"]
    }

    fn agent_files(&self, home: &std::path::Path) -> AgentFiles {
        // Sessions, logs and history; never its configuration or hooks.
        let dir = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map_or_else(|| home.join(".codex"), std::path::PathBuf::from);
        // Its config.toml is both the user's configuration and where Codex saves the trust
        // answer for a folder (and a few notices): written in place (Codex replaces it by a
        // rename), its changes to anything else undone at the end.
        AgentFiles {
            mixed: vec![StateFile {
                path: dir.join("config.toml"),
                format: StateFormat::Toml,
                rules: config_rules(),
                other: Treatment::Guarded,
                through: None,
                lock: None,
            }],
            // What a later session obeys: its instructions, saved prompts, command rules
            // (where "always allow" lands), skills and hooks; in a project, all of `.codex`.
            protected: ["hooks.json", "AGENTS.md", "AGENTS.override.md"]
                .iter()
                .map(|f| dir.join(f))
                .collect(),
            protected_dirs: ["prompts", "rules", "skills"]
                .iter()
                .map(|d| dir.join(d))
                .collect(),
            project: vec![".codex".into()],
            state: vec![dir],
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn adapters(&self) -> &'static [&'static str] {
        &["codex-acp"]
    }

    fn executables(&self) -> &'static [&'static str] {
        &["codex", "codex.js"]
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        config::prepare(run, cmd)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        map::map(cx, payload)
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply {
        render::render(cx, event, verdict)
    }

    // `native_ask` stays false: Codex treats a hook's "ask" as a failed hook and runs the
    // tool (fails open), so an escalation always goes the wrapper's way (terminal prompt,
    // else the fail mode).
}

/// The keys of Codex's `config.toml` that are its own bookkeeping: this project's trust
/// answer, the TUI's notices and what `/model` chose. Everything else (MCP servers,
/// `notify`, sandbox and approval settings, providers, profiles, other projects' trust) is
/// the user's configuration.
fn config_rules() -> Vec<KeyRule> {
    [
        "projects.{workspace}.trust_level",
        "notice",
        "tui.screen_reader_detection_done",
        "tui.model_availability_nux",
        "model",
        "model_reasoning_effort",
    ]
    .into_iter()
    .map(|key| KeyRule::new(key, Treatment::Own))
    .collect()
}
/// Whether Codex started with `args` runs its commands in its sandbox, its config.toml's
/// `sandbox_mode` being `configured`: the command line decides over the file.
fn sandboxed(configured: Option<String>, args: &[std::ffi::OsString]) -> bool {
    let mut mode = configured;
    let mut args = args.iter().filter_map(|a| a.to_str());
    while let Some(arg) = args.next() {
        match arg {
            "--dangerously-bypass-approvals-and-sandbox" | "--yolo" => return false,
            "-s" | "--sandbox" => mode = args.next().map(str::to_owned),
            "-c" | "--config" => {
                let Some((key, value)) = args.next().and_then(|o| o.split_once('=')) else {
                    continue;
                };
                if key.trim() == "sandbox_mode" {
                    mode = args::parse_value(value.trim()).as_str().map(str::to_owned);
                }
            }
            _ => {
                if let Some(v) = arg.strip_prefix("--sandbox=") {
                    mode = Some(v.to_owned());
                }
            }
        }
    }
    mode.as_deref() != Some("danger-full-access")
}

/// The variables the user's model providers name for their keys (`env_key = "NAME"`), in
/// `config` (config.toml's text) or in `-c`/`--config` overrides among `args`.
#[allow(clippy::expect_used, reason = "a literal pattern of ours")]
fn provider_env_keys(config: &str, args: &[std::ffi::OsString]) -> Vec<String> {
    let pattern =
        regex::Regex::new(r#"env_key\s*=\s*["']([A-Za-z0-9_]+)["']"#).expect("a valid pattern");
    let overrides = args.iter().filter_map(|a| a.to_str());
    std::iter::once(config)
        .chain(overrides)
        .flat_map(|text| {
            pattern
                .captures_iter(text)
                .map(|c| c[1].to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn codex_is_sandboxed_unless_told_otherwise() {
        let on = |configured: Option<&str>, args: &[&str]| {
            let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            sandboxed(configured.map(str::to_owned), &args)
        };
        assert!(on(None, &["exec", "fix it"]));
        assert!(on(None, &["--full-auto", "exec", "x"]));
        assert!(on(None, &["exec", "--sandbox", "read-only", "x"]));
        assert!(!on(
            None,
            &["exec", "--dangerously-bypass-approvals-and-sandbox", "x"]
        ));
        assert!(!on(None, &["-s", "danger-full-access"]));
        assert!(!on(None, &["--sandbox=danger-full-access"]));
        assert!(!on(None, &["-c", "sandbox_mode=\"danger-full-access\""]));
        assert!(!on(Some("danger-full-access"), &["exec", "x"]));
        assert!(on(
            Some("danger-full-access"),
            &["--sandbox", "workspace-write"]
        ));
        assert!(on(Some("workspace-write"), &[]));
    }

    #[test]
    fn hook_names_round_trip() {
        for event in CodexEvent::ALL {
            assert!(ahp_wrap_adapter::is_word(event.name()));
            assert_eq!(CodexEvent::parse(event.name()), Some(event));
        }
        assert_eq!(CodexEvent::parse("PreCompact"), None);
    }

    #[test]
    fn never_asks_natively_and_is_named_by_its_executable() {
        let cx = HookContext {
            hook: "PreToolUse",
            cwd: Path::new("/"),
            interactive: true,
        };
        assert!(!Codex.native_ask(&cx));
        assert!(Codex.executables().contains(&"codex"));
    }
}
