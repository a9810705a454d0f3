//! A decision written back in the agent's contract, from the manifest's templates.

use serde_json::Value;

use super::shape::rename_back;
use super::{Event, Manifest, Output, Rendering};
use crate::frameworks::adapter::shared::output::unexpected;
use crate::frameworks::adapter::shared::{additional_context, updated_input};
use crate::frameworks::adapter::{unapplicable_modify, CallerReply, Final};

/// The values a template's placeholders take.
struct Fill<'a> {
    reason: &'a str,
    context: &'a str,
    event: &'a str,
    agent: &'a str,
    updated_input: Option<Value>,
}

impl Fill<'_> {
    fn text(&self, s: &str) -> String {
        if !s.contains('{') {
            return s.to_owned();
        }
        s.replace("{reason}", self.reason)
            .replace("{context}", self.context)
            .replace("{event}", self.event)
            .replace("{agent}", self.agent)
    }

    fn value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) if s == "{updated_input}" => {
                self.updated_input.clone().unwrap_or(Value::Null)
            }
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.value(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (self.text(k), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn output(&self, out: &Output) -> CallerReply {
        let mut stdout = Vec::new();
        if let Some(v) = &out.stdout {
            stdout = self.value(v).to_string().into_bytes();
            stdout.push(b'\n');
        }
        let mut stderr = Vec::new();
        if let Some(s) = &out.stderr {
            stderr = self.text(s).into_bytes();
            stderr.push(b'\n');
        }
        CallerReply {
            stdout,
            stderr,
            exit_code: out.exit,
        }
    }
}

/// `verdict` on `event`, as the manifest writes it.
pub(super) fn render(manifest: &Manifest, event: &Event, verdict: &Final) -> CallerReply {
    fn filled<'a>(manifest: &'a Manifest, event: &'a Event, reason: &'a str) -> Fill<'a> {
        Fill {
            reason,
            context: "",
            event: event.name,
            agent: manifest.agent,
            updated_input: None,
        }
    }
    let block = |reason: &str| filled(manifest, event, reason).output(&event.block);
    // A decision the agent lacks: blocked, with the manifest's reason or the standard one.
    let becomes_block = |reason: &Option<String>| match reason {
        Some(reason) => block(reason),
        None => block(&unexpected(verdict, manifest.agent)),
    };
    // A notification is only ever answered allow, or block when the relay failed.
    if !event.ahp.is_blocking() {
        return match verdict {
            Final::Block { reason } => block(reason),
            _ => filled(manifest, event, "").output(&event.allow),
        };
    }
    if let Some(modified) = verdict.replacement() {
        return match &event.modify {
            Rendering::Block(reason) => becomes_block(reason),
            Rendering::Native(out) => match updated_input(modified) {
                Ok(input) => Fill {
                    updated_input: Some(rename_back(manifest, input)),
                    ..filled(manifest, event, "")
                }
                .output(out),
                Err(why) => block(&unapplicable_modify(&why)),
            },
        };
    }
    match verdict {
        Final::Allow { .. } => match (&event.context, additional_context(verdict)) {
            (Some(out), Some(context)) => Fill {
                context: &context,
                ..filled(manifest, event, "")
            }
            .output(out),
            _ => filled(manifest, event, "").output(&event.allow),
        },
        Final::Block { reason } => block(reason),
        Final::Ask { reason, .. } => match &event.ask {
            Rendering::Native(out) => filled(manifest, event, reason).output(out),
            Rendering::Block(instead) => becomes_block(instead),
        },
        // A modify always has a replacement, rendered above.
        Final::Modify { .. } => becomes_block(&None),
    }
}

/// A hook name the manifest does not declare: the verdict's reason (or a word that the hook
/// is unknown) on stderr, and the manifest's code for it.
pub(super) fn unknown_hook(manifest: &Manifest, verdict: &Final) -> CallerReply {
    let reason = verdict.reason().map_or_else(
        || format!("ahp-wrap does not know this {} hook", manifest.agent),
        str::to_owned,
    );
    CallerReply {
        stdout: Vec::new(),
        stderr: format!("{reason}\n").into_bytes(),
        exit_code: manifest.unknown_hook_exit,
    }
}
