//! Decisions rendered in Gemini CLI's own hook contract (stdout JSON and exit code).
//!
//! "No opinion" prints nothing, so Gemini's approval mode decides as if we were not there.
//! A deny is always JSON with exit 0, which Gemini honours; a timeout, a crash or exit 1
//! would let the action through.

use serde_json::{json, Value};

use super::{GeminiEvent, SHIM};
use ahp_wrap_adapter::shared::output::{
    context_or_silence, decision, hook_specific, notification, stderr_exit, unapplicable_modify,
};
use ahp_wrap_adapter::shared::updated_input;
use ahp_wrap_adapter::{CallerReply, Final, HookContext, Mapped};

/// Exit code with which Gemini denies on plain text (stderr): only for hook names we do
/// not know, where no JSON contract applies.
const EXIT_DENY: i32 = 2;
/// Exit code of a non-blocking hook error: Gemini goes on with a warning.
const EXIT_HOOK_ERROR: i32 = 1;

pub(crate) fn render(
    cx: &HookContext<'_>,
    _event: Option<&Mapped>,
    verdict: &Final,
) -> CallerReply {
    let Some(event) = GeminiEvent::parse(cx.hook) else {
        return stderr_exit(&SHIM.unknown_hook_reason(verdict), EXIT_DENY);
    };
    match event {
        GeminiEvent::BeforeTool => before_tool(verdict),
        GeminiEvent::BeforeAgent | GeminiEvent::BeforeModel => before_prompt(event, verdict),
        GeminiEvent::AfterTool => match verdict {
            // Only a failed relay blocks here: the tool already ran, and the model gets the
            // reason instead of its output.
            Final::Block { reason } => deny(reason),
            _ => with_context(event, verdict),
        },
        GeminiEvent::SessionStart => with_context(event, verdict),
        // Events that cannot be refused: a block (the relay failed) becomes a warning
        // Gemini shows, never a `decision`, which on AfterAgent would make the agent go on.
        GeminiEvent::AfterAgent | GeminiEvent::SessionEnd | GeminiEvent::Notification => {
            notification(verdict, EXIT_HOOK_ERROR)
        }
    }
}

fn deny(reason: &str) -> CallerReply {
    decision("deny", reason)
}

fn before_tool(verdict: &Final) -> CallerReply {
    if let Some(modified) = verdict.replacement() {
        // Gemini replaces the whole tool input with this one.
        return match updated_input(modified) {
            Ok(input) => hook_specific("BeforeTool", json!({ "tool_input": input })),
            Err(why) => deny(&unapplicable_modify(&why)),
        };
    }
    match verdict {
        // Explicit or not: Gemini's own approval mode stays in charge (there is no
        // "skip the confirmation" answer worth giving in a headless run).
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => deny(reason),
        Final::Ask { .. } | Final::Modify { .. } => deny(&unexpected(verdict)),
    }
}

/// BeforeAgent (the user's prompt) and BeforeModel (each model request): a deny keeps the
/// request from the model.
fn before_prompt(event: GeminiEvent, verdict: &Final) -> CallerReply {
    match verdict {
        // Rewriting a prompt is not something we can make Gemini do exactly: refuse.
        _ if verdict.replacement().is_some() => deny(
            "ahp-wrap blocked this prompt because the harness rewrote it, and Gemini CLI cannot run a rewritten prompt",
        ),
        Final::Allow { .. } if event == GeminiEvent::BeforeAgent => with_context(event, verdict),
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => deny(reason),
        Final::Ask { .. } | Final::Modify { .. } => {
            deny(&unexpected(verdict))
        }
    }
}

/// `additional_context` from an allow, for the hooks where Gemini passes it to the model.
fn with_context(event: GeminiEvent, verdict: &Final) -> CallerReply {
    match verdict {
        Final::Block { reason } => stderr_exit(reason, EXIT_HOOK_ERROR),
        Final::Allow { extra, .. } => context_or_silence(
            event.name(),
            extra
                .get("additional_context")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        _ => CallerReply::default(),
    }
}

fn unexpected(verdict: &Final) -> String {
    SHIM.unexpected(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{allow, block};

    fn out(hook: &str, verdict: &Final) -> (Option<Value>, i32) {
        ahp_wrap_adapter::testing::out(render, hook, verdict)
    }

    #[test]
    fn before_tool_decisions() {
        assert_eq!(out("BeforeTool", &Final::no_opinion()), (None, 0));
        assert_eq!(out("BeforeTool", &allow(true, json!({}))), (None, 0));
        assert_eq!(
            out("BeforeTool", &block("not here")),
            (Some(json!({"decision": "deny", "reason": "not here"})), 0)
        );
        let (v, _) = out(
            "BeforeTool",
            &Final::Ask {
                reason: "ask".into(),
                target: None,
            },
        );
        assert_eq!(v.unwrap()["decision"], "deny");
    }

    #[test]
    fn modify_replaces_the_whole_tool_input() {
        for modified in [
            json!({"action_type": "tool_call", "tool_name": "run_shell_command", "arguments": {"command": "ls"}}),
            json!({"command": "ls"}),
        ] {
            let (v, code) = out(
                "BeforeTool",
                &Final::Modify {
                    modified_payload: modified,
                },
            );
            assert_eq!(code, 0);
            assert_eq!(
                v.unwrap(),
                json!({"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"command": "ls"}}})
            );
        }
        let (v, _) = out(
            "BeforeTool",
            &Final::Modify {
                modified_payload: json!(["ls"]),
            },
        );
        assert_eq!(v.unwrap()["decision"], "deny");
    }

    #[test]
    fn prompts_and_model_requests_are_denied_or_get_context() {
        for hook in ["BeforeAgent", "BeforeModel"] {
            assert_eq!(
                out(hook, &block("secret")),
                (Some(json!({"decision": "deny", "reason": "secret"})), 0)
            );
            let (v, _) = out(
                hook,
                &Final::Modify {
                    modified_payload: json!({"prompt": "x"}),
                },
            );
            assert_eq!(v.unwrap()["decision"], "deny");
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0));
        }
        let (v, _) = out(
            "BeforeAgent",
            &allow(false, json!({"additional_context": "CTX"})),
        );
        assert_eq!(
            v.unwrap(),
            json!({"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "CTX"}})
        );
    }

    #[test]
    fn notifications_never_steer_the_agent() {
        for hook in ["AfterAgent", "SessionEnd", "Notification", "SessionStart"] {
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0), "{hook}");
            assert_eq!(
                out(hook, &block("relay down")),
                (None, EXIT_HOOK_ERROR),
                "{hook}"
            );
        }
        // After a tool, a failed relay keeps the output from the model.
        let (v, _) = out("AfterTool", &block("relay down"));
        assert_eq!(v.unwrap()["decision"], "deny");
        assert_eq!(out("Whatever", &block("x")), (None, EXIT_DENY));
    }
}
