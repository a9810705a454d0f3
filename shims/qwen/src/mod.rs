//! The `qwen` shim: Qwen Code's (Claude-style) hooks, injected for one run as system
//! settings through `QWEN_CODE_SYSTEM_SETTINGS_PATH`.
//!
//! Everything Qwen-specific lives in this folder (`shims/qwen/`): injection
//! (`settings.rs`), payload mapping (`map.rs`), rendering (`render.rs`), real payloads
//! (`samples/`) and the README. Checked on the real CLI by `tests/qwen_e2e.rs`.
//!
//! Must not touch: anything outside `crate::frameworks::adapter` (enforced by a test
//! there), the user's own settings files (a run's injection lives in the run directory and on
//! the command line only), and any decision: this shim speaks Qwen Code's hook contract,
//! the wrapper decides.

mod map;
mod render;
mod settings;

use crate::frameworks::adapter::{
    hook_events, AgentCommand, AgentFiles, Final, Framework, FrameworkError, HookContext, Mapped,
    Proven, Rendered, RunContext, Shim,
};

/// The framework's name on the command line and in `ahp-wrap hook qwen <Event>`.
pub const NAME: &str = "qwen";

/// Names the framework in errors and hook commands, and the agent in reasons.
pub const SHIM: Shim = Shim {
    framework: NAME,
    agent: "Qwen Code",
};

hook_events! {
    /// The Qwen Code hook events we register (in the order Qwen fires them in a simple
    /// run). Tool events take a `matcher` (a tool-name pattern) in Qwen's settings.
    pub enum QwenEvent {
        SessionStart = "SessionStart",
        UserPromptSubmit = "UserPromptSubmit",
        PreToolUse = "PreToolUse" [tool],
        PostToolUse = "PostToolUse" [tool],
        PostToolUseFailure = "PostToolUseFailure" [tool],
        Stop = "Stop",
        SessionEnd = "SessionEnd",
    }
}

pub struct Qwen;

impl Framework for Qwen {
    fn packages(&self) -> &'static [&'static str] {
        &["@qwen-code/qwen-code"]
    }

    fn proven(&self) -> Option<Proven> {
        Some(Proven::pinned(include_str!("../../../tests/qwen/VERSION")))
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        &[
            "dashscope.aliyuncs.com",
            "dashscope-intl.aliyuncs.com",
            "chat.qwen.ai",
            "portal.qwen.ai",
        ]
    }

    fn agent_files(&self, home: &std::path::Path) -> AgentFiles {
        // Chats, history and its temp files; never its settings or extensions.
        let dir = home.join(".qwen");
        AgentFiles {
            protected: vec![dir.join("settings.json"), dir.join("extensions")],
            state: vec![dir],
        }
    }

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

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> Rendered {
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
            assert!(crate::frameworks::adapter::testing::is_word(event.name()));
            assert_eq!(QwenEvent::parse(event.name()), Some(event));
        }
        assert_eq!(QwenEvent::parse("PermissionRequest"), None);
        assert_eq!(
            crate::frameworks::adapter::testing::detect(Path::new("/x/qwen")).name(),
            NAME
        );
    }
}
