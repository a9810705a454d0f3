//! Qwen Code hook payloads (stdin JSON, Claude-style) to AHP events. Table in the README.

use serde_json::{json, Value};

use super::{QwenEvent, NAME, SHIM};
use crate::frameworks::adapter::shared::payload::HookPayload;
use crate::frameworks::adapter::{EventType, FrameworkError, HookContext, Mapped};

/// The call ids Qwen gives a tool call (it has sent both names).
const CALL_IDS: &[&str] = &["tool_use_id", "tool_call_id"];

pub fn map(cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
    let event = QwenEvent::parse(cx.hook).ok_or_else(|| SHIM.unknown_hook(cx.hook))?;
    let p = HookPayload::parse(NAME, cx, payload)?;
    let context = context(cx, &p);

    let (event_type, payload) = match event {
        QwenEvent::PreToolUse => (EventType::PreAction, p.tool_call(context, CALL_IDS)?),
        QwenEvent::PostToolUse => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            call["result"] = p.tool_success();
            (EventType::PostAction, call)
        }
        QwenEvent::PostToolUseFailure => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            call["result"] = json!({
                "status": "error",
                "error": p.field("error"),
                "duration_ms": p.field("duration_ms"),
            });
            (EventType::PostAction, call)
        }
        QwenEvent::UserPromptSubmit => (EventType::PrePrompt, p.prompt(context)?),
        QwenEvent::SessionStart => (EventType::SessionStart, p.session_start(NAME, context)),
        QwenEvent::SessionEnd => (EventType::SessionEnd, p.session_end(NAME, context)),
        QwenEvent::Stop => (EventType::PostResponse, p.stop(context)),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: p.session_id(),
    }))
}

/// Where and how Qwen runs: what a harness needs beside the action itself.
fn context(cx: &HookContext<'_>, p: &HookPayload<'_>) -> Value {
    Value::Object(p.context(
        cx,
        &[
            ("permission_mode", "permission_mode"),
            ("transcript_path", "transcript_path"),
            ("session_id", "framework_session_id"),
            ("prompt_id", "prompt_id"),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frameworks::adapter::testing::{cx, sample};

    fn mapped(hook: &str) -> Mapped {
        map(&cx(hook), &sample("qwen", hook)).unwrap().unwrap()
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
        assert!(map(&cx("PreToolUse"), b"{}").is_err());
        assert!(map(&cx("PreToolUse"), b"[]").is_err());
        assert!(map(&cx("UserPromptSubmit"), b"{}").is_err());
        assert!(map(&cx("Notification"), b"{}").is_err());
    }
}
