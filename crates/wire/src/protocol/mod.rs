//! AHP 2.4 wire types: event types and their blocking split, events, the tool-call payload
//! ([`ToolCall`]), and strictly parsed decisions.
//!
//! Owns: what AHP adds to JSON-RPC — its methods' payloads, its rule that our ids are strings
//! (a harness answering with a numeric id breaks the protocol, [`jsonrpc`]), and strict JSON
//! (a duplicate key is malformed). Must not touch: framing or transports (generic JSON-RPC
//! and the line codec are `crate::jsonrpc`), or what a decision leads to (the application's `gate`).

mod decision;
mod final_decision;
pub mod jsonrpc;
mod modify;
mod strict;

pub use decision::{parse_decision, DecisionError, Verdict};
pub use final_decision::Final;
pub use modify::{unapplicable_modify, updated_input, ModifyError};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The payload of a tool call (`action_type: "tool_call"`), as every interceptor describes
/// one to the harness: the tool's name, its arguments, where it runs (`context`), and the
/// interceptor's own sections (`mcp`, `acp`, `result`, call ids) beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The tool's name as the interceptor knows it (payload key `tool_name`).
    pub tool_name: String,
    /// The tool's arguments (payload key `arguments`).
    pub arguments: Value,
    /// Where the call runs, such as the working directory (payload key `context`).
    pub context: Value,
    /// The interceptor's own sections and call ids, written at the payload's top level
    /// beside the fields above.
    pub extra: Map<String, Value>,
}

impl ToolCall {
    /// A tool call with no sections of the interceptor's own yet (see [`ToolCall::with`]).
    pub fn new(tool_name: impl Into<String>, arguments: Value, context: Value) -> ToolCall {
        ToolCall {
            tool_name: tool_name.into(),
            arguments,
            context,
            extra: Map::new(),
        }
    }

    /// With the section `key` (a section of the interceptor's own, or a call id).
    pub fn with(mut self, key: &str, value: Value) -> ToolCall {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The event payload.
    pub fn into_payload(self) -> Value {
        let mut payload = Map::new();
        payload.insert("action_type".into(), "tool_call".into());
        payload.insert("tool_name".into(), self.tool_name.into());
        payload.insert("arguments".into(), self.arguments);
        payload.insert("context".into(), self.context);
        payload.extend(self.extra);
        Value::Object(payload)
    }
}

/// The protocol version we speak in `ahp/handshake`.
pub const PROTOCOL_VERSION: &str = "2.4";

/// Every event type of AHP 2.4 that an agent sends to a harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// An action (a tool call, a command) is about to run; blocking.
    PreAction,
    /// An action has run, with its result; a notification.
    PostAction,
    /// A prompt is about to reach the model; blocking.
    PrePrompt,
    /// The agent has finished a response (a turn); a notification.
    PostResponse,
    /// A session of the agent has started; a notification.
    SessionStart,
    /// A session of the agent has ended; a notification.
    SessionEnd,
    /// Something went wrong, in the agent or in the wrapper's supervision of it; a
    /// notification.
    Error,
    /// A periodic sign of life with the run's uptime and load; a notification.
    Heartbeat,
    /// The agent is idle and asks whether background work should run; blocking.
    Idle,
    /// The model needs knowledge of the workspace; blocking.
    ContextPerception,
    /// An operation succeeded; a notification.
    Success,
    /// The model is about to recall from memory; blocking.
    MemoryRecall,
    /// The model is planning or breaking a task down; blocking.
    Planning,
    /// A step of the model's reasoning; blocking.
    Reasoning,
    /// A rate limit was hit and the agent asks how to back off; blocking.
    RateLimit,
    /// The agent asks for a person's confirmation (a permission prompt); blocking.
    Confirmation,
    /// The user's intent is being detected from a prompt; blocking.
    IntentDetection,
    /// A run moved to another lifecycle state (planning, executing, completed...); a
    /// notification.
    RunLifecycle,
    /// A snapshot of a run's task list; a notification.
    TaskList,
    /// A snapshot of a run's verification checks; a notification.
    Verification,
}

impl EventType {
    /// All event types, in declaration order.
    pub const ALL: [EventType; 20] = [
        EventType::PreAction,
        EventType::PostAction,
        EventType::PrePrompt,
        EventType::PostResponse,
        EventType::SessionStart,
        EventType::SessionEnd,
        EventType::Error,
        EventType::Heartbeat,
        EventType::Idle,
        EventType::ContextPerception,
        EventType::Success,
        EventType::MemoryRecall,
        EventType::Planning,
        EventType::Reasoning,
        EventType::RateLimit,
        EventType::Confirmation,
        EventType::IntentDetection,
        EventType::RunLifecycle,
        EventType::TaskList,
        EventType::Verification,
    ];

