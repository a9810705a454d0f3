//! The `claude-code` shim: Claude Code's hooks, injected for one run with `--settings`.
//!
//! Everything Claude-specific lives in this folder (`shims/claude-code/`): the injection
//! (`settings.rs`), the payload mapping (`map.rs`), the rendering of decisions (`render.rs`),
//! real hook payloads (`samples/`) and the README with the mapping table. The hook contract
//! was checked on the real CLI (see the README and `tests/claude_code_e2e.rs`).
//!
//! Must not touch: anything outside `ahp_wrap_adapter` (enforced by a test
//! there), the user's own settings files (a run's injection lives in the run directory and on
//! the command line only), and any decision: this shim speaks Claude Code's hook contract,
//! the wrapper decides.

#![forbid(unsafe_code)]

mod map;
mod mcp;
mod render;
mod settings;
mod state;

use ahp_wrap_adapter::{
    hook_events, AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError,
    HookContext, Mapped, Proven, RunContext, Shim, StateFile, StateFormat, Treatment,
};

/// The files of Claude's configuration directory (and of a project's `.claude`) that a
/// later session obeys.
const INSTRUCTION_FILES: &[&str] = &["settings.json", "settings.local.json", "CLAUDE.md"];

/// Its directories of instructions and code, in both places.
const INSTRUCTION_DIRS: &[&str] = &["commands", "agents", "skills", "output-styles", "hooks"];

/// The framework's name on the command line and in `ahp-wrap hook claude-code <Event>`.
pub const NAME: &str = "claude-code";

/// Suffix of a registered hook name when Claude runs headless (`-p`): there is no person
/// to answer Claude's own "ask", so an escalation follows the wrapper's fail mode.
const HEADLESS_SUFFIX: &str = ".print";

/// Names the framework in errors and hook commands, and the agent in reasons.
pub const SHIM: Shim = Shim {
    framework: NAME,
    agent: "Claude Code",
};

hook_events! {
    /// The Claude Code hook events we register (in the order Claude fires them in a simple
    /// run). Tool events take a `matcher` (a tool-name pattern) in Claude's settings.
    pub enum ClaudeEvent {
        /// A session starts or resumes; sent as `session_start`.
        SessionStart = "SessionStart",
        /// The user submitted a prompt, before the model sees it; sent as `pre_prompt`
        /// (blocking).
        UserPromptSubmit = "UserPromptSubmit",
        /// A tool call is about to run; sent as `pre_action` (blocking).
        PreToolUse = "PreToolUse" [tool],
        /// Claude would ask the person to permit a tool call; sent as `confirmation`
        /// (blocking).
        PermissionRequest = "PermissionRequest" [tool],
        /// A tool call succeeded; sent as `post_action` with its output.
        PostToolUse = "PostToolUse" [tool],
        /// A tool call failed; sent as `post_action` with its error.
        PostToolUseFailure = "PostToolUseFailure" [tool],
        /// Claude finished its response; sent as `post_response`.
        Stop = "Stop",
        /// A turn ended on a failure instead of a response; sent as `error`.
        StopFailure = "StopFailure",
        /// A sub-agent starts; sent as `session_start` (`source: "subagent"`).
        SubagentStart = "SubagentStart",
        /// A sub-agent finished; sent as `post_response`.
        SubagentStop = "SubagentStop",
        /// The session ends; sent as `session_end`.
        SessionEnd = "SessionEnd",
    }
}

/// A registered hook name, `<Event>` or `<Event>.print`, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookName {
    /// The Claude Code event, the name without its suffix.
    pub event: ClaudeEvent,
    /// Claude runs with `-p`: its own "ask" cannot reach a person.
    pub headless: bool,
}

impl HookName {
    /// Takes a hook name apart; `None` when, without its `.print` suffix, it names no
    /// event we register.
    pub fn parse(hook: &str) -> Option<HookName> {
        let (event, headless) = match hook.strip_suffix(HEADLESS_SUFFIX) {
            Some(event) => (event, true),
            None => (hook, false),
        };
        ClaudeEvent::parse(event).map(|event| HookName { event, headless })
    }

    /// The name as registered on the hook's command line.
    pub fn registered(event: ClaudeEvent, headless: bool) -> String {
        let suffix = if headless { HEADLESS_SUFFIX } else { "" };
        format!("{}{suffix}", event.name())
    }
}

/// The Claude Code shim: hooks injected for one run with `--settings`.
pub struct ClaudeCode;

