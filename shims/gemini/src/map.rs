//! Gemini CLI hook payloads (stdin JSON) to AHP events. The table is in the README.

use serde_json::{json, Value};

use super::{GeminiEvent, NAME, SHIM};
use ahp_wrap_adapter::shared::payload::HookPayload;
use ahp_wrap_adapter::{EventType, FrameworkError, HookContext, Mapped};

/// Gemini gives a tool call no id in its hooks.
const CALL_IDS: &[&str] = &[];

pub(crate) fn map(cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
    let event = GeminiEvent::parse(cx.hook).ok_or_else(|| SHIM.unknown_hook(cx.hook))?;
    let p = HookPayload::parse(NAME, cx, payload)?;
    let context = context(cx, &p);

    let (event_type, payload) = match event {
        GeminiEvent::BeforeTool => (EventType::PreAction, p.tool_call(context, CALL_IDS)?),
        GeminiEvent::AfterTool => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            call["result"] = tool_result(p.get("tool_response"));
            (EventType::PostAction, call)
        }
        GeminiEvent::BeforeAgent => (
            EventType::PrePrompt,
            json!({"prompt": p.require("prompt")?, "stage": "user_prompt", "context": context}),
        ),
        GeminiEvent::BeforeModel => (EventType::PrePrompt, model_request(&p, context)?),
        GeminiEvent::AfterAgent => (
            EventType::PostResponse,
            json!({
                "response": p.field("prompt_response"),
                "prompt": p.field("prompt"),
                "stop_hook_active": p.field("stop_hook_active"),
                "context": context,
            }),
        ),
        GeminiEvent::SessionStart => (
            EventType::SessionStart,
            json!({
                "framework": NAME,
                "source": p.field("source"),
                "framework_session_id": p.field("session_id"),
                "context": context,
            }),
        ),
        GeminiEvent::SessionEnd => (EventType::SessionEnd, p.session_end(NAME, context)),
        GeminiEvent::Notification => (EventType::RunLifecycle, notification(&p, context)),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: p.session_id(),
    }))
}

/// `BeforeModel`: the request about to go to the model, as a `model_request` prompt.
fn model_request(p: &HookPayload<'_>, context: Value) -> Result<Value, FrameworkError> {
    let request = p.require("llm_request")?;
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| p.shape("\"llm_request.messages\" is not a list"))?;
    // The last user message is what is new in this request; the harness gets the
    // whole conversation too, since a block keeps all of it from the model.
    let prompt = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].clone())
        .unwrap_or(Value::Null);
    Ok(json!({
        "prompt": prompt,
        "stage": "model_request",
        "model": request.get("model").cloned().unwrap_or(Value::Null),
        "messages": messages,
        "context": context,
    }))
}

/// `Notification`: a run-lifecycle event, `awaiting_permission` when Gemini asks the user
/// to allow a tool.
fn notification(p: &HookPayload<'_>, context: Value) -> Value {
    json!({
        "phase": if p.str("notification_type") == Some("ToolPermission") {
            "awaiting_permission"
        } else {
            "notification"
        },
        "notification_type": p.field("notification_type"),
        "message": p.field("message"),
        "details": p.field("details"),
        "context": context,
    })
}

/// Gemini's `tool_response: {llmContent, returnDisplay, error?}` as an AHP result.
fn tool_result(response: Option<&Value>) -> Value {
    let response = response.cloned().unwrap_or(Value::Null);
    match response.get("error").filter(|e| !e.is_null()) {
        Some(error) => json!({"status": "error", "error": error, "output": response}),
        None => json!({"status": "success", "output": response}),
    }
}

