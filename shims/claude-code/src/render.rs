//! Decisions rendered in Claude Code's own hook contract (stdout JSON and exit code).
//!
//! The rule that matters most: "no opinion" prints nothing, so Claude's own permission
//! system decides as if we were not there. Only an explicit allow, a modify, a block or an
//! escalation speaks.

use serde_json::{json, Value};

use super::{ClaudeEvent, HookName, SHIM};
use ahp_wrap_adapter::shared::output::{
    context_or_silence, decision, hook_specific, notification, permission_decision, stderr_exit,
    unapplicable,
};
use ahp_wrap_adapter::shared::{additional_context, updated_input};
use ahp_wrap_adapter::{CallerReply, Final, HookContext, Mapped};

/// Exit code with which Claude blocks where a JSON decision is not read: the reason goes
/// on stderr. Used only for hook names we do not know.
const EXIT_BLOCK: i32 = 2;
/// Exit code of a non-blocking hook error: Claude goes on and notes the message.
const EXIT_HOOK_ERROR: i32 = 1;

pub(crate) fn render(
    cx: &HookContext<'_>,
    _event: Option<&Mapped>,
    verdict: &Final,
) -> CallerReply {
    let Some(hook) = HookName::parse(cx.hook) else {
        return stderr_exit(&SHIM.unknown_hook_reason(verdict), EXIT_BLOCK);
    };
    match hook.event {
        ClaudeEvent::PreToolUse => pre_tool_use(verdict),
        ClaudeEvent::PermissionRequest => permission_request(verdict),
        ClaudeEvent::UserPromptSubmit => user_prompt_submit(verdict),
        ClaudeEvent::PostToolUse | ClaudeEvent::PostToolUseFailure => {
            after_tool(hook.event, verdict)
        }
        ClaudeEvent::SessionStart => with_context(hook.event, verdict),
        ClaudeEvent::Stop
        | ClaudeEvent::StopFailure
        | ClaudeEvent::SubagentStart
        | ClaudeEvent::SubagentStop
        // Events that cannot be refused: a block (the relay failed) becomes a hook error
        // Claude reports, never a `decision: block`, which for Stop would make the agent
        // go on.
        | ClaudeEvent::SessionEnd => notification(verdict, EXIT_HOOK_ERROR),
    }
}

fn pre_tool_use(verdict: &Final) -> CallerReply {
    let out = |decision: &str, reason: &str, input| {
        permission_decision("PreToolUse", decision, reason, input)
    };
    if let Some(modified) = verdict.replacement() {
        return match updated_input(modified) {
            Ok(input) => out("allow", "modified by the AHP harness", Some(input)),
            Err(why) => pre_tool_use(&unapplicable(&why)),
        };
    }
    match verdict {
        Final::Allow { explicit: true, .. } => out("allow", "allowed by the AHP harness", None),
        // No opinion: Claude's own permission rules decide.
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => out("deny", reason, None),
        // Only reached when Claude can ask a person itself (interactive, not `-p`).
        Final::Ask { reason, .. } => out("ask", reason, None),
        Final::Modify { .. } => out("deny", &unexpected(verdict), None),
    }
}

fn permission_request(verdict: &Final) -> CallerReply {
    let out = |decision: Value| hook_specific("PermissionRequest", json!({ "decision": decision }));
    if let Some(modified) = verdict.replacement() {
        return match updated_input(modified) {
            Ok(input) => out(json!({"behavior": "allow", "updatedInput": input})),
            Err(why) => permission_request(&unapplicable(&why)),
        };
    }
    match verdict {
        Final::Allow { explicit: true, .. } => out(json!({"behavior": "allow"})),
        // No opinion, or a person should decide: Claude shows its own permission dialog.
        Final::Allow { .. } | Final::Ask { .. } => CallerReply::default(),
        Final::Block { reason } => out(json!({"behavior": "deny", "message": reason})),
        Final::Modify { .. } => out(json!({"behavior": "deny", "message": unexpected(verdict)})),
    }
}

fn user_prompt_submit(verdict: &Final) -> CallerReply {
    let block = |reason: &str| decision("block", reason);
    match verdict {
        // Claude has no way to replace a prompt: refusing is the only safe reading.
        _ if verdict.replacement().is_some() => block(
            "ahp-wrap blocked this prompt because the harness rewrote it, and Claude Code cannot run a rewritten prompt",
        ),
        Final::Allow { .. } => with_context(ClaudeEvent::UserPromptSubmit, verdict),
        Final::Block { reason } => block(reason),
        Final::Ask { .. } | Final::Modify { .. } => {
            block(&unexpected(verdict))
        }
    }
}

