//! Decisions rendered in Codex's own hook contract (stdout JSON and exit code).
//!
//! Codex fails *open* on almost everything that is not a well-formed deny: a hook that
//! times out, exits 1, prints bad JSON, answers `ask`, or denies without a reason lets the
//! tool run. So every block here is exit 0 with a deny JSON and a non-empty reason, and
//! what Codex does not support (a plain `allow`, `ask`) is rendered as silence.

use serde_json::{json, Value};

use super::{CodexEvent, SHIM};
use ahp_wrap_adapter::shared::output::{
    context_or_silence, decision, hook_specific, permission_decision, stderr_exit, unapplicable,
};
use ahp_wrap_adapter::shared::{additional_context, updated_input};
use ahp_wrap_adapter::{CallerReply, Final, HookContext, Mapped};

/// Exit code with which Codex blocks when it reads no JSON decision: the reason goes on
/// stderr. Used only for hook names we do not know.
const EXIT_BLOCK: i32 = 2;
/// Exit code of a failed hook that Codex reports and otherwise ignores.
const EXIT_HOOK_ERROR: i32 = 1;

pub(crate) fn render(
    cx: &HookContext<'_>,
    _event: Option<&Mapped>,
    verdict: &Final,
) -> CallerReply {
    let Some(event) = CodexEvent::parse(cx.hook) else {
        let reason = non_empty(&SHIM.unknown_hook_reason(verdict));
        return stderr_exit(&reason, EXIT_BLOCK);
    };
    match event {
        CodexEvent::PreToolUse => pre_tool_use(verdict),
        CodexEvent::PermissionRequest => permission_request(verdict),
        CodexEvent::UserPromptSubmit => user_prompt_submit(verdict),
        CodexEvent::PostToolUse => post_tool_use(verdict),
        CodexEvent::SessionStart => with_context(event, verdict),
        // Never a `decision: block` here: on Stop it makes Codex go on, forever.
        CodexEvent::Stop | CodexEvent::SessionEnd => notification(verdict),
    }
}

/// Codex ignores a deny whose reason is empty (the tool runs): there is always one.
fn non_empty(reason: &str) -> String {
    if reason.trim().is_empty() {
        "ahp-wrap blocked this (the harness gave no reason)".to_owned()
    } else {
        reason.to_owned()
    }
}

fn pre_tool_use(verdict: &Final) -> CallerReply {
    let out = |decision: &str, reason: &str, input| {
        permission_decision("PreToolUse", decision, &non_empty(reason), input)
    };
    if let Some(modified) = verdict.replacement() {
        // Codex runs only what has a string `command`; anything else it refuses with an
        // error of its own, but we say why.
        return match updated_input(modified) {
            Ok(input) if input.get("command").is_some_and(Value::is_string) => {
                out("allow", "modified by the AHP harness", Some(input))
            }
            Ok(_) => pre_tool_use(&unapplicable(
                "Codex needs a string \"command\" in the new tool input",
            )),
            Err(why) => pre_tool_use(&unapplicable(&why)),
        };
    }
    match verdict {
        // Codex has no plain allow for PreToolUse (it reports one as an unsupported
        // answer): whether the tool runs is up to its own approval and sandbox settings.
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => out("deny", reason, None),
        // Codex's "ask" fails open; an escalation never gets here (`native_ask` is false),
        // and if it ever does it is refused.
        Final::Ask { .. } | Final::Modify { .. } => out("deny", &unexpected(verdict), None),
    }
}

