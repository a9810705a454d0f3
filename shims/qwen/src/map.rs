//! Qwen Code hook payloads (stdin JSON, Claude-style) to AHP events. Table in the README.

use serde_json::{json, Map, Value};

use super::{QwenEvent, NAME};
use crate::frameworks::{FrameworkError, HookContext, Mapped};
use crate::protocol::EventType;

pub fn map(cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
    let shape = |why: String| FrameworkError::Shape {
        framework: NAME,
        hook: cx.hook.to_owned(),
        why,
    };
    let event = QwenEvent::parse(cx.hook)
        .ok_or_else(|| shape("ahp-wrap registers no such Qwen Code hook".into()))?;
    let input: Value = serde_json::from_slice(payload)?;
    let obj = input
        .as_object()
        .ok_or_else(|| shape("expected a JSON object".into()))?;
    let field = |k: &str| obj.get(k).cloned().unwrap_or(Value::Null);
    let require = |k: &str| {
        obj.get(k)
            .cloned()
            .ok_or_else(|| shape(format!("the {k:?} field is missing")))
    };
    let context = context(cx, obj);
    let (event_type, payload) = match event {
        QwenEvent::PreToolUse => (
            EventType::PreAction,
            tool_call(obj, require("tool_name")?, context),
        ),
        QwenEvent::PostToolUse => {
            let mut p = tool_call(obj, require("tool_name")?, context);
            p["result"] = json!({
                "status": "success",
                "output": field("tool_response"),
                "duration_ms": field("duration_ms"),
            });
            (EventType::PostAction, p)
        }
        QwenEvent::PostToolUseFailure => {
            let mut p = tool_call(obj, require("tool_name")?, context);
            p["result"] = json!({
                "status": "error",
                "error": field("error"),
                "duration_ms": field("duration_ms"),
            });
            (EventType::PostAction, p)
        }
        QwenEvent::UserPromptSubmit => (
            EventType::PrePrompt,
            json!({"prompt": require("prompt")?, "context": context}),
        ),
        QwenEvent::SessionStart => (
            EventType::SessionStart,
            json!({
                "framework": NAME,
                "source": field("source"),
                "model": field("model"),
                "framework_session_id": field("session_id"),
                "context": context,
            }),
        ),
        QwenEvent::SessionEnd => (
            EventType::SessionEnd,
            json!({
                "framework": NAME,
                "reason": field("reason"),
                "framework_session_id": field("session_id"),
                "context": context,
            }),
        ),
        QwenEvent::Stop => (
            EventType::PostResponse,
            json!({
                "response": field("last_assistant_message"),
                "stop_hook_active": field("stop_hook_active"),
                "context": context,
            }),
        ),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: obj
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }))
}

/// `action_type`, `tool_name`, `arguments` (= Qwen's `tool_input`), the call ids.
fn tool_call(obj: &Map<String, Value>, tool_name: Value, context: Value) -> Value {
    let mut p = json!({
        "action_type": "tool_call",
        "tool_name": tool_name,
        "arguments": obj.get("tool_input").cloned().unwrap_or_else(|| json!({})),
        "context": context,
    });
    for k in ["tool_use_id", "tool_call_id"] {
        if let Some(id) = obj.get(k) {
            p[k] = id.clone();
        }
    }
    p
}

fn context(cx: &HookContext<'_>, obj: &Map<String, Value>) -> Value {
    let mut c = Map::new();
    let cwd = obj
        .get("cwd")
        .cloned()
        .unwrap_or_else(|| cx.cwd.display().to_string().into());
    c.insert("working_directory".into(), cwd);
    for (k, key) in [
        ("permission_mode", "permission_mode"),
        ("transcript_path", "transcript_path"),
        ("session_id", "framework_session_id"),
        ("prompt_id", "prompt_id"),
    ] {
        if let Some(v) = obj.get(k) {
            c.insert(key.into(), v.clone());
        }
    }
    Value::Object(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn mapped(hook: &str) -> Mapped {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("shims/qwen/samples")
            .join(format!("{hook}.json"));
        let payload = std::fs::read(&path).unwrap();
        let cx = HookContext {
            hook,
            cwd: Path::new("/"),
            interactive: false,
        };
        map(&cx, &payload).unwrap().unwrap()
    }

    #[test]
    fn every_sample_maps_to_its_event_type() {
        for (hook, event_type) in [
            ("SessionStart", EventType::SessionStart),
            ("UserPromptSubmit", EventType::PrePrompt),
            ("PreToolUse", EventType::PreAction),
            ("PostToolUse", EventType::PostAction),
            ("Stop", EventType::PostResponse),
        ] {
            let m = mapped(hook);
            assert_eq!(m.event_type, event_type, "{hook}");
            assert_eq!(
                m.framework_session.as_deref(),
                Some("68207c0a-20a2-43b4-be58-5eaa5468bd17"),
                "{hook}"
            );
        }
        let pre = mapped("PreToolUse").payload;
        assert_eq!(pre["tool_name"], "run_shell_command");
        assert!(pre["arguments"]["command"]
            .as_str()
            .unwrap()
            .ends_with("echo OUT-QWEN"));
        assert_eq!(pre["tool_call_id"], "call_8b7a252424f745ad80ed");
        assert_eq!(pre["context"]["permission_mode"], "yolo");
        assert_eq!(
            pre["context"]["working_directory"],
            "/home/dev/runs/qwen_basic/work"
        );
        let post = mapped("PostToolUse").payload;
        assert_eq!(post["result"]["output"]["returnDisplay"], "OUT-QWEN");
        assert_eq!(post["result"]["duration_ms"], 90);
        assert_eq!(mapped("UserPromptSubmit").payload["prompt"], "run it");
        assert_eq!(mapped("Stop").payload["response"], "Done.");
    }

    #[test]
    fn malformed_payloads_are_errors() {
        let cx = |hook| HookContext {
            hook,
            cwd: Path::new("/"),
            interactive: false,
        };
        assert!(map(&cx("PreToolUse"), b"{}").is_err());
        assert!(map(&cx("PreToolUse"), b"[]").is_err());
        assert!(map(&cx("UserPromptSubmit"), b"{}").is_err());
        assert!(map(&cx("Notification"), b"{}").is_err());
    }
}
