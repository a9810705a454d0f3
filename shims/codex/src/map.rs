//! Codex hook payloads (stdin JSON) to AHP events. The table is in the README.

use serde_json::{json, Value};

use super::{CodexEvent, NAME, SHIM};
use ahp_wrap_adapter::shared::payload::HookPayload;
use ahp_wrap_adapter::{EventType, FrameworkError, HookContext, Mapped};

/// The call id Codex gives a tool call.
const CALL_IDS: &[&str] = &["tool_use_id"];

pub(crate) fn map(cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
    let event = CodexEvent::parse(cx.hook).ok_or_else(|| SHIM.unknown_hook(cx.hook))?;
    let p = HookPayload::parse(NAME, cx, payload)?;
    let context = context(cx, &p);

    let (event_type, payload) = match event {
        CodexEvent::PreToolUse => (EventType::PreAction, p.tool_call(context, CALL_IDS)?),
        CodexEvent::PermissionRequest => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            let why = p
                .get("tool_input")
                .and_then(|i| i.get("description"))
                .and_then(Value::as_str);
            call["message"] = match why {
                Some(why) => format!("Codex asks to run this outside its sandbox: {why}"),
                None => "Codex asks to run this outside its sandbox".to_owned(),
            }
            .into();
            (EventType::Confirmation, call)
        }
        CodexEvent::PostToolUse => {
            let mut call = p.tool_call(context, CALL_IDS)?;
            // Codex reports the tool's output (a string for the shell tool), not its status:
            // the call completed, whatever its exit code.
            call["result"] = json!({"status": "success", "output": p.field("tool_response")});
            (EventType::PostAction, call)
        }
        CodexEvent::UserPromptSubmit => (EventType::PrePrompt, p.prompt(context)?),
        CodexEvent::SessionStart => (EventType::SessionStart, p.session_start(NAME, context)),
        CodexEvent::SessionEnd => (EventType::SessionEnd, p.session_end(NAME, context)),
        CodexEvent::Stop => (EventType::PostResponse, p.stop(context)),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: p.session_id(),
    }))
}

/// Where and how Codex runs: what a harness needs beside the action itself.
fn context(cx: &HookContext<'_>, p: &HookPayload<'_>) -> Value {
    let mut c = p.context(
        cx,
        &[
            ("permission_mode", "permission_mode"),
            ("transcript_path", "transcript_path"),
            ("session_id", "framework_session_id"),
            ("turn_id", "turn_id"),
            ("model", "model"),
        ],
    );
    // Codex sends null for what a run does not have (`--ephemeral`: no transcript).
    c.retain(|k, v| k == "working_directory" || !v.is_null());
    Value::Object(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::cx;

    pub(super) fn sample(event: &str) -> Vec<u8> {
        ahp_wrap_adapter::testing::sample("codex", event)
    }

    fn mapped(hook: &str) -> Mapped {
        map(&cx(hook), &sample(hook)).unwrap().unwrap()
    }

    #[test]
    fn pre_tool_use_is_a_tool_call_pre_action() {
        let m = mapped("PreToolUse");
        assert_eq!(m.event_type, EventType::PreAction);
        assert_eq!(
            m.framework_session.as_deref(),
            Some("01a20123-2158-7e21-a3ea-4f658f16becf")
        );
        let p = &m.payload;
        assert_eq!(p["action_type"], "tool_call");
        assert_eq!(p["tool_name"], "Bash");
        assert_eq!(p["tool_use_id"], "call_69a895bf8463445d89a0");
        assert!(p["arguments"]["command"]
            .as_str()
            .unwrap()
            .starts_with("echo RAN-samples"));
        let c = &p["context"];
        assert_eq!(c["working_directory"], "/tmp/codex-runs/codex_samples/work");
        assert_eq!(c["permission_mode"], "bypassPermissions");
        assert_eq!(c["model"], "gpt-fake");
        assert!(c["turn_id"].is_string());
        // `--ephemeral` runs have no transcript: a null is left out.
        assert!(c.get("transcript_path").is_none());
    }

    #[test]
    fn every_sample_maps_to_its_event_type() {
        for (hook, event_type) in [
            ("SessionStart", EventType::SessionStart),
            ("UserPromptSubmit", EventType::PrePrompt),
            ("PermissionRequest", EventType::Confirmation),
            ("PostToolUse", EventType::PostAction),
            ("Stop", EventType::PostResponse),
            ("SessionEnd", EventType::SessionEnd),
        ] {
            let m = mapped(hook);
            assert_eq!(m.event_type, event_type, "{hook}");
            assert!(m.framework_session.is_some(), "{hook}");
        }
        assert_eq!(mapped("UserPromptSubmit").payload["prompt"], "run it");
        let post = mapped("PostToolUse").payload;
        assert_eq!(post["result"]["output"], "OUT-samples\n");
        assert_eq!(post["result"]["status"], "success");
        let perm = mapped("PermissionRequest").payload;
        assert!(perm["arguments"]["command"]
            .as_str()
            .unwrap()
            .starts_with("echo RAN-permreq_allow"));
        assert!(perm.get("tool_use_id").is_none());
        assert!(perm["message"]
            .as_str()
            .unwrap()
            .contains("need to write the marker"));
        let stop = mapped("Stop").payload;
        assert_eq!(stop["response"], "Done.");
        assert_eq!(stop["stop_hook_active"], false);
        let start = mapped("SessionStart").payload;
        assert_eq!(start["source"], "startup");
        assert_eq!(
            start["framework_session_id"],
            "01a20123-2158-7e21-a3ea-4f658f16becf"
        );
        assert_eq!(mapped("SessionEnd").payload["reason"], "other");
    }

    #[test]
    fn malformed_payloads_are_errors() {
        assert!(map(&cx("PreToolUse"), b"nope").is_err());
        assert!(map(&cx("PreToolUse"), b"[]").is_err());
        assert!(map(&cx("PreToolUse"), b"{}").is_err());
        assert!(map(&cx("UserPromptSubmit"), b"{}").is_err());
        assert!(map(&cx("PreCompact"), b"{}").is_err());
    }
}
