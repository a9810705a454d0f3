//! The `qwen` framework: Qwen Code's (Claude-style) hooks, injected for one run as system
//! settings through `QWEN_CODE_SYSTEM_SETTINGS_PATH`.
//!
//! Everything Qwen-specific lives in this folder (`shims/qwen/`): injection
//! (`settings.rs`), payload mapping (`map.rs`), rendering (`render.rs`), real payloads
//! (`samples/`) and the README. Checked on the real CLI by `tests/qwen_e2e.rs`.

mod map;
mod render;
mod settings;

use crate::frameworks::{
    AgentCommand, Framework, FrameworkError, HookContext, Mapped, Rendered, RunContext,
};
use crate::protocol::Verdict;

/// The framework's name on the command line and in `ahp-wrap hook qwen <Event>`.
pub const NAME: &str = "qwen";

/// The Qwen Code hook events we register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QwenEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
    Stop,
    SessionEnd,
}

impl QwenEvent {
    /// Every event we register, in the order Qwen fires them in a simple run.
    pub const ALL: [QwenEvent; 7] = [
        QwenEvent::SessionStart,
        QwenEvent::UserPromptSubmit,
        QwenEvent::PreToolUse,
        QwenEvent::PostToolUse,
        QwenEvent::PostToolUseFailure,
        QwenEvent::Stop,
        QwenEvent::SessionEnd,
    ];

    /// Qwen's name for the event (the key under `hooks` in its settings).
    pub fn name(self) -> &'static str {
        match self {
            QwenEvent::SessionStart => "SessionStart",
            QwenEvent::UserPromptSubmit => "UserPromptSubmit",
            QwenEvent::PreToolUse => "PreToolUse",
            QwenEvent::PostToolUse => "PostToolUse",
            QwenEvent::PostToolUseFailure => "PostToolUseFailure",
            QwenEvent::Stop => "Stop",
            QwenEvent::SessionEnd => "SessionEnd",
        }
    }

    /// Tool events take a `matcher` (a tool-name pattern) in Qwen's settings.
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            QwenEvent::PreToolUse | QwenEvent::PostToolUse | QwenEvent::PostToolUseFailure
        )
    }

    pub fn parse(name: &str) -> Option<QwenEvent> {
        QwenEvent::ALL.into_iter().find(|e| e.name() == name)
    }
}

pub struct Qwen;

impl Framework for Qwen {
    fn name(&self) -> &'static str {
        NAME
    }

    fn executables(&self) -> &'static [&'static str] {
        &["qwen"]
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        settings::prepare(run, cmd)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        map::map(cx, payload)
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Verdict) -> Rendered {
        render::render(cx, event, verdict)
    }

    // `native_ask` stays false: in a headless run Qwen turns "ask" into a deny, and the
    // interactive confirmation path was not proven; the wrapper's own escalation decides.
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn event_names_round_trip_and_qwen_is_detected() {
        for event in QwenEvent::ALL {
            assert!(crate::control::wire::is_word(event.name()));
            assert_eq!(QwenEvent::parse(event.name()), Some(event));
        }
        assert_eq!(QwenEvent::parse("PermissionRequest"), None);
        assert_eq!(crate::frameworks::detect(Path::new("/x/qwen")).name(), NAME);
    }
}
