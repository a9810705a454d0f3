//! Claude Code hook payloads (stdin JSON) to AHP events. The table is in the README.

use serde_json::{json, Value};

use super::{ClaudeEvent, HookName, NAME, SHIM};
use ahp_wrap_adapter::shared::payload::HookPayload;
use ahp_wrap_adapter::{EventType, FrameworkError, HookContext, Mapped};

/// How deep a Claude sub-agent runs below the agent it was started by. Claude's sub-agents
/// cannot start sub-agents of their own, so it is always one.
const SUBAGENT_DEPTH: u64 = 1;

/// The call id Claude gives a tool call.
const CALL_IDS: &[&str] = &["tool_use_id"];

pub(crate) fn map(cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
    let hook = HookName::parse(cx.hook).ok_or_else(|| SHIM.unknown_hook(cx.hook))?;
    let p = HookPayload::parse(NAME, cx, payload)?;
    let context = context(cx, &p);

    let (event_type, payload) = match hook.event {
        ClaudeEvent::PreToolUse => (EventType::PreAction, p.tool_call(context, CALL_IDS)?),
        ClaudeEvent::PermissionRequest => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            call["message"] = format!(
                "Claude Code asks permission to use {}",
                p.str("tool_name").unwrap_or("a tool")
            )
            .into();
            if let Some(s) = p.get("permission_suggestions") {
                call["permission_suggestions"] = s.clone();
            }
            (EventType::Confirmation, call)
        }
        ClaudeEvent::PostToolUse => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            call["result"] = p.tool_success();
            (EventType::PostAction, call)
        }
        ClaudeEvent::PostToolUseFailure => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            call["result"] = json!({
                "status": "error",
                "error": p.field("error"),
                "interrupted": p.field("is_interrupt"),
                "duration_ms": p.field("duration_ms"),
            });
            (EventType::PostAction, call)
        }
        ClaudeEvent::UserPromptSubmit => (EventType::PrePrompt, p.prompt(context)?),
        ClaudeEvent::SessionStart => (EventType::SessionStart, p.session_start(NAME, context)),
        ClaudeEvent::SessionEnd => (EventType::SessionEnd, p.session_end(NAME, context)),
        ClaudeEvent::Stop => (EventType::PostResponse, p.stop(context)),
        ClaudeEvent::StopFailure => (
            EventType::Error,
            json!({
                "source": "agent",
                "message": p.get("error").or(p.get("message")).cloned().unwrap_or_else(|| "Claude Code's turn ended with an error".into()),
                "details": p.to_value(),
                "context": context,
            }),
        ),
        ClaudeEvent::SubagentStart => (
            EventType::SessionStart,
            json!({
                "framework": NAME,
                "source": "subagent",
                "subagent": subagent(&p),
                "framework_session_id": p.field("session_id"),
                "context": context,
            }),
        ),
        ClaudeEvent::SubagentStop => (
            EventType::PostResponse,
            json!({
                "response": p.field("last_assistant_message"),
                "stop_hook_active": p.field("stop_hook_active"),
                "subagent": subagent(&p),
                "context": context,
            }),
        ),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: p.session_id(),
    }))
}

/// The sub-agent a hook call came from, with its depth below the main agent.
fn subagent(p: &HookPayload<'_>) -> Value {
    let mut s = json!({"depth": SUBAGENT_DEPTH});
    for k in ["agent_id", "agent_type", "agent_transcript_path"] {
        if let Some(v) = p.get(k) {
            s[k] = v.clone();
        }
    }
    s
}

