//! What each tool call has said about itself so far, for the update that reports it finished.
//!
//! ACP's `tool_call_update` carries only the fields that changed: codex-acp reports a
//! finished command or patch with its status and output, and no `kind`. Without what the
//! `tool_call` (or the permission request) said first, its `post_action` would name no tool.

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value};

/// Tool calls remembered at once: memory stays bounded whatever the agent sends (a call that
/// never finishes is forgotten once this many newer ones have been seen).
const MAX_TOOL_CALLS: usize = 1024;

/// The fields of a tool call that a later update need not repeat, and a `post_action` reads.
const FIELDS: [&str; 3] = ["kind", "title", "rawInput"];

#[derive(Default)]
pub(super) struct ToolCalls {
    known: HashMap<String, Map<String, Value>>,
    /// Keys in the order first seen, oldest first.
    order: VecDeque<String>,
}

impl ToolCalls {
    /// Takes in what `call` (a `tool_call` or `tool_call_update`, or a permission request's
    /// `toolCall`) of session `session` says, and returns the call as known so far: its own
    /// fields, and the earlier ones it does not repeat. A `finished` call is forgotten.
    pub(super) fn seen(&mut self, session: Option<&str>, call: &Value, finished: bool) -> Value {
        let (Some(id), Value::Object(fields)) = (call.get("toolCallId"), call) else {
            return call.clone();
        };
        let key = format!("{}\u{0}{id}", session.unwrap_or_default());
        let mut merged = fields.clone();
        let earlier = if finished {
            self.order.retain(|k| *k != key);
            self.known.remove(&key)
        } else {
            let entry = self.known.get(&key).cloned();
            let mut now = entry.clone().unwrap_or_default();
            for f in FIELDS {
                if let Some(v) = fields.get(f) {
                    now.insert(f.to_owned(), v.clone());
                }
            }
            if entry.is_none() {
                if self.order.len() == MAX_TOOL_CALLS {
                    if let Some(oldest) = self.order.pop_front() {
                        self.known.remove(&oldest);
                    }
                }
                self.order.push_back(key.clone());
            }
            self.known.insert(key, now);
            entry
        };
        for (f, v) in earlier.into_iter().flatten() {
            merged.entry(f).or_insert(v);
        }
        Value::Object(merged)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_finished_update_gets_the_fields_it_does_not_repeat_and_is_forgotten() {
        let mut calls = ToolCalls::default();
        let start = json!({"toolCallId": "c1", "kind": "edit", "title": "Edit a",
                           "rawInput": {"changes": {}}, "status": "in_progress"});
        calls.seen(Some("s"), &start, false);
        // Another session's call of the same id is another call.
        let other = json!({"toolCallId": "c1", "status": "completed"});
        assert_eq!(calls.seen(Some("t"), &other, true), other);

        let done = json!({"toolCallId": "c1", "status": "completed", "title": "Edited a"});
        let merged = calls.seen(Some("s"), &done, true);
        assert_eq!(merged["kind"], "edit");
        assert_eq!(merged["title"], "Edited a", "its own fields win");
        assert_eq!(merged["rawInput"], json!({"changes": {}}));
        assert_eq!(merged["status"], "completed");
        assert_eq!(calls.seen(Some("s"), &done, true), done, "forgotten");
    }

    #[test]
    fn memory_stays_bounded_and_the_oldest_call_goes_first() {
        let mut calls = ToolCalls::default();
        for i in 0..=MAX_TOOL_CALLS {
            calls.seen(None, &json!({"toolCallId": i, "kind": "read"}), false);
        }
        assert_eq!(calls.known.len(), MAX_TOOL_CALLS);
        let first = json!({"toolCallId": 0, "status": "failed"});
        assert_eq!(calls.seen(None, &first, true), first);
        let last = json!({"toolCallId": MAX_TOOL_CALLS, "status": "failed"});
        assert_eq!(calls.seen(None, &last, true)["kind"], "read");
    }
}