fn permission_request(verdict: &Final) -> CallerReply {
    let out = |decision: Value| hook_specific("PermissionRequest", json!({ "decision": decision }));
    let deny = |reason: &str| out(json!({"behavior": "deny", "message": non_empty(reason)}));
    match verdict {
        // Codex's PermissionRequest comes after PreToolUse, where a rewrite belongs; one
        // here is not known to be applied, so it is refused rather than run as it was.
        _ if verdict.replacement().is_some() => deny(
            "ahp-wrap blocked this because the harness rewrote the command at Codex's permission request, where a rewrite cannot be applied",
        ),
        Final::Allow { explicit: true, .. } => out(json!({"behavior": "allow"})),
        // No opinion: Codex's own approval flow decides.
        Final::Allow { .. } => CallerReply::default(),
        Final::Block { reason } => deny(reason),
        Final::Ask { .. } | Final::Modify { .. } => {
            deny(&unexpected(verdict))
        }
    }
}

fn user_prompt_submit(verdict: &Final) -> CallerReply {
    let block = |reason: &str| decision("block", &non_empty(reason));
    match verdict {
        // Codex has no way to replace a prompt: refusing is the only safe reading.
        _ if verdict.replacement().is_some() => block(
            "ahp-wrap blocked this prompt because the harness rewrote it, and Codex cannot run a rewritten prompt",
        ),
        Final::Allow { .. } => with_context(CodexEvent::UserPromptSubmit, verdict),
        Final::Block { reason } => block(reason),
        Final::Ask { .. } | Final::Modify { .. } => {
            block(&unexpected(verdict))
        }
    }
}

/// PostToolUse is a notification, so only a failed relay blocks here. The tool has run;
/// Codex gives the model the reason instead of the tool's output.
fn post_tool_use(verdict: &Final) -> CallerReply {
    match verdict {
        Final::Block { reason } => decision("block", &non_empty(reason)),
        _ => with_context(CodexEvent::PostToolUse, verdict),
    }
}

fn with_context(event: CodexEvent, verdict: &Final) -> CallerReply {
    match verdict {
        Final::Block { reason } => notification_error(reason),
        _ => context_or_silence(event.name(), additional_context(verdict)),
    }
}

/// Events that cannot be refused: a block (the relay failed) becomes a failed hook that
/// Codex reports, never a `decision: block` or an exit 2.
fn notification(verdict: &Final) -> CallerReply {
    match verdict {
        Final::Block { reason } => notification_error(reason),
        _ => CallerReply::default(),
    }
}

fn notification_error(reason: &str) -> CallerReply {
    stderr_exit(&non_empty(reason), EXIT_HOOK_ERROR)
}