/// Where Gemini runs: what a harness needs beside the action itself.
fn context(cx: &HookContext<'_>, p: &HookPayload<'_>) -> Value {
    Value::Object(p.context(
        cx,
        &[
            ("transcript_path", "transcript_path"),
            ("session_id", "framework_session_id"),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::cx;

    fn sample(event: &str) -> Vec<u8> {
        ahp_wrap_adapter::testing::sample("gemini", event)
    }

    fn mapped(hook: &str, payload: &[u8]) -> Mapped {
        map(&cx(hook), payload).unwrap().unwrap()
    }

    #[test]
    fn before_tool_is_a_tool_call_pre_action() {
        let m = mapped("BeforeTool", &sample("BeforeTool"));
        assert_eq!(m.event_type, EventType::PreAction);
        assert_eq!(
            m.framework_session.as_deref(),
            Some("cf704134-ce38-413c-86ae-47bb1baa6ad6")
        );
        let p = &m.payload;
        assert_eq!(p["action_type"], "tool_call");
        assert_eq!(p["tool_name"], "run_shell_command");
        assert!(p["arguments"]["command"]
            .as_str()
            .unwrap()
            .starts_with("echo RAN-samples"));
        assert_eq!(p["arguments"]["description"], "t");
        assert_eq!(
            p["context"]["working_directory"],
            "/home/dev/runs/gemini_samples/work"
        );
        assert!(p["context"]["transcript_path"].is_string());
    }

    #[test]
    fn every_sample_maps_to_its_event_type() {
        for (hook, event_type) in [
            ("SessionStart", EventType::SessionStart),
            ("BeforeAgent", EventType::PrePrompt),
            ("BeforeModel", EventType::PrePrompt),
            ("AfterTool", EventType::PostAction),
            ("AfterAgent", EventType::PostResponse),
            ("Notification", EventType::RunLifecycle),
            ("SessionEnd", EventType::SessionEnd),
        ] {
            let m = mapped(hook, &sample(hook));
            assert_eq!(m.event_type, event_type, "{hook}");
            assert!(m.framework_session.is_some(), "{hook}");
        }
        let agent = mapped("BeforeAgent", &sample("BeforeAgent"));
        assert_eq!(agent.payload["prompt"], "run it");
        assert_eq!(agent.payload["stage"], "user_prompt");
        let model = mapped("BeforeModel", &sample("BeforeModel"));
        assert_eq!(model.payload["stage"], "model_request");
        assert_eq!(model.payload["model"], "gemini-2.5-flash");
        assert!(model.payload["prompt"]
            .as_str()
            .unwrap()
            .ends_with("run it"));
        assert_eq!(model.payload["messages"].as_array().unwrap().len(), 1);
        let after = mapped("AfterTool", &sample("AfterTool"));
        assert_eq!(after.payload["result"]["status"], "success");
        assert_eq!(
            after.payload["result"]["output"]["returnDisplay"],
            "OUT-samples"
        );
        let done = mapped("AfterAgent", &sample("AfterAgent"));
        assert_eq!(done.payload["response"], "Done.");
        let note = mapped("Notification", &sample("Notification"));
        assert_eq!(note.payload["phase"], "awaiting_permission");
        assert_eq!(note.payload["details"]["type"], "exec");
        let end = mapped("SessionEnd", &sample("SessionEnd"));
        assert_eq!(end.payload["reason"], "exit");
    }

    #[test]
    fn a_failed_tool_is_an_error_result() {
        let m = mapped(
            "AfterTool",
            br#"{"session_id":"s","tool_name":"read_file","tool_input":{},"tool_response":{"llmContent":"x","error":"no such file"}}"#,
        );
        assert_eq!(m.payload["result"]["status"], "error");
        assert_eq!(m.payload["result"]["error"], "no such file");
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(map(&cx("BeforeTool"), b"nope").is_err());
        assert!(map(&cx("BeforeTool"), b"[]").is_err());
        assert!(map(&cx("BeforeTool"), b"{}").is_err());
        assert!(map(&cx("BeforeAgent"), b"{}").is_err());
        assert!(map(&cx("BeforeModel"), br#"{"llm_request":{}}"#).is_err());
        assert!(map(&cx("AfterModel"), b"{}").is_err());
    }
}