    /// Blocking events go as JSON-RPC requests and wait for a decision; the rest are
    /// notifications. This is the 2.4 split, exactly.
    pub fn is_blocking(self) -> bool {
        matches!(
            self,
            EventType::PreAction
                | EventType::PrePrompt
                | EventType::Idle
                | EventType::IntentDetection
                | EventType::ContextPerception
                | EventType::MemoryRecall
                | EventType::Planning
                | EventType::Reasoning
                | EventType::RateLimit
                | EventType::Confirmation
        )
    }

    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::PreAction => "pre_action",
            EventType::PostAction => "post_action",
            EventType::PrePrompt => "pre_prompt",
            EventType::PostResponse => "post_response",
            EventType::SessionStart => "session_start",
            EventType::SessionEnd => "session_end",
            EventType::Error => "error",
            EventType::Heartbeat => "heartbeat",
            EventType::Idle => "idle",
            EventType::ContextPerception => "context_perception",
            EventType::Success => "success",
            EventType::MemoryRecall => "memory_recall",
            EventType::Planning => "planning",
            EventType::Reasoning => "reasoning",
            EventType::RateLimit => "rate_limit",
            EventType::Confirmation => "confirmation",
            EventType::IntentDetection => "intent_detection",
            EventType::RunLifecycle => "run_lifecycle",
            EventType::TaskList => "task_list",
            EventType::Verification => "verification",
        }
    }

    /// Parses a wire name; `None` for anything AHP 2.4 does not define.
    pub fn parse(name: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `params` of an `ahp/event` message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// What happened; [`EventType::is_blocking`] says whether a decision is awaited.
    pub event_type: EventType,
    /// The sender's session; ahp-wrap uses one UUID per run.
    pub session_id: String,
    /// The sending agent; ahp-wrap writes its framework (or `mcp`, `acp`) and a UUID.
    pub agent_id: String,
    /// When the event was made, as RFC 3339 (see [`now_rfc3339`]).
    pub timestamp: String,
    /// How deeply the sending agent is nested in other supervised agents; 0 at the top.
    pub depth: u32,
    /// The event's own data; a tool call's shape is [`ToolCall`]'s.
    pub payload: Value,
    /// AHP's structured context for context-aware decisions; absent from the JSON when
    /// `None`, and ahp-wrap sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Free-form extra data (ahp-wrap puts [`TIMEOUT_MS`] here, among others); absent from
    /// the JSON when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `metadata.timeout_ms` of a blocking event: how many milliseconds its sender still waits
/// for the decision when it sends the event (after that, its fail mode decides). Not an AHP
/// 2.4 field: event metadata is free-form, so a 2.4 harness ignores it. ahp-wrap sends it
/// with every blocking event, so that a harness that holds an event (serve, while a person
/// decides) gives up in time, and says when.
pub const TIMEOUT_MS: &str = "timeout_ms";

impl Event {
    /// How long the sender waits for this event's decision, if it said so.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        let ms = self.metadata.as_ref()?.get(TIMEOUT_MS)?.as_u64()?;
        Some(std::time::Duration::from_millis(ms))
    }
}

/// `event`, serialized, saying that its sender waits `left` for the decision: the stamp goes
/// into the serialized value, so the event itself (its payload) is not copied for it.
#[allow(
    clippy::expect_used,
    reason = "an event is plain data: its serialisation cannot fail"
)]
pub fn waiting(event: &Event, left: std::time::Duration) -> Value {
    let mut value = serde_json::to_value(event).expect("events serialize");
    let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
    if let Value::Object(obj) = &mut value {
        let metadata = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !metadata.is_object() {
            *metadata = Value::Object(Map::new());
        }
        if let Value::Object(m) = metadata {
            m.insert(TIMEOUT_MS.to_owned(), ms.into());
        }
    }
    value
}

/// The wall clock as RFC 3339 with milliseconds, as AHP timestamps are written.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_call_payload_has_the_shape_every_interceptor_sends() {
        let call = ToolCall::new("exec", json!({"command": ["ls"]}), json!({"cwd": "/w"}))
            .with("tool_use_id", json!("t1"));
        assert_eq!(
            call.into_payload(),
            json!({"action_type": "tool_call", "tool_name": "exec",
                   "arguments": {"command": ["ls"]}, "context": {"cwd": "/w"},
                   "tool_use_id": "t1"})
        );
    }

    #[test]
    fn blocking_split_is_the_2_4_split() {
        let blocking: Vec<_> = EventType::ALL
            .into_iter()
            .filter(|t| t.is_blocking())
            .map(EventType::as_str)
            .collect();
        assert_eq!(
            blocking,
            [
                "pre_action",
                "pre_prompt",
                "idle",
                "context_perception",
                "memory_recall",
                "planning",
                "reasoning",
                "rate_limit",
                "confirmation",
                "intent_detection"
            ]
        );
    }

    #[test]
    fn names_round_trip_through_serde_and_parse() {
        for t in EventType::ALL {
            let json = serde_json::to_value(t).unwrap();
            assert_eq!(json, Value::String(t.as_str().to_owned()));
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::parse("pre_tool_use"), None);
    }

    #[test]
    fn an_event_says_how_long_its_sender_waits_beside_its_own_metadata() {
        let mut event: Event = serde_json::from_value(serde_json::json!({
            "event_type": "pre_action", "session_id": "s", "agent_id": "a",
            "timestamp": "t", "depth": 0, "payload": {}
        }))
        .unwrap();
        assert_eq!(event.timeout(), None);
        let sent: Event =
            serde_json::from_value(waiting(&event, std::time::Duration::from_millis(19_500)))
                .unwrap();
        assert_eq!(
            sent.timeout(),
            Some(std::time::Duration::from_millis(19_500))
        );
        event.metadata = Some(Map::from_iter([("hook".to_owned(), "PreToolUse".into())]));
        let sent = waiting(&event, std::time::Duration::from_secs(2));
        assert_eq!(
            sent["metadata"],
            serde_json::json!({"hook": "PreToolUse", "timeout_ms": 2000})
        );
    }
}