fn unexpected(verdict: &Final) -> String {
    SHIM.unexpected(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{allow, block, cx, modify};

    fn out(hook: &str, verdict: &Final) -> (Option<Value>, i32) {
        ahp_wrap_adapter::testing::out(render, hook, verdict)
    }

    /// The only deny Codex honours: exit 0, `permissionDecision: "deny"`, a reason.
    fn assert_deny(hook: &str, verdict: &Final) -> String {
        let (v, code) = out(hook, verdict);
        assert_eq!(code, 0, "{hook} {verdict:?}");
        let o = v.unwrap()["hookSpecificOutput"].clone();
        assert_eq!(o["hookEventName"], hook);
        assert_eq!(o["permissionDecision"], "deny", "{verdict:?}");
        let reason = o["permissionDecisionReason"].as_str().unwrap().to_owned();
        assert!(!reason.trim().is_empty());
        reason
    }

    #[test]
    fn pre_tool_use_allow_is_silence_and_block_a_reasoned_deny() {
        // Codex supports neither a plain allow nor ask: both explicit and no-opinion
        // allows leave its own approval settings in charge.
        for v in [Final::no_opinion(), allow(true, json!({}))] {
            assert_eq!(render(&cx("PreToolUse"), None, &v), CallerReply::default());
        }
        assert_eq!(assert_deny("PreToolUse", &block("not here")), "not here");
        // An empty reason would make Codex run the tool: one is supplied.
        assert!(assert_deny("PreToolUse", &block("  ")).contains("no reason"));
        let ask = Final::Ask {
            reason: "ask ops".into(),
            target: None,
        };
        assert!(assert_deny("PreToolUse", &ask).contains("cannot be applied"));
    }

    #[test]
    fn modify_is_allow_with_updated_input_from_either_shape() {
        for modified in [
            json!({"action_type": "tool_call", "tool_name": "Bash", "arguments": {"command": "ls"}}),
            json!({"command": "ls"}),
        ] {
            let (v, code) = out("PreToolUse", &modify(modified));
            assert_eq!(code, 0);
            let o = &v.unwrap()["hookSpecificOutput"];
            assert_eq!(o["permissionDecision"], "allow");
            assert_eq!(o["updatedInput"], json!({"command": "ls"}));
        }
        // An allow carrying a modified payload is a modify too.
        let v = Final::Allow {
            explicit: false,
            modified_payload: Some(json!({"command": "pwd"})),
            extra: Default::default(),
        };
        let (o, _) = out("PreToolUse", &v);
        assert_eq!(
            o.unwrap()["hookSpecificOutput"]["updatedInput"]["command"],
            "pwd"
        );
        // What Codex could not run is refused, never run as it was.
        for bad in [json!("ls"), json!({"cmd": "ls"}), json!({"arguments": 3})] {
            assert!(assert_deny("PreToolUse", &modify(bad)).contains("cannot be applied"));
        }
    }

    #[test]
    fn permission_request_decisions() {
        let (v, _) = out("PermissionRequest", &allow(true, json!({})));
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["decision"],
            json!({"behavior": "allow"})
        );
        let (v, _) = out("PermissionRequest", &block(""));
        let d = &v.unwrap()["hookSpecificOutput"]["decision"];
        assert_eq!(d["behavior"], "deny");
        assert!(!d["message"].as_str().unwrap().is_empty());
        assert_eq!(out("PermissionRequest", &Final::no_opinion()), (None, 0));
        let (v, _) = out("PermissionRequest", &modify(json!({"command": "ls"})));
        assert_eq!(
            v.unwrap()["hookSpecificOutput"]["decision"]["behavior"],
            "deny"
        );
    }

    #[test]
    fn prompts_block_or_get_context() {
        let (v, _) = out("UserPromptSubmit", &block("secret"));
        assert_eq!(v.unwrap(), json!({"decision": "block", "reason": "secret"}));
        let (v, _) = out(
            "UserPromptSubmit",
            &allow(
                false,
                json!({"additional_context": "A", "injected_context": {"facts": [{"content": "B"}]}}),
            ),
        );
        assert_eq!(
            v.unwrap()["hookSpecificOutput"],
            json!({"hookEventName": "UserPromptSubmit", "additionalContext": "A\nB"})
        );
        let (v, _) = out("UserPromptSubmit", &modify(json!({"prompt": "x"})));
        assert_eq!(v.unwrap()["decision"], "block");
        assert_eq!(out("UserPromptSubmit", &Final::no_opinion()), (None, 0));
    }

    #[test]
    fn notifications_never_block_and_stop_never_loops() {
        for hook in ["Stop", "SessionEnd", "SessionStart"] {
            assert_eq!(out(hook, &Final::no_opinion()), (None, 0), "{hook}");
            // A failed relay: a failed hook (exit 1), never exit 2 or `decision: block`.
            let r = render(&cx(hook), None, &block("relay down"));
            assert_eq!(r.exit_code, EXIT_HOOK_ERROR, "{hook}");
            assert!(r.stdout.is_empty(), "{hook}");
        }
        let (v, _) = out("PostToolUse", &block("relay down"));
        assert_eq!(
            v.unwrap(),
            json!({"decision": "block", "reason": "relay down"})
        );
        let (v, _) = out(
            "SessionStart",
            &allow(false, json!({"additional_context": "C"})),
        );
        assert_eq!(v.unwrap()["hookSpecificOutput"]["additionalContext"], "C");
        let r = render(&cx("Whatever"), None, &block("x"));
        assert_eq!((r.exit_code, r.stderr), (EXIT_BLOCK, b"x\n".to_vec()));
    }
}
