//! Decisions rendered in Copilot CLI's hook contract (camelCase hooks, JSON on stdout).
//!
//! * `preToolUse`: `{"permissionDecision": "deny", "permissionDecisionReason": R}` blocks
//!   the call and the model reads `Denied by preToolUse hook: R`; `"allow"` with
//!   `modifiedArgs` runs the new arguments instead. Exit 2 also denies, but a hook
//!   *timeout* lets the call through, so the registered timeout exceeds the wrapper's.
//! * `permissionRequest`: `{"behavior": "allow" | "deny", "message": R}`.
//! * `userPromptSubmitted`: `{"handled": true, "responseContent": R}` answers the prompt
//!   without any model call (Copilot prints R); `{"modifiedPrompt": P}` sends P instead.
//!   Exit 2 there is only a warning: the prompt still goes out, so it is never used.
//! * Everything else is a notification.

use serde_json::{json, Value};

use super::{CopilotEvent, SHIM};
use ahp_wrap_adapter::shared::output::{
    json_stdout, notification, stderr_exit, unapplicable_modify,
};
use ahp_wrap_adapter::shared::updated_input;
use ahp_wrap_adapter::{CallerReply, Final, HookContext, Mapped, ModifyError};
/// Exit code with which Copilot denies (and, for us, the fail-closed answer).
pub(crate) const EXIT_DENY: i32 = 2;
/// Exit code of a non-blocking hook error on a notification hook.
const EXIT_HOOK_ERROR: i32 = 1;
/// The reason given when a block came without one (Copilot shows an empty reason badly).
const NO_REASON: &str = "ahp-wrap blocked this tool call";

pub(crate) fn render(
    cx: &HookContext<'_>,
    _event: Option<&Mapped>,
    verdict: &Final,
) -> CallerReply {
    let Some(event) = CopilotEvent::parse(cx.hook) else {
        return stderr_exit(&SHIM.unknown_hook_reason(verdict), EXIT_DENY);
    };
    match event {
        CopilotEvent::PreToolUse => pre_tool_use(verdict),
        CopilotEvent::PermissionRequest => permission_request(verdict),
        CopilotEvent::UserPromptSubmitted => user_prompt_submitted(verdict),
        CopilotEvent::PostToolUse
        | CopilotEvent::PostToolUseFailure
        | CopilotEvent::SessionStart
        | CopilotEvent::AgentStop
        // Only a failed relay blocks a notification: say so, never steer the agent.
        | CopilotEvent::SessionEnd => notification(verdict, EXIT_HOOK_ERROR),
    }
}

/// A prompt kept from the model: Copilot shows `responseContent` as the answer.
fn handled(reason: &str) -> CallerReply {
    json_stdout(json!({
        "handled": true,
        "responseContent": format!("ahp-wrap blocked this prompt: {}", non_empty(reason)),
    }))
}

/// The prompt a harness asked for: a whole pre_prompt payload's `prompt`, or a string.
fn new_prompt(modified: &Value) -> Result<&str, ModifyError> {
    let p = match modified {
        Value::String(s) => s.as_str(),
        Value::Object(o) => match o.get("prompt") {
            Some(Value::String(s)) => s.as_str(),
            _ => return Err(ModifyError::NoPrompt),
        },
        _ => return Err(ModifyError::NotAPrompt),
    };
    // Copilot rejects an empty replacement and would send the original prompt.
    if p.is_empty() {
        return Err(ModifyError::EmptyPrompt);
    }
    Ok(p)
}

fn user_prompt_submitted(verdict: &Final) -> CallerReply {
    if let Some(modified) = verdict.replacement() {
        return match new_prompt(modified) {
            Ok(p) => json_stdout(json!({ "modifiedPrompt": p })),
            Err(why) => handled(&unapplicable_modify(&why)),
        };
    }
    match verdict {
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => handled(reason),
        _ => handled(&unexpected(verdict)),
    }
}

fn deny(reason: &str) -> CallerReply {
    json_stdout(json!({
        "permissionDecision": "deny",
        "permissionDecisionReason": non_empty(reason),
    }))
}

