//! One hook call's stdin payload (a JSON object), read the way every shim's `map` reads it.
//!
//! Claude-style hook payloads (`tool_name`, `tool_input`, `tool_use_id`, `session_id`,
//! `cwd`, …) map to the same AHP `tool_call` payload and `context`; the shims choose which
//! fields they copy, since each agent sends a different set.

use serde_json::{json, Map, Value};

use crate::{FrameworkError, HookContext, ToolCall};

/// A payload that is not what `framework` sends for `hook`.
fn shape_error(framework: &'static str, hook: &str, why: impl Into<String>) -> FrameworkError {
    FrameworkError::Shape {
        framework,
        hook: hook.to_owned(),
        why: why.into(),
    }
}

/// A hook payload known to be a JSON object, with the hook it came from for errors.
#[derive(Debug)]
pub struct HookPayload<'a> {
    framework: &'static str,
    hook: &'a str,
    obj: Map<String, Value>,
}

impl<'a> HookPayload<'a> {
    /// Parses `payload`, which must be one JSON object.
    pub fn parse(
        framework: &'static str,
        cx: &HookContext<'a>,
        payload: &[u8],
    ) -> Result<HookPayload<'a>, FrameworkError> {
        let Value::Object(obj) = serde_json::from_slice(payload)? else {
            return Err(shape_error(framework, cx.hook, "expected a JSON object"));
        };
        Ok(HookPayload {
            framework,
            hook: cx.hook,
            obj,
        })
    }

    /// An error saying why this payload cannot be mapped.
    pub fn shape(&self, why: impl Into<String>) -> FrameworkError {
        shape_error(self.framework, self.hook, why)
    }

    /// The whole payload, as the agent sent it.
    pub fn to_value(&self) -> Value {
        Value::Object(self.obj.clone())
    }

    /// The field `key` as the agent sent it; `None` when absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.obj.get(key)
    }

    /// The field `key` if it is a string; `None` when absent or of another type.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.obj.get(key).and_then(Value::as_str)
    }

    /// The field, or null when the agent did not send it.
    pub fn field(&self, key: &str) -> Value {
        self.obj.get(key).cloned().unwrap_or(Value::Null)
    }

    /// The field, or a shape error when the agent did not send it.
    pub fn require(&self, key: &str) -> Result<Value, FrameworkError> {
        self.obj
            .get(key)
            .cloned()
            .ok_or_else(|| self.shape(format!("the {key:?} field is missing")))
    }

    /// The agent's own session id (`session_id`), recorded next to ours.
    pub fn session_id(&self) -> Option<String> {
        self.str("session_id").map(str::to_owned)
    }

    /// The AHP `context`: `working_directory` (the payload's `cwd`, else the hook
    /// process's), then each `(from, to)` field the payload has, renamed.
    pub fn context(&self, cx: &HookContext<'_>, fields: &[(&str, &str)]) -> Map<String, Value> {
        let mut c = Map::new();
        let cwd = self
            .obj
            .get("cwd")
            .cloned()
            .unwrap_or_else(|| cx.cwd.display().to_string().into());
        c.insert("working_directory".into(), cwd);
        for (from, to) in fields {
            if let Some(v) = self.obj.get(*from) {
                c.insert((*to).into(), v.clone());
            }
        }
        c
    }

    /// A `tool_call` action: `tool_name` (required), `arguments` (the payload's
    /// `tool_input`, else `{}`), `context`, and each of the call-id fields in `ids` the
    /// payload has.
    pub fn tool_call(&self, context: Value, ids: &[&str]) -> Result<Value, FrameworkError> {
        // A name that is not text is kept as its JSON text.
        let name = match self.require("tool_name")? {
            Value::String(name) => name,
            other => other.to_string(),
        };
        let arguments = self.obj.get("tool_input").cloned();
        let mut call = ToolCall::new(name, arguments.unwrap_or_else(|| json!({})), context);
        for k in ids {
            if let Some(id) = self.obj.get(*k) {
                call = call.with(k, id.clone());
            }
        }
        Ok(call.into_payload())
    }

    /// A `pre_prompt` payload: the user's `prompt` (required) and `context`.
    pub fn prompt(&self, context: Value) -> Result<Value, FrameworkError> {
        Ok(json!({"prompt": self.require("prompt")?, "context": context}))
    }

    /// The `result` of a tool call that completed: `tool_response` as its output, and
    /// `duration_ms` (null when the agent does not say).
    pub fn tool_success(&self) -> Value {
        json!({
            "status": "success",
            "output": self.field("tool_response"),
            "duration_ms": self.field("duration_ms"),
        })
    }

    /// A Claude-style `session_start` payload: `framework`, the payload's `source`,
    /// `model` and `session_id`, and `context`.
    pub fn session_start(&self, framework: &str, context: Value) -> Value {
        json!({
            "framework": framework,
            "source": self.field("source"),
            "model": self.field("model"),
            "framework_session_id": self.field("session_id"),
            "context": context,
        })
    }

    /// A Claude-style `session_end` payload: `framework`, the payload's `reason` and
    /// `session_id`, and `context`.
    pub fn session_end(&self, framework: &str, context: Value) -> Value {
        json!({
            "framework": framework,
            "reason": self.field("reason"),
            "framework_session_id": self.field("session_id"),
            "context": context,
        })
    }

    /// A Claude-style `Stop` as a `post_response` payload: the last assistant message,
    /// `stop_hook_active`, and `context`.
    pub fn stop(&self, context: Value) -> Value {
        json!({
            "response": self.field("last_assistant_message"),
            "stop_hook_active": self.field("stop_hook_active"),
            "context": context,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cx(hook: &str) -> HookContext<'_> {
        HookContext {
            hook,
            cwd: Path::new("/here"),
            interactive: false,
        }
    }

    #[test]
    fn only_json_objects_are_payloads() {
        assert!(matches!(
            HookPayload::parse("fw", &cx("H"), b"nope"),
            Err(FrameworkError::Payload(_))
        ));
        let e = HookPayload::parse("fw", &cx("H"), b"[]").unwrap_err();
        assert!(e.to_string().contains("expected a JSON object"), "{e}");
        let p = HookPayload::parse("fw", &cx("H"), b"{}").unwrap();
        let e = p.require("tool_name").unwrap_err().to_string();
        assert!(
            e.contains("fw") && e.contains("H") && e.contains("tool_name"),
            "{e}"
        );
        assert_eq!(p.field("x"), Value::Null);
        assert_eq!(p.session_id(), None);
    }

    #[test]
    fn context_and_tool_call() {
        let c = cx("H");
        let p = HookPayload::parse(
            "fw",
            &c,
            br#"{"session_id":"s","tool_input":{"a":1},"tool_use_id":"t","x":null}"#,
        )
        .unwrap();
        let ctx = p.context(
            &c,
            &[
                ("session_id", "framework_session_id"),
                ("x", "x"),
                ("y", "y"),
            ],
        );
        assert_eq!(
            Value::Object(ctx.clone()),
            json!({"working_directory": "/here", "framework_session_id": "s", "x": null})
        );
        assert!(p.tool_call(Value::Null, &[]).is_err());
        let p = HookPayload::parse(
            "fw",
            &c,
            br#"{"tool_name":"Bash","tool_input":{"a":1},"tool_use_id":"t"}"#,
        )
        .unwrap();
        let call = p
            .tool_call(Value::Object(ctx), &["tool_use_id", "other"])
            .unwrap();
        assert_eq!(call["action_type"], "tool_call");
        assert_eq!(call["arguments"], json!({"a": 1}));
        assert_eq!(call["tool_use_id"], "t");
        assert!(call.get("other").is_none());
        assert_eq!(call["tool_name"], "Bash");
        let bare = HookPayload::parse("fw", &c, br#"{"cwd":"/there","tool_name":"T"}"#).unwrap();
        assert_eq!(bare.context(&c, &[])["working_directory"], "/there");
        assert_eq!(
            bare.tool_call(Value::Null, &[]).unwrap()["arguments"],
            json!({})
        );
    }

    #[test]
    fn claude_style_payloads() {
        let c = cx("H");
        let p = HookPayload::parse(
            "fw",
            &c,
            br#"{"session_id":"s","source":"startup","prompt":"hi","tool_response":"out","last_assistant_message":"bye","reason":"exit"}"#,
        )
        .unwrap();
        let ctx = json!({"k": 1});
        assert_eq!(
            p.prompt(ctx.clone()).unwrap(),
            json!({"prompt": "hi", "context": {"k": 1}})
        );
        assert_eq!(
            p.tool_success(),
            json!({"status": "success", "output": "out", "duration_ms": null})
        );
        assert_eq!(
            p.session_start("fw", ctx.clone()),
            json!({"framework": "fw", "source": "startup", "model": null, "framework_session_id": "s", "context": {"k": 1}})
        );
        assert_eq!(
            p.session_end("fw", ctx.clone()),
            json!({"framework": "fw", "reason": "exit", "framework_session_id": "s", "context": {"k": 1}})
        );
        assert_eq!(
            p.stop(ctx),
            json!({"response": "bye", "stop_hook_active": null, "context": {"k": 1}})
        );
        let empty = HookPayload::parse("fw", &c, b"{}").unwrap();
        assert!(empty.prompt(Value::Null).is_err());
    }
}