impl Framework for ClaudeCode {
    fn packages(&self) -> &'static [&'static str] {
        &["@anthropic-ai/claude-code"]
    }

    fn proven(&self) -> Option<Proven> {
        Some(Proven::pinned(include_str!(
            "../../../tests/claude-code/VERSION"
        )))
    }

    fn own_env(&self, _args: &[std::ffi::OsString]) -> Vec<String> {
        // Its API key or login token; a cloud provider's credentials when it is told to use
        // that provider.
        let mut own: Vec<&str> = vec![
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ];
        let set = |v: &str| std::env::var_os(v).is_some_and(|v| !v.is_empty() && v != "0");
        if set("CLAUDE_CODE_USE_BEDROCK") {
            own.extend(["AWS_*", "AWS_BEARER_TOKEN_BEDROCK"]);
        }
        if set("CLAUDE_CODE_USE_VERTEX") {
            own.push("GOOGLE_APPLICATION_CREDENTIALS");
        }
        own.into_iter().map(str::to_owned).collect()
    }

    fn own_sandbox(
        &self,
        args: &[std::ffi::OsString],
        home: &std::path::Path,
        workspace: &std::path::Path,
    ) -> bool {
        settings::sandbox_enabled(args, home, workspace)
    }

    // Its API, its feature flags, its sign-in (code.claude.com/docs/en/network-config). Not
    // its error reports' and telemetry's intakes (sentry.io, Datadog's): any customer of
    // theirs can post there with a key of their own, so naming them would open a way out
    // for every process of the tree. Claude's own process reaches them all the same (the
    // agent's own connections pass the `unknown` treatment).
    fn model_hosts(&self) -> &'static [&'static str] {
        &[
            "api.anthropic.com",
            "statsig.anthropic.com",
            "console.anthropic.com",
            "platform.claude.com",
            "claude.ai",
        ]
    }

    // Claude reads `.claude/settings*.json` from the directory it starts in and `.mcp.json`
    // and `CLAUDE.md` from every directory up to the repository's top (code.claude.com/docs/en/settings,
    // /memory, /mcp): at any depth.
    fn instruction_files(&self) -> &'static [&'static str] {
        &[
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".claude/CLAUDE.md",
            ".claude/commands/**",
            ".claude/agents/**",
            ".claude/skills/**",
            ".claude/output-styles/**",
            ".claude/hooks/**",
            ".mcp.json",
            "CLAUDE.md",
            "CLAUDE.local.md",
        ]
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        &[
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_BEDROCK_BASE_URL",
            "ANTHROPIC_VERTEX_BASE_URL",
        ]
    }

    fn agent_files(&self, home: &std::path::Path) -> AgentFiles {
        // Sessions, projects, todos, its plugins' data; never its settings, hooks, plugins, or
        // what a later session obeys (its memory, commands, agents, skills, output styles),
        // here or in the project's `.claude`. Its `.claude.json` (in the home directory
        // itself, or in CLAUDE_CONFIG_DIR) mixes its bookkeeping with MCP servers and grants:
        // written through a private copy, merged key by key.
        let custom = std::env::var_os("CLAUDE_CONFIG_DIR")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from);
        let config = custom.clone().unwrap_or_else(|| home.join(".claude"));
        let claude_json = custom
            .unwrap_or_else(|| home.to_owned())
            .join(".claude.json");
        let dirs = INSTRUCTION_DIRS.iter().chain(["plugins"].iter());
        AgentFiles {
            protected: INSTRUCTION_FILES.iter().map(|f| config.join(f)).collect(),
            protected_dirs: dirs.map(|d| config.join(d)).collect(),
            project: INSTRUCTION_FILES
                .iter()
                .chain(INSTRUCTION_DIRS)
                .map(|f| std::path::Path::new(".claude").join(f))
                .collect(),
            state: vec![config.join("plugins/store"), config],
            mixed: vec![StateFile {
                through: None,
                lock: Some(claude_json.with_file_name(".claude.json.lock")),
                path: claude_json,
                format: StateFormat::Json,
                rules: state::claude_json_rules(),
                other: Treatment::Own,
            }],
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn adapters(&self) -> &'static [&'static str] {
        &["claude-agent-acp", "claude-code-acp"]
    }

    fn executables(&self) -> &'static [&'static str] {
        &["claude", "claude.exe"]
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        settings::prepare(run, cmd)
    }

    fn wrap_mcp(
        &self,
        run: &RunContext,
        cmd: &mut AgentCommand,
        wrapper: &std::path::Path,
    ) -> Result<(), FrameworkError> {
        mcp::wrap(run, cmd, wrapper)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        map::map(cx, payload)
    }

    /// Claude's own exit hint (`claude --resume <id>`) resumes the session unsupervised.
    fn resume_hint(&self, framework_session: &str) -> Option<String> {
        let id = framework_session;
        let id_is_plain = id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        id_is_plain.then(|| {
            format!(
                "to resume this session supervised: ahp-wrap -- claude --resume {id} \
                 (`claude --resume {id}` alone runs it without ahp-wrap)"
            )
        })
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply {
        render::render(cx, event, verdict)
    }

    /// Claude has its own permission prompt for tool calls, but only when it is interactive:
    /// in `-p` an "ask" is a deny, so there the wrapper's own escalation path decides.
    fn native_ask(&self, cx: &HookContext<'_>) -> bool {
        cx.interactive
            && HookName::parse(cx.hook).is_some_and(|h| {
                !h.headless
                    && matches!(
                        h.event,
                        ClaudeEvent::PreToolUse | ClaudeEvent::PermissionRequest
                    )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn hook_names_round_trip() {
        for event in ClaudeEvent::ALL {
            for headless in [false, true] {
                let name = HookName::registered(event, headless);
                assert!(ahp_wrap_adapter::is_word(&name), "{name}");
                assert_eq!(HookName::parse(&name), Some(HookName { event, headless }));
            }
        }
        assert_eq!(HookName::parse("MessageDisplay"), None);
        assert_eq!(HookName::parse("PreToolUse.x"), None);
    }

    #[test]
    fn native_ask_only_for_interactive_tool_permission() {
        let cx = |hook, interactive| HookContext {
            hook,
            cwd: Path::new("/"),
            interactive,
        };
        assert!(ClaudeCode.native_ask(&cx("PreToolUse", true)));
        assert!(ClaudeCode.native_ask(&cx("PermissionRequest", true)));
        assert!(!ClaudeCode.native_ask(&cx("PreToolUse.print", true)));
        assert!(!ClaudeCode.native_ask(&cx("PreToolUse", false)));
        assert!(!ClaudeCode.native_ask(&cx("UserPromptSubmit", true)));
    }

    #[test]
    fn named_by_its_executable() {
        assert!(ClaudeCode.executables().contains(&"claude"));
    }
}
