//! Decisions rendered in Qwen Code's (Claude-style) hook contract.
//!
//! Qwen Code 0.24.4 applies a PreToolUse `updatedInput` nowhere on the path a tool call
//! takes in a headless run, so a `modify` is rendered as a deny that says why: the
//! unmodified command must never run in its place.

use super::{QwenEvent, SHIM};
use crate::frameworks::adapter::shared::output::{
    decision, notification, permission_decision, stderr_exit,
};
use crate::frameworks::adapter::{Final, HookContext, Mapped, Rendered};

/// Exit code with which Qwen blocks on stderr text: only for hook names we do not know.
const EXIT_BLOCK: i32 = 2;
/// Exit code of a non-blocking hook error: Qwen goes on.
const EXIT_HOOK_ERROR: i32 = 1;
/// What the model reads when a harness asked for a modified tool call.
pub const MODIFY_UNSUPPORTED: &str = "ahp-wrap blocked this tool call: the harness asked to modify it, and Qwen Code cannot run a modified tool call, so it was not run at all";

pub fn render(cx: &HookContext<'_>, _event: Option<&Mapped>, verdict: &Final) -> Rendered {
    let Some(event) = QwenEvent::parse(cx.hook) else {
        return stderr_exit(&SHIM.unknown_hook_reason(verdict), EXIT_BLOCK);
    };
    match event {
        QwenEvent::PreToolUse => pre_tool_use(verdict),
        QwenEvent::UserPromptSubmit => match verdict {
            _ if verdict.replacement().is_some() => decision(
                "block",
                "ahp-wrap blocked this prompt because the harness rewrote it, and Qwen Code cannot run a rewritten prompt",
            ),
            Final::Allow { .. } => Rendered::default(),
            Final::Block { reason } => decision("block", reason),
            _ => decision("block", &unexpected(verdict)),
        },
        QwenEvent::PostToolUse | QwenEvent::PostToolUseFailure => match verdict {
            // Only a failed relay blocks a notification: the model hears it.
            Final::Block { reason } => decision("block", reason),
            _ => Rendered::default(),
        },
        // Never a `decision: block` here: on Stop it would make the agent go on.
        QwenEvent::SessionStart | QwenEvent::Stop | QwenEvent::SessionEnd => {
            notification(verdict, EXIT_HOOK_ERROR)
        }
    }
}

fn pre_tool_use(verdict: &Final) -> Rendered {
    let deny = |reason: &str| permission_decision("PreToolUse", "deny", reason, None);
    match verdict {
        _ if verdict.replacement().is_some() => deny(MODIFY_UNSUPPORTED),
        // No opinion or explicit: Qwen's own approval mode stays in charge.
        Final::Allow { .. } => Rendered::default(),
        Final::Block { reason } => deny(reason),
        Final::Ask { .. } | Final::Modify { .. } => deny(&unexpected(verdict)),
    }
}

fn unexpected(verdict: &Final) -> String {
    SHIM.unexpected(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frameworks::adapter::testing::block;
    use serde_json::{json, Value};

    fn out(hook: &str, verdict: &Final) -> (Option<Value>, i32) {
        crate::frameworks::adapter::testing::out(render, hook, verdict)
    }

    #[test]
    fn pre_tool_use_denies_blocks_and_modifications() {
        assert_eq!(out("PreToolUse", &Final::no_opinion()), (None, 0));
        let (v, code) = out("PreToolUse", &block("no"));
        assert_eq!(code, 0);
        assert_eq!(
            v.unwrap()["hookSpecificOutput"],
            json!({"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"})
        );
        let (v, _) = out(
            "PreToolUse",
            &Final::Modify {
                modified_payload: json!({"command": "ls"}),
            },
        );
        let o = &v.unwrap()["hookSpecificOutput"];
        assert_eq!(o["permissionDecision"], "deny");
        assert_eq!(o["permissionDecisionReason"], MODIFY_UNSUPPORTED);
    }

    #[test]
    fn prompts_block_and_notifications_never_steer() {
        assert_eq!(
            out("UserPromptSubmit", &block("P")),
            (Some(json!({"decision": "block", "reason": "P"})), 0)
        );
        assert_eq!(out("UserPromptSubmit", &Final::no_opinion()), (None, 0));
        for hook in ["Stop", "SessionEnd", "SessionStart"] {
            assert_eq!(out(hook, &block("down")), (None, EXIT_HOOK_ERROR), "{hook}");
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0), "{hook}");
        }
        assert_eq!(
            out("PostToolUse", &block("down")).0.unwrap()["decision"],
            "block"
        );
        assert_eq!(out("Other", &block("x")), (None, EXIT_BLOCK));
    }
}
