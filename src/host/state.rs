//! What the host knows about each live session (its agent, its one turn, its tool calls and
//! their decisions), and that knowledge as Agent Host Protocol v1 state and actions (JSON
//! in the shapes of the `ahp-types` crate; a test parses every one of them with it).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::protocol::Event;

pub(super) const ROOT: &str = "ahp-root://";
/// The one turn of a wrapped run: from the agent's start to its end.
pub(super) const TURN: &str = "run";

/// `SessionStatus` bits.
const IN_PROGRESS: u32 = 8;
const INPUT_NEEDED: u32 = 24;

pub(super) fn session_uri(id: &str) -> String {
    format!("ahp-session:/{id}")
}

pub(super) fn chat_uri(id: &str) -> String {
    format!("ahp-chat:/{id}")
}

/// Where a tool call is in its life.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum CallStatus {
    /// Waiting for a person.
    Pending,
    /// Allowed (by whom: `setting` for the policy or harness, `user-action` for a person).
    Running {
        confirmed: &'static str,
    },
    /// Blocked, with the reason.
    Denied {
        reason: String,
    },
    Completed {
        success: bool,
    },
}

/// One tool call of a session.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub id: String,
    pub tool: String,
    /// What it does, in one line (the command, the file).
    pub input: String,
    pub status: CallStatus,
    /// Waiting for a person right now (listed in the session's `inputNeeded`).
    pub waiting: bool,
    /// Why it was escalated, and the rule, when it was.
    pub escalation: Option<Value>,
}

/// One live session: a wrapped agent.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub id: String,
    pub agent: String,
    pub framework: String,
    pub cwd: String,
    pub depth: u32,
    pub started: String,
    pub command: String,
    pub modified: String,
    pub calls: Vec<Call>,
    /// When its last event arrived (a wrapper that died without `session_end` goes quiet).
    pub last_seen: std::time::Instant,
}

impl Session {
    /// A session from its first event (`session_start` says the most).
    pub(super) fn from_event(event: &Event) -> Session {
        let p = &event.payload;
        let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let command = match p.get("command").and_then(Value::as_array) {
            Some(words) => words
                .iter()
                .map(|w| w.as_str().unwrap_or("").to_owned())
                .collect::<Vec<_>>()
                .join(" "),
            None => String::new(),
        };
        // Before `session_start` arrives (links may reorder notifications), the agent id
        // (`<framework>-<hex>`) and the event's context say the most.
        let framework = match text("framework") {
            f if f.is_empty() => match event.agent_id.rsplit_once('-') {
                Some((f, _)) => f.to_owned(),
                None => "unknown".to_owned(),
            },
            f => f,
        };
        let cwd = [
            p.pointer("/cwd"),
            p.pointer("/context/working_directory"),
            p.pointer("/arguments/cwd"),
        ]
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .unwrap_or("")
        .to_owned();
        Session {
            id: event.session_id.clone(),
            agent: event.agent_id.clone(),
            framework,
            cwd,
            depth: event.depth,
            started: event.timestamp.clone(),
            command,
            modified: event.timestamp.clone(),
            calls: Vec::new(),
            last_seen: std::time::Instant::now(),
        }
    }

    /// What `session_start` says, over what an earlier event let us guess.
    pub(super) fn started_by(&mut self, event: &Event) {
        let calls = std::mem::take(&mut self.calls);
        *self = Session {
            calls,
            ..Session::from_event(event)
        };
    }

    pub(super) fn status(&self) -> u32 {
        if self.calls.iter().any(|c| c.waiting) {
            INPUT_NEEDED
        } else {
            IN_PROGRESS
        }
    }

    fn title(&self) -> String {
        format!("{} in {}", self.framework, self.cwd)
    }

    fn meta(&self) -> Value {
        json!({
            "agent": self.agent,
            "framework": self.framework,
            "cwd": self.cwd,
            "depth": self.depth,
            "started": self.started,
            "command": self.command,
        })
    }

    fn working_directories(&self) -> Vec<String> {
        if self.cwd.is_empty() {
            return Vec::new();
        }
        vec![format!("file://{}", self.cwd)]
    }

