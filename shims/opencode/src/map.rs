//! What our OpenCode plugin relays, to AHP events. Table in the README.
//!
//! The plugin sends, for a plugin hook, `{input, output, directory, worktree}` (OpenCode's
//! own two arguments, untouched) and, for a bus event, `{event, directory, worktree}` plus
//! `response` on `session.idle` (the session's last assistant text, which the plugin keeps).

use serde_json::{json, Map, Value};

#[cfg(test)]
use super::OPENCODE;
use super::{Flavor, OpenCodeEvent};
use ahp_wrap_adapter::shared::payload::HookPayload;
use ahp_wrap_adapter::{EventType, FrameworkError, HookContext, Mapped};

pub(crate) fn map(
    flavor: &Flavor,
    cx: &HookContext<'_>,
    payload: &[u8],
) -> Result<Option<Mapped>, FrameworkError> {
    let name = flavor.shim.framework;
    let event = OpenCodeEvent::parse(cx.hook).ok_or_else(|| flavor.shim.unknown_hook(cx.hook))?;
    let p = HookPayload::parse(name, cx, payload)?;
    // A plugin hook's `input`, or a bus event's `properties`.
    let fields = match p
        .get("input")
        .or_else(|| p.get("event").map(|e| &e["properties"]))
    {
        Some(Value::Object(o)) => o.clone(),
        _ => return Err(p.shape("neither an \"input\" nor an \"event\" object")),
    };
    let session = fields
        .get("sessionID")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let context = context(cx, &p, session.as_deref());
    let (event_type, payload) = match event {
        OpenCodeEvent::ToolExecuteBefore => {
            (EventType::PreAction, tool_call(&p, &fields, context)?)
        }
        OpenCodeEvent::ToolExecuteAfter => {
            let mut call = tool_call(&p, &fields, context)?;
            let out = p.require("output")?;
            call["result"] = json!({
                "status": "success",
                "output": out["output"],
                "title": out["title"],
                "metadata": out["metadata"],
                "duration_ms": null,
            });
            (EventType::PostAction, call)
        }
        OpenCodeEvent::ChatMessage => (EventType::PrePrompt, prompt(&p, context)?),
        OpenCodeEvent::SessionCreated => {
            let info = &fields.get("info").cloned().unwrap_or(Value::Null);
            let payload = json!({
                "framework": name,
                "source": "created",
                "model": null,
                "framework_session_id": session,
                "parent_session_id": info["parentID"],
                "title": info["title"],
                "context": context,
            });
            (EventType::SessionStart, payload)
        }
        OpenCodeEvent::SessionIdle => (
            EventType::PostResponse,
            json!({"response": p.field("response"), "context": context}),
        ),
        OpenCodeEvent::SessionError => (
            EventType::Error,
            json!({"source": "agent", "error": fields.get("error"), "context": context}),
        ),
        OpenCodeEvent::SessionDeleted => (
            EventType::SessionEnd,
            json!({"framework": name, "reason": "deleted", "framework_session_id": session, "context": context}),
        ),
    };
    Ok(Some(Mapped {
        event_type,
        payload,
        framework_session: session,
    }))
}

/// Where OpenCode runs: the plugin's project directory (else the hook process's), its
/// worktree and the session.
fn context(cx: &HookContext<'_>, p: &HookPayload<'_>, session: Option<&str>) -> Value {
    let mut c = Map::new();
    let dir = p
        .get("directory")
        .cloned()
        .unwrap_or_else(|| cx.cwd.display().to_string().into());
    c.insert("working_directory".into(), dir);
    if let Some(w) = p.get("worktree") {
        c.insert("worktree".into(), w.clone());
    }
    if let Some(s) = session {
        c.insert("framework_session_id".into(), s.into());
    }
    Value::Object(c)
}

/// A `tool_call` action: OpenCode's tool id, its arguments (`output.args`) and call id.
fn tool_call(
    p: &HookPayload<'_>,
    input: &Map<String, Value>,
    context: Value,
) -> Result<Value, FrameworkError> {
    let tool = input
        .get("tool")
        .filter(|t| t.is_string())
        .ok_or_else(|| p.shape("the \"input.tool\" string is missing"))?;
    // `tool.execute.after` carries the arguments in `input`, `before` in `output`.
    let args = input
        .get("args")
        .or_else(|| p.get("output").and_then(|o| o.get("args")))
        .filter(|a| a.is_object())
        .ok_or_else(|| p.shape("the tool's \"args\" object is missing"))?;
    Ok(json!({
        "action_type": "tool_call",
        "tool_name": tool,
        "arguments": args,
        "tool_call_id": input.get("callID"),
        "context": context,
    }))
}

