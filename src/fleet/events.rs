//! A run's AHP events as HCP progress events. The run writes each event and its decision
//! to its audit log (durably, before the decision is enforced); the worker reads the new
//! lines of that log and maps each to a [`TaskEvent`]:
//!
//! | audit record                         | HCP event  |
//! |--------------------------------------|------------|
//! | decision `block` (or `escalate`)     | `warning`  |
//! | event type `error`                   | `error`    |
//! | anything else (allowed, notified)    | `progress` |
//!
//! The `ahp` field carries the event type, decision, reason, deciding rule, tool name and
//! the (already redacted) payload, cut to [`MAX_PAYLOAD`] bytes.

use serde_json::{json, Value};

use super::message::TaskEvent;

/// The largest AHP payload forwarded in an event, in bytes of JSON.
pub(crate) const MAX_PAYLOAD: usize = 4096;

/// The HCP event for one audit log line; `None` for lines that record no event (a
/// recovery marker, a torn line).
pub(crate) fn from_audit_line(task_id: &str, seq: u64, line: &[u8]) -> Option<TaskEvent> {
    let rec: Value = serde_json::from_slice(line).ok()?;
    let event_type = rec.get("event_type")?.as_str()?.to_owned();
    let decision = rec.get("decision").and_then(Value::as_str).unwrap_or("");
    let event = match (decision, event_type.as_str()) {
        ("block" | "escalate", _) => "warning",
        (_, "error") => "error",
        _ => "progress",
    };
    let payload = rec.get("payload").cloned().unwrap_or(Value::Null);
    let tool = payload
        .get("tool_name")
        .or_else(|| payload.get("tool"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let size = payload.to_string().len();
    let payload = if size > MAX_PAYLOAD {
        json!({ "truncated": true, "bytes": size })
    } else {
        payload
    };
    let reason = rec.get("reason").cloned().unwrap_or(Value::Null);
    let said = payload.get("message").and_then(Value::as_str);
    let message = match (&reason, decision, tool.as_deref(), said) {
        (Value::String(r), ..) => format!("{event_type}: {decision}: {r}"),
        (_, "notified", _, Some(m)) => format!("{event_type}: {m}"),
        (_, "notified", Some(t), _) => format!("{event_type}: {t}"),
        (_, "notified", ..) => event_type.clone(),
        (_, _, Some(t), _) => format!("{event_type}: {t}: {decision}"),
        _ => format!("{event_type}: {decision}"),
    };
    Some(TaskEvent {
        kind: "event".into(),
        task_id: task_id.into(),
        seq,
        event: event.into(),
        message: Some(message),
        ahp: Some(json!({
            "event_type": event_type,
            "decision": decision,
            "reason": reason,
            "source": rec.get("source").cloned().unwrap_or(Value::Null),
            "tool": tool,
            "payload": payload,
        })),
    })
}

/// Splits `buf` into complete lines; what follows the last newline stays in `buf`.
pub(crate) fn take_lines(buf: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
        return Vec::new();
    };
    let rest = buf.split_off(end + 1);
    let whole = std::mem::replace(buf, rest);
    whole
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_map_to_events() {
        let blocked = br#"{"event_type":"pre_action","decision":"block","reason":"no","source":"r1","payload":{"tool_name":"Bash"}}"#;
        let e = from_audit_line("t", 1, blocked).unwrap();
        assert_eq!(e.event, "warning");
        assert_eq!(e.ahp.as_ref().unwrap()["tool"], "Bash");
        assert_eq!(e.message.as_deref(), Some("pre_action: block: no"));
        let start = br#"{"event_type":"session_start","decision":"notified","payload":{}}"#;
        assert_eq!(from_audit_line("t", 2, start).unwrap().event, "progress");
        let err = br#"{"event_type":"error","decision":"notified","payload":{}}"#;
        assert_eq!(from_audit_line("t", 3, err).unwrap().event, "error");
        assert!(from_audit_line("t", 4, b"{\"torn").is_none());
        assert!(from_audit_line("t", 4, br#"{"recovered":true}"#).is_none());
    }

    #[test]
    fn big_payloads_are_cut() {
        let big = "x".repeat(MAX_PAYLOAD);
        let line = json!({"event_type":"post_action","decision":"notified","payload":{"out": big}});
        let e = from_audit_line("t", 1, line.to_string().as_bytes()).unwrap();
        assert_eq!(e.ahp.unwrap()["payload"]["truncated"], true);
    }

    #[test]
    fn only_whole_lines_are_taken() {
        let mut buf = b"a\nb\nc".to_vec();
        assert_eq!(take_lines(&mut buf), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(buf, b"c");
        buf.extend_from_slice(b"d\n");
        assert_eq!(take_lines(&mut buf), vec![b"cd".to_vec()]);
        assert!(buf.is_empty());
        assert!(take_lines(&mut buf).is_empty());
    }
}