/// Where and how Claude runs: what a harness needs beside the action itself.
fn context(cx: &HookContext<'_>, p: &HookPayload<'_>) -> Value {
    let mut c = p.context(
        cx,
        &[
            ("permission_mode", "permission_mode"),
            ("transcript_path", "transcript_path"),
            ("session_id", "framework_session_id"),
            ("prompt_id", "prompt_id"),
        ],
    );
    // Tool calls made inside a sub-agent say which one; they run one level deeper.
    if p.get("agent_id").is_some() {
        c.insert("subagent".into(), subagent(p));
    }
    Value::Object(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::cx;

    fn sample(event: &str) -> Vec<u8> {
        ahp_wrap_adapter::testing::sample("claude-code", event)
    }

    fn mapped(hook: &str, payload: &[u8]) -> Mapped {
        map(&cx(hook), payload).unwrap().unwrap()
    }

    #[test]
    fn pre_tool_use_is_a_tool_call_pre_action() {
        let m = mapped("PreToolUse.print", &sample("PreToolUse"));
        assert_eq!(m.event_type, EventType::PreAction);
        assert_eq!(
            m.framework_session.as_deref(),
            Some("20f50f66-bd7f-4038-a77f-9c8412abef47")
        );
        let p = &m.payload;
        assert_eq!(p["action_type"], "tool_call");
        assert_eq!(p["tool_name"], "Bash");
        assert_eq!(p["tool_use_id"], "toolu_a2faea40d0f64a78982d52ac");
        assert!(p["arguments"]["command"]
            .as_str()
            .unwrap()
            .starts_with("echo hello-from-bash"));
        assert_eq!(
            p["context"]["working_directory"],
            "/tmp/claude-runs/basic/work"
        );
        assert_eq!(p["context"]["permission_mode"], "default");
        assert!(p["context"]["transcript_path"].is_string());
    }

    #[test]
    fn every_sample_maps_to_its_event_type() {
        for (hook, event_type) in [
            ("SessionStart", EventType::SessionStart),
            ("UserPromptSubmit", EventType::PrePrompt),
            ("PermissionRequest", EventType::Confirmation),
            ("PostToolUse", EventType::PostAction),
            ("PostToolUseFailure", EventType::PostAction),
            ("Stop", EventType::PostResponse),
            ("SessionEnd", EventType::SessionEnd),
        ] {
            let m = mapped(hook, &sample(hook));
            assert_eq!(m.event_type, event_type, "{hook}");
            assert!(m.framework_session.is_some(), "{hook}");
        }
        let ups = mapped("UserPromptSubmit", &sample("UserPromptSubmit"));
        assert!(ups.payload["prompt"].is_string());
        let post = mapped("PostToolUse", &sample("PostToolUse"));
        assert_eq!(post.payload["result"]["status"], "success");
        assert_eq!(
            post.payload["result"]["output"]["stdout"],
            "hello-from-bash"
        );
        let fail = mapped("PostToolUseFailure", &sample("PostToolUseFailure"));
        assert_eq!(fail.payload["result"]["status"], "error");
        assert_eq!(fail.payload["result"]["error"], "Exit code 3\nfailing");
        let perm = mapped("PermissionRequest", &sample("PermissionRequest"));
        assert_eq!(
            perm.payload["arguments"]["command"],
            "touch /tmp/ahp_permreq"
        );
        assert!(perm.payload["permission_suggestions"].is_array());
        let stop = mapped("Stop", &sample("Stop"));
        assert_eq!(stop.payload["response"], "Final answer.");
        let start = mapped("SessionStart", &sample("SessionStart"));
        assert_eq!(
            start.payload["framework_session_id"],
            "20f50f66-bd7f-4038-a77f-9c8412abef47"
        );
    }

    #[test]
    fn subagents_carry_their_depth() {
        let m = mapped(
            "SubagentStop",
            br#"{"session_id":"s","hook_event_name":"SubagentStop","agent_id":"a1","agent_type":"Explore","last_assistant_message":"x"}"#,
        );
        assert_eq!(m.event_type, EventType::PostResponse);
        assert_eq!(m.payload["subagent"]["depth"], 1);
        assert_eq!(m.payload["subagent"]["agent_type"], "Explore");
        let m = mapped(
            "PreToolUse",
            br#"{"session_id":"s","tool_name":"Read","tool_input":{},"agent_id":"a1"}"#,
        );
        assert_eq!(m.payload["context"]["subagent"]["depth"], 1);
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(map(&cx("PreToolUse"), b"nope").is_err());
        assert!(map(&cx("PreToolUse"), b"[]").is_err());
        assert!(map(&cx("PreToolUse"), b"{}").is_err());
        assert!(map(&cx("UserPromptSubmit"), b"{}").is_err());
        assert!(map(&cx("MessageDisplay"), b"{}").is_err());
    }
}
