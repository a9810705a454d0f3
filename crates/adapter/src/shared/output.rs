//! A hook's answer built the ways agents read one: JSON on stdout (Claude-style
//! `hookSpecificOutput` and `decision` objects), or a reason on stderr with an exit code.
//!
//! Which answer a verdict becomes on which hook is each shim's decision; these only spell
//! the answer out.

use serde_json::{json, Value};

use crate::{CallerReply, Final};

/// `v` as one line of JSON on stdout, exit 0.
pub fn json_stdout(v: Value) -> CallerReply {
    let mut stdout = v.to_string().into_bytes();
    stdout.push(b'\n');
    CallerReply {
        stdout,
        stderr: Vec::new(),
        exit_code: 0,
    }
}

/// `reason` as a line on stderr, and `exit_code`.
pub fn stderr_exit(reason: &str, exit_code: i32) -> CallerReply {
    CallerReply {
        stdout: Vec::new(),
        stderr: format!("{reason}\n").into_bytes(),
        exit_code,
    }
}

/// `{"hookSpecificOutput": {"hookEventName": event, …fields}}`.
pub fn hook_specific(event: &str, fields: Value) -> CallerReply {
    let mut o = json!({ "hookEventName": event });
    if let (Some(o), Value::Object(fields)) = (o.as_object_mut(), fields) {
        o.extend(fields);
    }
    json_stdout(json!({ "hookSpecificOutput": o }))
}

/// A tool hook's `permissionDecision` (`allow`, `deny`, `ask`) with its reason, and the
/// tool input to run instead when there is one.
pub fn permission_decision(
    event: &str,
    decision: &str,
    reason: &str,
    updated_input: Option<Value>,
) -> CallerReply {
    let mut o = json!({
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    });
    if let Some(input) = updated_input {
        o["updatedInput"] = input;
    }
    hook_specific(event, o)
}

/// A top-level `{"decision": decision, "reason": reason}`.
pub fn decision(decision: &str, reason: &str) -> CallerReply {
    json_stdout(json!({"decision": decision, "reason": reason}))
}

/// Context for the model (`additionalContext`), or silence when there is none.
pub fn context_or_silence(event: &str, context: Option<String>) -> CallerReply {
    match context {
        Some(ctx) => hook_specific(event, json!({ "additionalContext": ctx })),
        None => CallerReply::default(),
    }
}

/// Hooks whose event cannot be refused: a block (the relay failed) becomes a hook error
/// (the reason on stderr, `exit_code`) that the agent reports and otherwise ignores; any
/// other decision is silence.
pub fn notification(verdict: &Final, exit_code: i32) -> CallerReply {
    match verdict {
        Final::Block { reason } => stderr_exit(reason, exit_code),
        _ => CallerReply::default(),
    }
}

/// The block a modify becomes when its payload cannot be applied (`why`).
pub fn unapplicable(why: impl std::fmt::Display) -> Final {
    Final::Block {
        reason: unapplicable_modify(why),
    }
}

pub use crate::unapplicable_modify;

/// The reason given when a decision has no meaning on a hook of `agent` (its display name).
pub fn unexpected(verdict: &Final, agent: &str) -> String {
    format!(
        "ahp-wrap blocked this because a {:?} decision cannot be applied to this {agent} hook",
        verdict.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_spell_out_the_claude_style_shapes() {
        let parse = |r: CallerReply| -> Value { serde_json::from_slice(&r.stdout).unwrap() };
        assert_eq!(
            parse(permission_decision("E", "deny", "no", None)),
            json!({"hookSpecificOutput": {"hookEventName": "E", "permissionDecision": "deny", "permissionDecisionReason": "no"}})
        );
        assert_eq!(
            parse(permission_decision(
                "E",
                "allow",
                "ok",
                Some(json!({"c": 1}))
            ))["hookSpecificOutput"]["updatedInput"],
            json!({"c": 1})
        );
        assert_eq!(
            parse(decision("block", "r")),
            json!({"decision": "block", "reason": "r"})
        );
        assert_eq!(context_or_silence("E", None), CallerReply::default());
        assert_eq!(
            parse(context_or_silence("E", Some("C".into()))),
            json!({"hookSpecificOutput": {"hookEventName": "E", "additionalContext": "C"}})
        );
        let r = stderr_exit("why", 2);
        assert_eq!(
            (r.stdout.len(), r.stderr, r.exit_code),
            (0, b"why\n".to_vec(), 2)
        );
        assert!(json_stdout(json!({})).stdout.ends_with(b"}\n"));
        let block = Final::Block { reason: "r".into() };
        assert_eq!(notification(&block, 1), stderr_exit("r", 1));
        assert_eq!(
            notification(&Final::no_opinion(), 1),
            CallerReply::default()
        );
        let Final::Block { reason } = unapplicable("x") else {
            panic!("a modify that cannot be applied is a block");
        };
        assert_eq!(reason, unapplicable_modify("x"));
    }
}
