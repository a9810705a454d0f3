//! The HCP messages on the wire (JSON bodies, `content_type: application/json`): the task a
//! caller submits, the abort it may send, and the events and result a worker answers with.
//! The task id is also the AMQP `correlation_id` of every answer, which goes to the
//! task's `reply_to` queue.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::capability::{DataClass, Risk};

/// The largest task message a worker reads.
pub(crate) const MAX_TASK_BYTES: usize = 1024 * 1024;

/// A task (HCP L4): what to achieve, with its declared risk and data class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Always "task".
    #[serde(rename = "type")]
    pub kind: String,
    /// A plain name (`task-<hex>` from [`Task::new`]); also the `correlation_id` of every
    /// answer and what an abort names.
    pub task_id: String,
    /// The capability name the task is routed by (queue `hcp.task.<capability>`).
    pub capability: String,
    /// What to achieve, in words; given to the agent as `{task}` or on stdin. Must not be
    /// blank.
    pub intent: String,
    /// The task's data: L3 refuses anything but a JSON object fitting the input schema.
    /// Given to the agent as `HCP_TASK_INPUT`; `{}` when absent.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// The risk the caller declares; above the capability's ceiling it is refused.
    pub risk: Risk,
    /// The most sensitive data the task carries; above `max_data_class` it is refused.
    pub data_class: DataClass,
    /// Hazard categories the caller declares; each must be one the capability allows.
    #[serde(default)]
    pub hazards: Vec<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Why a message cannot be taken as a task.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum MessageError {
    /// The body is over [`MAX_TASK_BYTES`]; holds its size in bytes.
    #[error("the message is {0} bytes; at most {MAX_TASK_BYTES} are accepted")]
    TooLarge(usize),
    /// The body is not a task's JSON, or its `type` is not `"task"`; holds why.
    #[error("the message is not an HCP task: {0}")]
    NotATask(String),
    /// The `task_id` is not a plain name; holds it.
    #[error("the task id {0:?} is not a plain name (1 to 128 letters, digits, - _ . :)")]
    BadId(String),
    /// The `intent` is empty or only whitespace.
    #[error("the task's intent is empty")]
    NoIntent,
}

impl Task {
    /// A new task with a fresh id.
    pub fn new(capability: &str, intent: &str, risk: Risk, data_class: DataClass) -> Task {
        Task {
            kind: "task".into(),
            task_id: format!("task-{}", crate::random_hex(8)),
            capability: capability.into(),
            intent: intent.into(),
            input: empty_object(),
            risk,
            data_class,
            hazards: Vec::new(),
        }
    }

    /// Parses and checks a task message body.
    pub(crate) fn parse(body: &[u8]) -> Result<Task, MessageError> {
        if body.len() > MAX_TASK_BYTES {
            return Err(MessageError::TooLarge(body.len()));
        }
        let task: Task =
            serde_json::from_slice(body).map_err(|e| MessageError::NotATask(e.to_string()))?;
        if task.kind != "task" {
            return Err(MessageError::NotATask(format!(
                "type is {:?}, not \"task\"",
                task.kind
            )));
        }
        if !super::is_name(&task.task_id) {
            return Err(MessageError::BadId(task.task_id));
        }
        if task.intent.trim().is_empty() {
            return Err(MessageError::NoIntent);
        }
        Ok(task)
    }
}

/// An abort: stop the task's run (SIGTERM, then SIGKILL to the agent's tree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Abort {
    /// Always "abort".
    #[serde(rename = "type")]
    pub kind: String,
    /// The task to stop; workers not running it remember the id (the last 256) in case
    /// the task arrives later.
    pub task_id: String,
    /// The caller's `--reason`, put in the result's reason; `None` when not given.
    #[serde(default)]
    pub reason: Option<String>,
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// The agent ran and exited 0.
    Complete,
    /// The agent ran and failed (non-zero exit, or output not matching the schema).
    Failed,
    /// The run was stopped: an abort, the capability's time limit, or the worker stopping.
    Aborted,
    /// The L3 gate refused the task (or it was malformed): the agent never started.
    Refused,
}

/// The last answer to a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskResult {
    /// Always "result".
    #[serde(rename = "type")]
    pub kind: String,
    /// The task answered (also the message's `correlation_id`); for a malformed task, the
    /// delivery's `correlation_id`, or `unknown` without one.
    pub task_id: String,
    /// How the task ended.
    pub status: Status,
    /// The agent's exit code (128 + N for death by signal N); none if it never ran.
    pub exit_code: Option<u8>,
    /// The end of the agent's output (stdout), or why it did not run.
    pub summary: String,
    /// What the agent wrote to `$HCP_OUTPUT_FILE`, checked against the output schema.
    #[serde(default)]
    pub output: Option<Value>,
    /// Why the status is not `complete` (the refusal, the abort, the exit code, the
    /// output's fault); `None` for a complete task.
    #[serde(default)]
    pub reason: Option<String>,
    /// The worker that answered, as `host:pid`.
    pub worker: String,
    /// The broker redelivered the task (an earlier worker died or lost its connection).
    pub redelivered: bool,
    /// Milliseconds from the worker's taking the delivery to this result.
    pub duration_ms: u64,
}

/// One progress event of a task (HCP L2): `accepted`, then the run's AHP events mapped to
/// `progress` / `warning` / `error` (see [`super::events`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskEvent {
    /// Always "event".
    #[serde(rename = "type")]
    pub kind: String,
    /// The task the event belongs to (also the message's `correlation_id`).
    pub task_id: String,
    /// Position among the task's events, from 1, set by the worker as it sends them.
    pub seq: u64,
    /// The HCP event name: `accepted`, `progress`, `warning` or `error`.
    pub event: String,
    /// One line for people (`pre_action: Bash: allow`, `accepted by host:pid …`).
    #[serde(default)]
    pub message: Option<String>,
    /// The AHP record behind the event: `event_type`, `decision`, `reason`, `source`,
    /// `tool`, `payload` (redacted, cut at 4 KiB); `None` for `accepted`.
    #[serde(default)]
    pub ahp: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(extra: &str) -> Vec<u8> {
        format!(
            r#"{{"type":"task","task_id":"t-1","capability":"c","intent":"do it",
               "risk":"R1","data_class":"T1"{extra}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_task_parses_and_round_trips() {
        let t = Task::parse(&body("")).unwrap();
        assert_eq!(t.input, serde_json::json!({}));
        let again = Task::parse(&serde_json::to_vec(&t).unwrap()).unwrap();
        assert_eq!(t, again);
    }

    #[test]
    fn malformed_tasks_say_why() {
        let err = |b: &[u8]| Task::parse(b).unwrap_err().to_string();
        assert!(err(b"not json").contains("not an HCP task"));
        assert!(err(&body(r#","surprise":1"#)).contains("surprise"));
        let no_risk =
            br#"{"type":"task","task_id":"t","capability":"c","intent":"x","data_class":"T1"}"#;
        assert!(err(no_risk).contains("risk"));
        let bad_id = String::from_utf8(body("")).unwrap().replace("t-1", "t 1");
        assert!(err(bad_id.as_bytes()).contains("not a plain name"));
        let empty = String::from_utf8(body("")).unwrap().replace("do it", " ");
        assert_eq!(Task::parse(empty.as_bytes()), Err(MessageError::NoIntent));
        let big = vec![b' '; MAX_TASK_BYTES + 1];
        assert!(matches!(Task::parse(&big), Err(MessageError::TooLarge(_))));
    }
}
