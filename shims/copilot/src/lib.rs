//! The `copilot` shim: GitHub Copilot CLI's command hooks, injected for one run through
//! a private `COPILOT_HOME` overlay that layers over the user's real Copilot home.
//!
//! Everything Copilot-specific lives in this folder (`shims/copilot/`): injection
//! (`home.rs`), payload mapping (`map.rs`), rendering (`render.rs`), real payloads
//! (`samples/`) and the README. Checked on the real CLI by `tests/copilot_e2e.rs`.
//!
//! Must not touch: anything outside `ahp_wrap_adapter` (enforced by a test
//! there), the user's own Copilot home (a run's injection lives in the run directory and on
//! the command line only), and any decision: this shim speaks Copilot CLI's hook contract,
//! the wrapper decides.

#![forbid(unsafe_code)]

mod home;
mod map;
mod render;

use ahp_wrap_adapter::{
    hook_events, AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError,
    HookContext, Mapped, Proven, RunContext, Shim,
};

/// The framework's name on the command line and in `ahp-wrap hook copilot <event>`.
pub const NAME: &str = "copilot";

/// Names the framework in errors and hook commands, and the agent in reasons.
pub const SHIM: Shim = Shim {
    framework: NAME,
    agent: "Copilot CLI",
};

hook_events! {
    /// The Copilot CLI hook events we register (camelCase: Copilot's own payload shape), in
    /// the order Copilot fires them in a simple run. Copilot's hooks take no matcher.
    pub enum CopilotEvent {
        /// A session starts or resumes; sent as `session_start`.
        SessionStart = "sessionStart",
        /// The user submitted a prompt, before any model call; sent as `pre_prompt`
        /// (blocking).
        UserPromptSubmitted = "userPromptSubmitted",
        /// A tool call is about to run; sent as `pre_action` (blocking).
        PreToolUse = "preToolUse",
        /// Copilot would ask the person to permit a tool call; sent as `confirmation`
        /// (blocking).
        PermissionRequest = "permissionRequest",
        /// A tool call succeeded; sent as `post_action` with its result.
        PostToolUse = "postToolUse",
        /// A tool call failed; sent as `post_action` with its error.
        PostToolUseFailure = "postToolUseFailure",
        /// The agent finished its turn; sent as `post_response` (without its text, which
        /// the hook does not carry).
        AgentStop = "agentStop",
        /// The session ends; sent as `session_end`.
        SessionEnd = "sessionEnd",
    }
}

/// The Copilot CLI shim: hooks injected for one run through a private `COPILOT_HOME`
/// overlay.
pub struct Copilot;

impl Framework for Copilot {
    fn packages(&self) -> &'static [&'static str] {
        &["@github/copilot"]
    }

    fn proven(&self) -> Option<Proven> {
        Some(Proven::pinned(include_str!(
            "../../../tests/copilot/VERSION"
        )))
    }

    fn own_env(&self, _args: &[std::ffi::OsString]) -> Vec<String> {
        // Its GitHub login (it reads these three, in this order), and a provider's key.
        [
            "COPILOT_GITHUB_TOKEN",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "COPILOT_PROVIDER_API_KEY",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        &[
            "api.githubcopilot.com",
            "*.githubcopilot.com",
            "api.github.com",
            "github.com",
        ]
    }

    // Copilot CLI reads a repository's `.github` instructions, agents, prompts, skills and
    // hooks, and `AGENTS.md` (docs.github.com/copilot/how-tos/use-copilot-agents/use-copilot-cli).
    fn instruction_files(&self) -> &'static [&'static str] {
        &[
            ".github/copilot-instructions.md",
            ".github/instructions/**",
            ".github/agents/**",
            ".github/prompts/**",
            ".github/skills/**",
            ".github/hooks/**",
            "AGENTS.md",
        ]
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        &["COPILOT_PROVIDER_BASE_URL"]
    }

    fn agent_files(&self, user_home: &std::path::Path) -> AgentFiles {
        // Its session state, logs and config (it writes that itself); never its hooks or
        // MCP servers.
        let env = std::env::var(home::ENV_HOME).ok();
        let Ok(dir) = home::real_home(env.as_deref(), Some(user_home)) else {
            return AgentFiles::default();
        };
        // What a later session obeys: its hooks, MCP servers, instructions, custom agents
        // and skills, here and in the project's `.github`.
        AgentFiles {
            mixed: Vec::new(),
            protected: vec![
                dir.join("mcp-config.json"),
                dir.join("copilot-instructions.md"),
            ],
            protected_dirs: [home::HOOKS_DIR, "agents", "skills"]
                .iter()
                .map(|d| dir.join(d))
                .collect(),
            project: [
                "copilot-instructions.md",
                "instructions",
                "agents",
                "skills",
                "hooks",
                "prompts",
            ]
            .iter()
            .map(|f| std::path::Path::new(".github").join(f))
            .collect(),
            state: vec![dir],
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn executables(&self) -> &'static [&'static str] {
        &["copilot"]
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        home::prepare(run, cmd)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        map::map(cx, payload)
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply {
        render::render(cx, event, verdict)
    }

    // `native_ask` stays false: headless runs (`-p`) have nobody to ask, and Copilot's
    // interactive "ask" path was not proven; the wrapper's own escalation decides.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_round_trip_and_copilot_is_named_by_its_executable() {
        for event in CopilotEvent::ALL {
            assert!(ahp_wrap_adapter::is_word(event.name()));
            assert_eq!(CopilotEvent::parse(event.name()), Some(event));
        }
        assert_eq!(CopilotEvent::parse("PreToolUse"), None);
        assert!(Copilot.executables().contains(&"copilot"));
    }
}