    /// `SessionSummary`.
    pub(super) fn summary(&self) -> Value {
        json!({
            "provider": "ahp-wrap",
            "title": self.title(),
            "status": self.status(),
            "resource": session_uri(&self.id),
            "createdAt": self.started,
            "modifiedAt": self.modified,
            "workingDirectories": self.working_directories(),
            "_meta": self.meta(),
        })
    }

    /// `SessionState`: the session, its one chat, and what it waits for.
    pub(super) fn state(&self) -> Value {
        let waiting: Vec<Value> = self
            .calls
            .iter()
            .filter(|c| c.waiting)
            .map(|c| self.input_request(c))
            .collect();
        json!({
            "provider": "ahp-wrap",
            "title": self.title(),
            "status": self.status(),
            "lifecycle": "ready",
            "workingDirectories": self.working_directories(),
            "activeClients": [],
            "chats": [{
                "resource": chat_uri(&self.id),
                "title": self.command,
                "status": self.status(),
                "modifiedAt": self.modified,
            }],
            "defaultChat": chat_uri(&self.id),
            "inputNeeded": waiting,
            "_meta": self.meta(),
        })
    }

    /// `ChatState`: the run's one turn, with every tool call so far.
    pub(super) fn chat(&self) -> Value {
        let parts: Vec<Value> = self
            .calls
            .iter()
            .map(|c| json!({"kind": "toolCall", "toolCall": c.state()}))
            .collect();
        json!({
            "resource": chat_uri(&self.id),
            "title": self.command,
            "status": self.status(),
            "modifiedAt": self.modified,
            "turns": [],
            "activeTurn": {
                "id": TURN,
                "startedAt": self.started,
                "message": {"text": self.command, "origin": {"kind": "user"}},
                "responseParts": parts,
            },
        })
    }

    /// `SessionInputRequest` of kind `toolConfirmation` for a pending call.
    pub(super) fn input_request(&self, call: &Call) -> Value {
        json!({
            "kind": "toolConfirmation",
            "id": call.id,
            "chat": chat_uri(&self.id),
            "turnId": TURN,
            "toolCall": call.state(),
        })
    }
}

impl Call {
    fn base(&self, status: &str) -> Value {
        let mut v = json!({
            "status": status,
            "toolCallId": self.id,
            "toolName": self.tool,
            "displayName": self.tool,
            "invocationMessage": format!("{}: {}", self.tool, self.input),
            "toolInput": self.input,
        });
        if let Some(e) = &self.escalation {
            v["_meta"] = e.clone();
        }
        v
    }

    /// `ToolCallState`.
    pub(super) fn state(&self) -> Value {
        match &self.status {
            CallStatus::Pending => {
                let mut v = self.base("pending-confirmation");
                v["confirmationTitle"] = json!(format!("Allow {}?", self.tool));
                v
            }
            CallStatus::Running { confirmed } => {
                let mut v = self.base("running");
                v["confirmed"] = json!(confirmed);
                v
            }
            CallStatus::Denied { reason } => {
                let mut v = self.base("cancelled");
                v["reason"] = json!("denied");
                v["reasonMessage"] = json!(reason);
                v
            }
            CallStatus::Completed { success } => {
                let mut v = self.base("completed");
                v["success"] = json!(success);
                v["pastTenseMessage"] = json!(format!("Ran {}", self.tool));
                v["confirmed"] = json!("setting");
                v
            }
        }
    }
}

/// A tool call's name and one-line input, from a `pre_action` payload.
pub(super) fn describe_call(event: &Event) -> (String, String) {
    let p = &event.payload;
    let tool = p
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or(event.event_type.as_str())
        .to_owned();
    let line = crate::ask::describe(event);
    let input = match line.split_once(": ") {
        Some((_, rest)) => rest
            .strip_prefix(&format!("{tool} "))
            .unwrap_or(rest)
            .to_owned(),
        None => line,
    };
    (tool, input)
}

/// Every live session, by id.
pub(super) type Sessions = BTreeMap<String, Session>;
