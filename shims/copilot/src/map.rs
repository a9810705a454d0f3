//! Copilot CLI hook payloads (stdin JSON, camelCase: `toolName`, `toolArgs`, `sessionId`)
//! to AHP events. Table in the README.

use serde_json::{json, Map, Value};

use super::{CopilotEvent, NAME, SHIM};
use ahp_wrap_adapter::shared::payload::HookPayload;
use ahp_wrap_adapter::{EventType, FrameworkError, HookContext, Mapped};

pub(crate) fn map(cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
    let event = CopilotEvent::parse(cx.hook).ok_or_else(|| SHIM.unknown_hook(cx.hook))?;
    let p = HookPayload::parse(NAME, cx, payload)?;
    let context = Value::Object(p.context(
        cx,
        &[
            ("sessionId", "framework_session_id"),
            ("transcriptPath", "transcript_path"),
        ],
    ));

    let (event_type, payload) = match event {
        CopilotEvent::PreToolUse => (EventType::PreAction, tool_call(&p, context, "toolArgs")?),
        CopilotEvent::PermissionRequest => {
            let mut call = tool_call(&p, context, "toolInput")?;
            if let Some(s) = p.get("permissionSuggestions") {
                call["permission_suggestions"] = s.clone();
            }
            (EventType::Confirmation, call)
        }
        CopilotEvent::PostToolUse | CopilotEvent::PostToolUseFailure => {
            let mut call = tool_call(&p, context, "toolArgs")?;
            let result = p.field("toolResult");
            let failed = event == CopilotEvent::PostToolUseFailure
                || result["resultType"]
                    .as_str()
                    .is_some_and(|t| t != "success");
            call["result"] = if failed {
                json!({"status": "error", "error": first_of(&p, &result, &["error", "textResultForLlm"])})
            } else {
                json!({"status": "success", "output": result["textResultForLlm"].clone()})
            };
            (EventType::PostAction, call)
        }
        CopilotEvent::UserPromptSubmitted => (EventType::PrePrompt, p.prompt(context)?),
        CopilotEvent::SessionStart => (
            EventType::SessionStart,
            json!({
                "framework": NAME,
                "source": p.field("source"),
                "initial_prompt": p.field("initialPrompt"),
                "framework_session_id": p.field("sessionId"),
                "context": context,
            }),
        ),
        CopilotEvent::SessionEnd => (
            EventType::SessionEnd,
            json!({
                "framework": NAME,
                "reason": p.field("reason"),
                "framework_session_id": p.field("sessionId"),
                "context": context,
            }),
        ),
        // Copilot's agentStop carries no final text, only where the transcript is.
        CopilotEvent::AgentStop => (
            EventType::PostResponse,
            json!({
                "response": p.field("lastAssistantMessage"),
                "stop_reason": p.field("stopReason"),
                "context": context,
            }),
        ),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: p.str("sessionId").map(str::to_owned),
    }))
}

/// A `tool_call` action from `toolName` and the arguments in `args_key` (an object, or a
/// JSON string holding one, which older Copilot releases sent).
fn tool_call(p: &HookPayload<'_>, context: Value, args_key: &str) -> Result<Value, FrameworkError> {
    let arguments = match p.get(args_key) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err(p.shape(format!("{args_key:?} is a string but not a JSON object"))),
        },
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(p.shape(format!("{args_key:?} is not an object"))),
    };
    Ok(json!({
        "action_type": "tool_call",
        "tool_name": p.require("toolName")?,
        "arguments": arguments,
        "context": context,
    }))
}

fn first_of(p: &HookPayload<'_>, result: &Value, keys: &[&str]) -> Value {
    keys.iter()
        .find_map(|k| p.get(k).or_else(|| result.get(*k)).cloned())
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{cx, sample};

    fn mapped(hook: &str) -> Mapped {
        map(&cx(hook), &sample("copilot", hook)).unwrap().unwrap()
    }

    #[test]
    fn every_sample_maps_to_its_event_type() {
        for (hook, event_type) in [
            ("sessionStart", EventType::SessionStart),
            ("userPromptSubmitted", EventType::PrePrompt),
            ("preToolUse", EventType::PreAction),
            ("permissionRequest", EventType::Confirmation),
            ("postToolUse", EventType::PostAction),
            ("agentStop", EventType::PostResponse),
            ("sessionEnd", EventType::SessionEnd),
        ] {
            let m = mapped(hook);
            assert_eq!(m.event_type, event_type, "{hook}");
            assert_eq!(
                m.framework_session.as_deref(),
                Some("fb3cbdea-ce2f-48b8-94ec-df4601109824"),
                "{hook}"
            );
        }
        let pre = mapped("preToolUse").payload;
        assert_eq!(pre["action_type"], "tool_call");
        assert_eq!(pre["tool_name"], "bash");
        assert_eq!(
            pre["arguments"]["command"],
            "echo ALLOWED > marker_allowed.txt"
        );
        assert_eq!(
            pre["context"]["working_directory"],
            "/home/dev/runs/h_user/work"
        );
        let perm = mapped("permissionRequest").payload;
        assert_eq!(
            perm["arguments"]["command"],
            "echo ALLOWED > marker_allowed.txt"
        );
        let post = mapped("postToolUse").payload;
        assert_eq!(post["result"]["status"], "success");
        assert!(post["result"]["output"]
            .as_str()
            .unwrap()
            .contains("exit code 0"));
        assert_eq!(
            mapped("userPromptSubmitted").payload["prompt"],
            "run the commands"
        );
        assert_eq!(mapped("sessionEnd").payload["reason"], "complete");
        assert_eq!(mapped("agentStop").payload["stop_reason"], "end_turn");
        assert!(mapped("agentStop").payload["context"]["transcript_path"].is_string());
    }

    #[test]
    fn string_arguments_failures_and_malformed_payloads() {
        let m = map(
            &cx("preToolUse"),
            br#"{"toolName":"bash","toolArgs":"{\"command\":\"ls\"}"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(m.payload["arguments"]["command"], "ls");
        let f = map(
            &cx("postToolUseFailure"),
            br#"{"toolName":"bash","toolArgs":{},"error":"boom"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            f.payload["result"],
            json!({"status": "error", "error": "boom"})
        );
        assert!(map(&cx("preToolUse"), b"{}").is_err());
        assert!(map(&cx("preToolUse"), br#"{"toolName":"x","toolArgs":"nope"}"#).is_err());
        assert!(map(&cx("preToolUse"), b"[]").is_err());
        assert!(map(&cx("userPromptSubmitted"), b"{}").is_err());
        assert!(map(&cx("notification"), b"{}").is_err());
    }
}
