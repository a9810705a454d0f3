//! Decisions rendered in our OpenCode plugin's contract (`plugin.js`): one JSON object on
//! stdout, or nothing for "no opinion".
//!
//! * `{"decision": "block", "reason": R}`: the plugin throws `Error(R)`. On
//!   `tool.execute.before` the tool does not run and the model reads R as its result; on
//!   `chat.message` the prompt never reaches the model (OpenCode ends the run with an error).
//! * `{"decision": "modify", "args": {…}}`: the tool runs with these arguments instead (the
//!   plugin replaces the keys of the very object OpenCode then executes).
//! * `{"decision": "modify", "prompt": P}`: the typed text of the prompt becomes P.
//! * A non-zero exit with a reason on stderr also blocks, and so does anything the plugin
//!   cannot read: the plugin fails closed. Bus events and `tool.execute.after` are
//!   notifications, whose answers the plugin does not wait for.

use serde_json::{json, Value};

#[cfg(test)]
use super::OPENCODE;
use super::{Flavor, OpenCodeEvent};
use ahp_wrap_adapter::shared::output::{
    json_stdout, notification, stderr_exit, unapplicable_modify,
};
use ahp_wrap_adapter::shared::updated_input;
use ahp_wrap_adapter::Shim;
use ahp_wrap_adapter::{CallerReply, Final, HookContext, Mapped, ModifyError};

/// Exit code with which the plugin blocks on the stderr text: only for hooks we do not know.
const EXIT_BLOCK: i32 = 2;
/// Exit code of a notification whose relay failed (the plugin only logs it).
const EXIT_HOOK_ERROR: i32 = 1;

pub(crate) fn render(
    flavor: &Flavor,
    cx: &HookContext<'_>,
    _event: Option<&Mapped>,
    verdict: &Final,
) -> CallerReply {
    let shim = flavor.shim;
    let Some(event) = OpenCodeEvent::parse(cx.hook) else {
        return stderr_exit(&shim.unknown_hook_reason(verdict), EXIT_BLOCK);
    };
    match event {
        OpenCodeEvent::ToolExecuteBefore => tool_execute_before(shim, verdict),
        OpenCodeEvent::ChatMessage => chat_message(shim, verdict),
        OpenCodeEvent::ToolExecuteAfter
        | OpenCodeEvent::SessionCreated
        | OpenCodeEvent::SessionIdle
        | OpenCodeEvent::SessionError
        | OpenCodeEvent::SessionDeleted => notification(verdict, EXIT_HOOK_ERROR),
    }
}

fn block(reason: &str) -> CallerReply {
    json_stdout(json!({"decision": "block", "reason": reason}))
}

fn tool_execute_before(shim: Shim, verdict: &Final) -> CallerReply {
    if let Some(modified) = verdict.replacement() {
        return match updated_input(modified) {
            Ok(args) => json_stdout(json!({"decision": "modify", "args": args})),
            Err(why) => block(&unapplicable_modify(&why)),
        };
    }
    match verdict {
        // No opinion or explicit: OpenCode's own permission rules stay in charge (a plugin
        // hook cannot approve a call past them).
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => block(reason),
        _ => block(&shim.unexpected(verdict)),
    }
}

/// The prompt a harness asked for: a whole pre_prompt payload's `prompt`, or a string.
fn new_prompt(modified: &Value) -> Result<&str, ModifyError> {
    match modified {
        Value::String(s) => Ok(s),
        Value::Object(o) => match o.get("prompt") {
            Some(Value::String(s)) => Ok(s),
            _ => Err(ModifyError::NoPrompt),
        },
        _ => Err(ModifyError::NotAPrompt),
    }
}

fn chat_message(shim: Shim, verdict: &Final) -> CallerReply {
    if let Some(modified) = verdict.replacement() {
        return match new_prompt(modified) {
            Ok(p) => json_stdout(json!({"decision": "modify", "prompt": p})),
            Err(why) => block(&unapplicable_modify(&why)),
        };
    }
    match verdict {
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => block(&format!("ahp-wrap blocked this prompt: {reason}")),
        _ => block(&shim.unexpected(verdict)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{allow, block as blocked, modify};

    fn out(hook: &str, verdict: &Final) -> (Option<Value>, i32) {
        let render = |cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final| {
            super::render(&OPENCODE, cx, event, verdict)
        };
        ahp_wrap_adapter::testing::out(render, hook, verdict)
    }

    #[test]
    fn tools_are_blocked_or_run_with_new_arguments() {
        let hook = "tool.execute.before";
        assert_eq!(out(hook, &Final::no_opinion()), (None, 0));
        assert_eq!(out(hook, &allow(true, json!({}))), (None, 0));
        assert_eq!(
            out(hook, &blocked("no")),
            (Some(json!({"decision": "block", "reason": "no"})), 0)
        );
        let whole = modify(json!({"tool_name": "bash", "arguments": {"command": "ls"}}));
        assert_eq!(
            out(hook, &whole).0.unwrap(),
            json!({"decision": "modify", "args": {"command": "ls"}})
        );
        let args = modify(json!({"command": "pwd"}));
        assert_eq!(
            out(hook, &args).0.unwrap()["args"],
            json!({"command": "pwd"})
        );
        let bad = out(hook, &modify(json!("ls"))).0.unwrap();
        assert_eq!(bad["decision"], "block");
        let escalate = Final::Ask {
            reason: "r".into(),
            target: None,
        };
        assert_eq!(out(hook, &escalate).0.unwrap()["decision"], "block");
    }

    #[test]
    fn prompts_are_blocked_or_rewritten_and_notifications_never_steer() {
        let hook = "chat.message";
        assert_eq!(out(hook, &Final::no_opinion()), (None, 0));
        let (v, code) = out(hook, &blocked("P"));
        assert_eq!(
            (v.unwrap()["reason"].clone(), code),
            (json!("ahp-wrap blocked this prompt: P"), 0)
        );
        assert_eq!(
            out(hook, &modify(json!({"prompt": "new"}))).0.unwrap(),
            json!({"decision": "modify", "prompt": "new"})
        );
        assert_eq!(out(hook, &modify(json!(7))).0.unwrap()["decision"], "block");
        for hook in [
            "tool.execute.after",
            "session.created",
            "session.idle",
            "session.error",
            "session.deleted",
        ] {
            assert_eq!(
                out(hook, &blocked("down")),
                (None, EXIT_HOOK_ERROR),
                "{hook}"
            );
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0), "{hook}");
        }
        assert_eq!(out("permission.ask", &blocked("x")), (None, EXIT_BLOCK));
    }
}