fn pre_tool_use(verdict: &Final) -> CallerReply {
    if let Some(modified) = verdict.replacement() {
        return match updated_input(modified) {
            Ok(args) => json_stdout(json!({"permissionDecision": "allow", "modifiedArgs": args})),
            Err(why) => deny(&unapplicable_modify(&why)),
        };
    }
    match verdict {
        Final::Allow { explicit: true, .. } => json_stdout(json!({"permissionDecision": "allow"})),
        // No opinion: Copilot's own permission system stays in charge.
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => deny(reason),
        Final::Ask { .. } | Final::Modify { .. } => deny(&unexpected(verdict)),
    }
}

fn permission_request(verdict: &Final) -> CallerReply {
    let out = |v: Value| json_stdout(v);
    match verdict {
        _ if verdict.replacement().is_some() => out(json!({"behavior": "deny",
            "message": unapplicable_modify("Copilot's permissionRequest cannot change the arguments")})),
        Final::Allow { explicit: true, .. } => out(json!({"behavior": "allow"})),
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => out(json!({"behavior": "deny", "message": non_empty(reason)})),
        _ => out(json!({"behavior": "deny", "message": unexpected(verdict)})),
    }
}

fn non_empty(reason: &str) -> &str {
    if reason.trim().is_empty() {
        NO_REASON
    } else {
        reason
    }
}

fn unexpected(verdict: &Final) -> String {
    SHIM.unexpected(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{allow, block, modify};

    fn out(hook: &str, verdict: &Final) -> (Option<Value>, i32) {
        ahp_wrap_adapter::testing::out(render, hook, verdict)
    }

    #[test]
    fn pre_tool_use_denies_allows_and_modifies() {
        assert_eq!(out("preToolUse", &Final::no_opinion()), (None, 0));
        assert_eq!(
            out("preToolUse", &block("no")),
            (
                Some(json!({"permissionDecision": "deny", "permissionDecisionReason": "no"})),
                0
            )
        );
        assert_eq!(
            out("preToolUse", &block(" ")).0.unwrap()["permissionDecisionReason"],
            NO_REASON
        );
        assert_eq!(
            out("preToolUse", &allow(true, json!({}))),
            (Some(json!({"permissionDecision": "allow"})), 0)
        );
        let want = Some(json!({"permissionDecision": "allow", "modifiedArgs": {"command": "ls"}}));
        // A bare arguments object, or a whole pre_action payload with `arguments`.
        assert_eq!(out("preToolUse", &modify(json!({"command": "ls"}))).0, want);
        assert_eq!(
            out(
                "preToolUse",
                &modify(json!({"tool_name": "bash", "arguments": {"command": "ls"}}))
            )
            .0,
            want
        );
        let (v, _) = out("preToolUse", &modify(json!("ls")));
        assert_eq!(v.unwrap()["permissionDecision"], "deny");
        let esc = Final::Ask {
            reason: "ask".into(),
            target: None,
        };
        assert_eq!(
            out("preToolUse", &esc).0.unwrap()["permissionDecision"],
            "deny"
        );
    }

    #[test]
    fn permission_prompts_and_notifications() {
        assert_eq!(out("permissionRequest", &Final::no_opinion()), (None, 0));
        assert_eq!(
            out("permissionRequest", &allow(true, json!({}))).0,
            Some(json!({"behavior": "allow"}))
        );
        assert_eq!(
            out("permissionRequest", &block("R")).0,
            Some(json!({"behavior": "deny", "message": "R"}))
        );
        assert_eq!(out("userPromptSubmitted", &Final::no_opinion()), (None, 0));
        assert_eq!(
            out("userPromptSubmitted", &block("P")),
            (
                Some(
                    json!({"handled": true, "responseContent": "ahp-wrap blocked this prompt: P"})
                ),
                0
            )
        );
        for m in [json!({"prompt": "new"}), json!("new")] {
            assert_eq!(
                out("userPromptSubmitted", &modify(m)).0,
                Some(json!({"modifiedPrompt": "new"}))
            );
        }
        for m in [json!({"prompt": ""}), json!({"x": 1}), json!(3)] {
            assert_eq!(
                out("userPromptSubmitted", &modify(m)).0.unwrap()["handled"],
                true
            );
        }
        for hook in [
            "postToolUse",
            "postToolUseFailure",
            "sessionStart",
            "agentStop",
            "sessionEnd",
        ] {
            assert_eq!(out(hook, &block("down")), (None, EXIT_HOOK_ERROR), "{hook}");
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0), "{hook}");
        }
        assert_eq!(out("other", &block("x")), (None, EXIT_DENY));
    }
}
