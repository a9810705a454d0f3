//! The `generic` shim: AHP events in, AHP decisions out, for agents and scripts that call
//! `ahp-wrap hook generic <event>` themselves. See `shims/generic/README.md`.
//!
//! Like every shim it uses only `crate::frameworks::adapter`; it has no agent of its own,
//! so it injects nothing and lives here rather than under `shims/<name>/src/`.

use serde_json::{json, Value};

use crate::frameworks::adapter::{
    AgentCommand, CallerReply, EventType, Final, Framework, FrameworkError, HookContext, Mapped,
    RunContext,
};

/// Exit code of a blocked generic hook.
pub(crate) const EXIT_BLOCK: i32 = 2;

/// The generic shim, under one of its two names: `generic` (the default for an agent of
/// no known framework), or `path` (`--framework path`: the same, without the start notice,
/// for an agent one knows is reached through PATH shims only).
pub(crate) struct Generic {
    name: &'static str,
}

impl Generic {
    /// `generic`: the framework of an agent no other one claims; it shows the start notice.
    pub(crate) const GENERIC: Generic = Generic { name: "generic" };
    /// `path` (`--framework path`): the same, without the start notice.
    pub(crate) const PATH: Generic = Generic { name: "path" };
}

impl Framework for Generic {
    fn name(&self) -> &'static str {
        self.name
    }

    fn executables(&self) -> &'static [&'static str] {
        &[]
    }

    fn prepare(&self, _run: &RunContext, _cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        // Nothing to inject: a generic agent finds the wrapper through the AHP_WRAP_*
        // environment every child gets.
        Ok(())
    }

    fn injects_hooks(&self) -> bool {
        false
    }

    fn path_shims(&self) -> bool {
        true
    }

    fn start_notice(&self, shown: &str, path_shims: bool) -> Option<String> {
        if self.name != "generic" {
            return None;
        }
        let asked = if path_shims {
            "only the commands it runs by name that delete, move or send data are asked about \
             (PATH shims)"
        } else {
            "none of its actions is asked about (PATH shims are off)"
        };
        Some(format!(
            "note: {shown} has no hooks ahp-wrap knows (framework generic): {asked}; the floor, \
             when on, confines what it writes and reaches. To supervise its actions: `ahp-wrap \
             hook generic` (shims/generic/README.md) or --framework"
        ))
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        let shape = |why: String| FrameworkError::Shape {
            framework: "generic",
            hook: cx.hook.to_owned(),
            why,
        };
        let input: Value = serde_json::from_slice(payload)?;
        let obj = input
            .as_object()
            .ok_or_else(|| shape("expected a JSON object".into()))?;
        let name = match obj.get("event_type") {
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(shape("\"event_type\" must be a string".into())),
            None => cx.hook,
        };
        let event_type =
            EventType::parse(name).ok_or_else(|| shape(format!("unknown event type {name:?}")))?;
        let payload = obj.get("payload").cloned().unwrap_or_else(|| json!({}));
        Ok(Some(Mapped {
            event_type,
            payload,
            framework_session: obj
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }))
    }

    fn render(
        &self,
        _cx: &HookContext<'_>,
        event: Option<&Mapped>,
        verdict: &Final,
    ) -> CallerReply {
        if event.is_some_and(|e| !e.event_type.is_blocking()) {
            // Context for the agent, when there is some (why the floor refused what a tool
            // call reported, say).
            let mut delivered = json!({"delivered": "notification"});
            if let Some(context) = crate::frameworks::adapter::shared::additional_context(verdict) {
                delivered["additional_context"] = context.into();
            }
            let mut stdout = delivered.to_string().into_bytes();
            stdout.push(b'\n');
            return CallerReply {
                stdout,
                ..CallerReply::default()
            };
        }
        let mut stdout = verdict.to_json().to_string().into_bytes();
        stdout.push(b'\n');
        match verdict {
            Final::Block { reason } | Final::Ask { reason, .. } => CallerReply {
                stdout,
                stderr: format!("{reason}\n").into_bytes(),
                exit_code: EXIT_BLOCK,
            },
            _ => CallerReply {
                stdout,
                stderr: Vec::new(),
                exit_code: 0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cx() -> HookContext<'static> {
        HookContext {
            hook: "pre_action",
            cwd: Path::new("/"),
            interactive: false,
        }
    }

    #[test]
    fn maps_event_type_from_payload_or_hook() {
        let m = Generic::GENERIC
            .map(
                &cx(),
                br#"{"event_type":"pre_prompt","payload":{"prompt":"hi"}}"#,
            )
            .unwrap()
            .unwrap();
        assert_eq!(m.event_type, EventType::PrePrompt);
        assert_eq!(m.payload, json!({"prompt": "hi"}));
        let m = Generic::GENERIC
            .map(&cx(), br#"{"payload":{}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(m.event_type, EventType::PreAction);
        assert!(Generic::GENERIC
            .map(&cx(), br#"{"event_type":"nope"}"#)
            .is_err());
        assert!(Generic::GENERIC.map(&cx(), b"not json").is_err());
    }

    #[test]
    fn renders_block_with_exit_2_and_reason_on_stderr() {
        let r = Generic::GENERIC.render(
            &cx(),
            None,
            &Final::Block {
                reason: "no".into(),
            },
        );
        assert_eq!(r.exit_code, EXIT_BLOCK);
        assert_eq!(r.stderr, b"no\n");
        let v: Value = serde_json::from_slice(&r.stdout).unwrap();
        assert_eq!(v, json!({"decision": "block", "reason": "no"}));
        let r = Generic::GENERIC.render(&cx(), None, &Final::no_opinion());
        assert_eq!(r.exit_code, 0);
    }
}
