//! The `codex` framework: the OpenAI Codex CLI's hooks, injected for one run with `-c`.
//!
//! Everything Codex-specific lives in this folder (`shims/codex/`): the injection and hook
//! trust (`config.rs`), the payload mapping (`map.rs`), the rendering of decisions
//! (`render.rs`), real hook payloads (`samples/`) and the README with the contract we
//! verified on the real CLI (see also `tests/codex_e2e.rs`).

mod config;
mod map;
mod render;

pub use config::{trust_hash, SESSION_FLAGS_SOURCE};

use crate::frameworks::{
    AgentCommand, Framework, FrameworkError, HookContext, Mapped, Rendered, RunContext,
};
use crate::protocol::Verdict;

/// The framework's name on the command line and in `ahp-wrap hook codex <Event>`.
pub const NAME: &str = "codex";

/// The Codex hook events we register, and how each one is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodexEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PermissionRequest,
    PostToolUse,
    Stop,
    SessionEnd,
}

impl CodexEvent {
    /// Every event we register, in the order Codex fires them in a simple run.
    pub const ALL: [CodexEvent; 7] = [
        CodexEvent::SessionStart,
        CodexEvent::UserPromptSubmit,
        CodexEvent::PreToolUse,
        CodexEvent::PermissionRequest,
        CodexEvent::PostToolUse,
        CodexEvent::Stop,
        CodexEvent::SessionEnd,
    ];

    /// Codex's name for the event (the key under `hooks` in its config).
    pub fn name(self) -> &'static str {
        match self {
            CodexEvent::SessionStart => "SessionStart",
            CodexEvent::UserPromptSubmit => "UserPromptSubmit",
            CodexEvent::PreToolUse => "PreToolUse",
            CodexEvent::PermissionRequest => "PermissionRequest",
            CodexEvent::PostToolUse => "PostToolUse",
            CodexEvent::Stop => "Stop",
            CodexEvent::SessionEnd => "SessionEnd",
        }
    }

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

    /// Tool events take a `matcher` (a regex on the tool name) in Codex's config.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            CodexEvent::PreToolUse | CodexEvent::PermissionRequest | CodexEvent::PostToolUse
        )
    }

    pub fn parse(name: &str) -> Option<CodexEvent> {
        CodexEvent::ALL.into_iter().find(|e| e.name() == name)
    }
}

pub struct Codex;

impl Framework for Codex {
    fn name(&self) -> &'static str {
        NAME
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

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Verdict) -> Rendered {
        render::render(cx, event, verdict)
    }

    // `native_ask` stays false: Codex treats a hook's "ask" as a failed hook and runs the
    // tool (fails open), so an escalation always goes the wrapper's way (terminal prompt,
    // else the fail mode).
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn hook_names_round_trip() {
        for event in CodexEvent::ALL {
            assert!(crate::control::wire::is_word(event.name()));
            assert_eq!(CodexEvent::parse(event.name()), Some(event));
        }
        assert_eq!(CodexEvent::parse("PreCompact"), None);
    }

    #[test]
    fn never_asks_natively_and_is_detected_by_name() {
        let cx = HookContext {
            hook: "PreToolUse",
            cwd: Path::new("/"),
            interactive: true,
        };
        assert!(!Codex.native_ask(&cx));
        let fw = crate::frameworks::detect(Path::new("/usr/local/bin/codex"));
        assert_eq!(fw.name(), NAME);
    }
}
