//! A hook's stdin payload, read through the manifest's pointers, as the AHP payload of its
//! event's shape.

use serde_json::{json, Map, Value};

use super::{Manifest, Pointer, Shape};
use crate::frameworks::adapter::{FrameworkError, HookContext, ToolCall};

/// One payload, read through one manifest's pointers.
pub(super) struct Reader<'a> {
    pub manifest: &'a Manifest,
    pub cx: &'a HookContext<'a>,
    pub payload: &'a Value,
}

impl Reader<'_> {
    fn shape_error(&self, why: String) -> FrameworkError {
        FrameworkError::Shape {
            framework: self.manifest.name,
            hook: self.cx.hook.to_owned(),
            why,
        }
    }

    /// The value at `p`, or null when the manifest names no pointer or the agent sent none.
    fn field(&self, p: &Option<Pointer>) -> Value {
        p.as_ref()
            .and_then(|p| p.get(self.payload))
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// The value at `p`, which the agent must send.
    fn require(&self, p: &Option<Pointer>, what: &str) -> Result<Value, FrameworkError> {
        let Some(p) = p else {
            return Err(self.shape_error(format!(
                "the manifest names no pointer for {what} (payload.{what})"
            )));
        };
        p.get(self.payload)
            .cloned()
            .ok_or_else(|| self.shape_error(format!("the {:?} field is missing", p.0)))
    }

    /// The agent's own session id.
    pub(super) fn session_id(&self) -> Option<String> {
        match self.field(&self.manifest.payload.session) {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The AHP `context`: `working_directory` (the payload's cwd, else the hook process's),
    /// then each context field the payload has.
    fn context(&self) -> Value {
        let pointers = &self.manifest.payload;
        let mut c = Map::new();
        let cwd = match self.field(&pointers.cwd) {
            Value::Null => self.cx.cwd.display().to_string().into(),
            cwd => cwd,
        };
        c.insert("working_directory".into(), cwd);
        for (name, p) in &pointers.context {
            if let Some(v) = p.get(self.payload) {
                c.insert(name.clone(), v.clone());
            }
        }
        Value::Object(c)
    }

    /// The tool's arguments, with the manifest's renames applied.
    fn arguments(&self) -> Value {
        let mut args = match self.field(&self.manifest.payload.arguments) {
            Value::Null => json!({}),
            args => args,
        };
        if let Value::Object(o) = &mut args {
            for (from, to) in &self.manifest.payload.rename_arguments {
                if !o.contains_key(to) {
                    if let Some(v) = o.remove(from) {
                        o.insert(to.clone(), v);
                    }
                }
            }
        }
        args
    }

    fn tool_call(&self, context: Value) -> Result<Value, FrameworkError> {
        let pointers = &self.manifest.payload;
        // A name that is not text is kept as its JSON text.
        let name = match self.require(&pointers.tool_name, "tool_name")? {
            Value::String(name) => name,
            other => other.to_string(),
        };
        let mut call = ToolCall::new(name, self.arguments(), context);
        for p in &pointers.call_ids {
            if let Some(id) = p.get(self.payload) {
                call = call.with(p.key(), id.clone());
            }
        }
        Ok(call.into_payload())
    }

    /// The AHP payload of `shape`.
    pub(super) fn payload(&self, shape: Shape) -> Result<Value, FrameworkError> {
        if !self.payload.is_object() {
            return Err(self.shape_error("expected a JSON object".into()));
        }
        let p = &self.manifest.payload;
        let context = self.context();
        let session = self.field(&p.session);
        Ok(match shape {
            Shape::ToolCall => self.tool_call(context)?,
            Shape::ToolResult => {
                let mut call = self.tool_call(context)?;
                call["result"] = json!({
                    "status": "success",
                    "output": self.field(&p.output),
                    "duration_ms": self.field(&p.duration_ms),
                });
                call
            }
            Shape::ToolFailure => {
                let mut call = self.tool_call(context)?;
                call["result"] = json!({
                    "status": "error",
                    "error": self.field(&p.error),
                    "duration_ms": self.field(&p.duration_ms),
                });
                call
            }
            Shape::Prompt => json!({
                "prompt": self.require(&p.prompt, "prompt")?,
                "context": context,
            }),
            Shape::SessionStart => json!({
                "framework": self.manifest.name,
                "source": self.field(&p.source),
                "model": self.field(&p.model),
                "framework_session_id": session,
                "context": context,
            }),
            Shape::SessionEnd => json!({
                "framework": self.manifest.name,
                "reason": self.field(&p.reason),
                "framework_session_id": session,
                "context": context,
            }),
            Shape::Response => json!({
                "response": self.field(&p.response),
                "stop_hook_active": self.field(&p.stop_hook_active),
                "context": context,
            }),
            Shape::Raw => json!({
                "hook_payload": self.payload,
                "context": context,
            }),
        })
    }
}

/// `input` with the manifest's argument renames undone: what the agent calls them.
pub(super) fn rename_back(manifest: &Manifest, mut input: Value) -> Value {
    if let Value::Object(o) = &mut input {
        for (from, to) in &manifest.payload.rename_arguments {
            if !o.contains_key(from) {
                if let Some(v) = o.remove(to) {
                    o.insert(from.clone(), v);
                }
            }
        }
    }
    input
}