/// PostToolUse(Failure): a notification, so only a failed relay can block here; the tool
/// has already run, and the reason reaches the model.
fn after_tool(event: ClaudeEvent, verdict: &Final) -> CallerReply {
    match verdict {
        Final::Block { reason } => decision("block", reason),
        _ => with_context(event, verdict),
    }
}

fn with_context(event: ClaudeEvent, verdict: &Final) -> CallerReply {
    match verdict {
        Final::Block { reason } => stderr_exit(reason, EXIT_HOOK_ERROR),
        _ => context_or_silence(event.name(), additional_context(verdict)),
    }
}

fn unexpected(verdict: &Final) -> String {
    SHIM.unexpected(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{allow, block, cx};

    fn out(hook: &str, verdict: &Final) -> (Option<Value>, i32) {
        ahp_wrap_adapter::testing::out(render, hook, verdict)
    }

    #[test]
    fn pre_tool_use_decisions() {
        // No opinion: silence, so Claude's own permission prompt still applies.
        assert_eq!(
            render(&cx("PreToolUse"), None, &Final::no_opinion()),
            CallerReply::default()
        );
        let (v, code) = out("PreToolUse.print", &allow(true, json!({})));
        assert_eq!(code, 0);
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["permissionDecision"],
            "allow"
        );
        let (v, _) = out("PreToolUse", &block("not here"));
        let o = &v.unwrap()["hookSpecificOutput"];
        assert_eq!(o["permissionDecision"], "deny");
        assert_eq!(o["permissionDecisionReason"], "not here");
        let (v, _) = out(
            "PreToolUse",
            &Final::Ask {
                reason: "ask ops".into(),
                target: None,
            },
        );
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["permissionDecision"],
            "ask"
        );
    }

    #[test]
    fn modify_becomes_updated_input_from_either_shape() {
        for modified in [
            json!({"action_type": "tool_call", "tool_name": "Bash", "arguments": {"command": "ls"}}),
            json!({"command": "ls"}),
        ] {
            let (v, _) = out(
                "PreToolUse",
                &Final::Modify {
                    modified_payload: modified,
                },
            );
            let o = &v.unwrap()["hookSpecificOutput"];
            assert_eq!(o["permissionDecision"], "allow");
            assert_eq!(o["updatedInput"], json!({"command": "ls"}));
        }
        let (v, _) = out(
            "PermissionRequest",
            &Final::Modify {
                modified_payload: json!({"command": "ls"}),
            },
        );
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["decision"],
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
        );
        // A payload that cannot be applied is refused, not run as it was.
        let (v, _) = out(
            "PreToolUse",
            &Final::Modify {
                modified_payload: json!("ls"),
            },
        );
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
    }

    #[test]
    fn permission_request_decisions() {
        let (v, _) = out("PermissionRequest", &allow(true, json!({})));
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["decision"],
            json!({"behavior": "allow"})
        );
        let (v, _) = out("PermissionRequest", &block("no"));
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["decision"],
            json!({"behavior": "deny", "message": "no"})
        );
        assert_eq!(out("PermissionRequest", &Final::no_opinion()), (None, 0));
    }

    #[test]
    fn prompts_block_or_get_context() {
        let (v, _) = out("UserPromptSubmit", &block("secret"));
        assert_eq!(v.unwrap(), json!({"decision": "block", "reason": "secret"}));
        let (v, _) = out(
            "UserPromptSubmit",
            &allow(
                false,
                json!({"additional_context": "A", "injected_context": {"facts": [{"content": "B"}], "knowledge": ["C"]}}),
            ),
        );
        assert_eq!(
            v.unwrap()["hookSpecificOutput"],
            json!({"hookEventName": "UserPromptSubmit", "additionalContext": "A\nB\nC"})
        );
        let (v, _) = out(
            "UserPromptSubmit",
            &Final::Modify {
                modified_payload: json!({"prompt": "x"}),
            },
        );
        assert_eq!(v.unwrap()["decision"], "block");
        assert_eq!(out("UserPromptSubmit", &Final::no_opinion()), (None, 0));
    }

    #[test]
    fn notifications_never_block_the_agent() {
        for hook in ["Stop", "SessionEnd", "SubagentStop", "SessionStart"] {
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0), "{hook}");
            let r = render(&cx(hook), None, &block("relay down"));
            assert_eq!(r.exit_code, EXIT_HOOK_ERROR, "{hook}");
            assert!(r.stdout.is_empty());
        }
        let (v, _) = out("PostToolUse", &block("relay down"));
        assert_eq!(v.unwrap()["decision"], "block");
        let r = render(&cx("Whatever"), None, &block("x"));
        assert_eq!(r.exit_code, EXIT_BLOCK);
    }
}