/// A `pre_prompt`: the text parts the person typed (not OpenCode's synthetic ones), the
/// agent and the model.
fn prompt(p: &HookPayload<'_>, mut context: Value) -> Result<Value, FrameworkError> {
    let output = p.require("output")?;
    let parts = output["parts"]
        .as_array()
        .ok_or_else(|| p.shape("the \"output.parts\" list is missing"))?;
    let text: Vec<&str> = parts
        .iter()
        .filter(|part| part["type"] == "text" && part["synthetic"] != true)
        .filter_map(|part| part["text"].as_str())
        .collect();
    let message = &output["message"];
    context["agent"] = message["agent"].clone();
    context["model"] = message["model"].clone();
    context["message_id"] = message["id"].clone();
    Ok(json!({"prompt": text.join("\n"), "context": context}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_wrap_adapter::testing::{cx, sample};

    fn mapped(hook: &str) -> Mapped {
        map(&OPENCODE, &cx(hook), &sample("opencode", hook))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn every_sample_maps_to_its_event_type() {
        for (hook, event_type) in [
            ("session.created", EventType::SessionStart),
            ("chat.message", EventType::PrePrompt),
            ("tool.execute.before", EventType::PreAction),
            ("tool.execute.after", EventType::PostAction),
            ("session.idle", EventType::PostResponse),
        ] {
            let m = mapped(hook);
            assert_eq!(m.event_type, event_type, "{hook}");
            assert!(
                m.framework_session
                    .as_deref()
                    .is_some_and(|s| s.starts_with("ses_")),
                "{hook}"
            );
            assert!(
                m.payload["context"]["working_directory"].is_string(),
                "{hook}"
            );
        }
        let pre = mapped("tool.execute.before").payload;
        assert_eq!(pre["tool_name"], "bash");
        assert!(pre["arguments"]["command"]
            .as_str()
            .unwrap()
            .contains("OUT-OPENCODE"));
        assert!(pre["tool_call_id"].as_str().unwrap().starts_with("call_"));
        let post = mapped("tool.execute.after").payload;
        assert!(post["result"]["output"]
            .as_str()
            .unwrap()
            .contains("OUT-OPENCODE"));
        assert_eq!(post["result"]["metadata"]["exit"], 0);
        assert!(mapped("chat.message").payload["prompt"]
            .as_str()
            .unwrap()
            .contains("do the task"));
        assert_eq!(mapped("session.idle").payload["response"], "All done.");
    }

    #[test]
    fn errors_and_ends_map_and_malformed_payloads_are_errors() {
        let err = br#"{"event": {"type": "session.error", "properties": {"sessionID": "ses_1", "error": {"name": "X"}}}}"#;
        let m = map(&OPENCODE, &cx("session.error"), err).unwrap().unwrap();
        assert_eq!(
            (m.event_type, m.payload["error"]["name"].clone()),
            (EventType::Error, "X".into())
        );
        let end =
            br#"{"event": {"type": "session.deleted", "properties": {"sessionID": "ses_1"}}}"#;
        assert_eq!(
            map(&OPENCODE, &cx("session.deleted"), end)
                .unwrap()
                .unwrap()
                .event_type,
            EventType::SessionEnd
        );
        assert!(map(&OPENCODE, &cx("tool.execute.before"), b"{}").is_err());
        assert!(map(
            &OPENCODE,
            &cx("tool.execute.before"),
            br#"{"input": {"tool": "bash"}, "output": {}}"#
        )
        .is_err());
        assert!(map(
            &OPENCODE,
            &cx("chat.message"),
            br#"{"input": {}, "output": {}}"#
        )
        .is_err());
        assert!(map(&OPENCODE, &cx("permission.ask"), b"{}").is_err());
        assert!(map(&OPENCODE, &cx("session.idle"), b"[]").is_err());
    }
}
