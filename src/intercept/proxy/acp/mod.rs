//! ACP (Agent Client Protocol v1) over the stream proxy: editor ⇄ ahp-wrap ⇄ agent. The
//! *client* of the engine (our stdin/stdout) is the editor; the *server* (our child) is the
//! agent.
//!
//! Owns: which ACP calls are held for the gate and what each verdict becomes in ACP
//! (`payload.rs` builds the AHP payloads). Must not touch: framing, ordering or I/O (the
//! engine), the policy, the audit log. The mapping (shims/acp/README.md has the table):
//!
//! - editor → agent `session/prompt`: `pre_prompt`. Block: the agent never gets it; the
//!   editor gets the reason (an `agent_message_chunk` update) and `stopReason: "refusal"`.
//!   Modify: the agent gets the rewritten prompt.
//! - agent → editor `session/request_permission`: `pre_action`, asked with a native "ask"
//!   (the editor's permission UI). Block: the agent gets the request's reject option from
//!   us. Explicit allow: the allow-once option from us. No opinion or escalate: the editor
//!   asks its person, as without ahp-wrap.
//! - agent → editor `fs/write_text_file`, `fs/read_text_file`, `terminal/create`:
//!   `pre_action`. Block: a JSON-RPC error to the agent, the editor never gets it. Modify:
//!   the editor gets the rewritten request. Their answers become `post_action`s.
//! - agent → editor `session/update` reporting a finished tool call: `post_action`.
//! - editor → agent `session/cancel`: passes through byte for byte, and every decision still
//!   pending on an agent → editor call of that session is cut short: a permission request
//!   gets the `cancelled` outcome (what the protocol asks of the editor), a file or terminal
//!   call a JSON-RPC "request cancelled" error; neither reaches the editor, and the audit
//!   log records each as blocked by `cancelled`. A `session/prompt` still held cannot be
//!   cancelled this way: the cancel travels behind it, in order.
//! - everything else passes through byte for byte.

mod calls;
mod payload;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_policy;

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::pump::PROXY_ERROR;
use super::{
    post_action_result, Direction, Disposition, GateEvent, HeldCall, Notice, OnCall, Protocol,
    Resolution, Tracked,
};
use crate::jsonrpc::RpcError;
use crate::protocol::{unapplicable_modify, EventType, Final};
use payload::str_at;

const PROMPT: &str = "session/prompt";
const CANCEL: &str = "session/cancel";
const NEW_SESSION: &str = "session/new";
const LOAD_SESSION: &str = "session/load";
const PERMISSION: &str = "session/request_permission";
const UPDATE: &str = "session/update";
const WRITE: &str = "fs/write_text_file";
const READ: &str = "fs/read_text_file";
const TERMINAL: &str = "terminal/create";

/// Sessions whose working directory is remembered (memory stays bounded whatever the
/// editor sends; a session past it is decided with the agent's own directory).
const MAX_SESSIONS: usize = 1024;

/// The ACP mapping for one agent.
pub struct Acp {
    agent: String,
    cwd: Option<String>,
    /// Each session's working directory (`session/new`, `session/load`).
    sessions: Mutex<HashMap<String, String>>,
    /// What each unfinished tool call said about itself (its kind, title, input).
    tool_calls: Mutex<calls::ToolCalls>,
}

impl Acp {
    /// `agent` names the agent in messages; `cwd` is the directory it runs in (the policy
    /// resolves paths against a session's `cwd`, else this).
    pub fn new(agent: impl Into<String>, cwd: Option<std::path::PathBuf>) -> Acp {
        Acp {
            agent: agent.into(),
            cwd: cwd.map(|c| c.display().to_string()),
            sessions: Mutex::new(HashMap::new()),
            tool_calls: Mutex::new(calls::ToolCalls::default()),
        }
    }

    fn cwd_of(&self, params: Option<&Value>) -> Option<String> {
        let session = str_at(params, "sessionId");
        let known = session.and_then(|s| lock(&self.sessions).get(s).cloned());
        known.or_else(|| self.cwd.clone())
    }

    fn remember(&self, session: Option<&str>, cwd: Option<&str>) {
        let (Some(session), Some(cwd)) = (session, cwd) else {
            return;
        };
        let mut sessions = lock(&self.sessions);
        if sessions.len() < MAX_SESSIONS || sessions.contains_key(session) {
            sessions.insert(session.to_owned(), cwd.to_owned());
        }
    }

    /// A `session/update` that reports a tool call finished, with the fields its earlier
    /// updates (or its permission request) gave and this one does not repeat; `None` for any
    /// other update (one about an unfinished tool call is remembered).
    fn tool_call_as_known(&self, params: Option<&Value>) -> Option<Value> {
        let update = params?.get("update")?;
        let kind = update.get("sessionUpdate")?.as_str()?;
        if !matches!(kind, "tool_call" | "tool_call_update") {
            return None;
        }
        let finished = matches!(
            update.get("status").and_then(Value::as_str),
            Some("completed" | "failed")
        );
        let session = str_at(params, "sessionId");
        let known = lock(&self.tool_calls).seen(session, update, finished);
        if !finished {
            return None;
        }
        let mut params = params?.clone();
        params["update"] = known;
        Some(params)
    }

    fn metadata(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("framework".into(), "acp".into());
        m.insert("interceptor".into(), "stream-proxy".into());
        m.insert("acp_agent".into(), self.agent.clone().into());
        m
    }

    fn event(&self, event_type: EventType, payload: Value) -> GateEvent {
        GateEvent {
            event_type,
            payload,
            metadata: self.metadata(),
        }
    }

    fn held(&self, method: &str, params: Option<&Value>) -> Option<HeldCall> {
        let cwd = self.cwd_of(params);
        let cwd = cwd.as_deref();
        let scope = str_at(params, "sessionId").map(str::to_owned);
        let held = match method {
            PROMPT => {
                HeldCall::new(self.event(EventType::PrePrompt, payload::pre_prompt(params, cwd)))
            }
            PERMISSION => {
                if let Some(call) = params.and_then(|p| p.get("toolCall")) {
                    lock(&self.tool_calls).seen(str_at(params, "sessionId"), call, false);
                }
                HeldCall {
                    native_ask: true,
                    scope,
                    ..HeldCall::new(
                        self.event(EventType::PreAction, payload::permission(params, cwd)),
                    )
                }
            }
            WRITE | READ | TERMINAL => HeldCall {
                scope,
                ..HeldCall::new(self.event(
                    EventType::PreAction,
                    payload::editor_op(method, params, cwd),
                ))
            },
            _ => return None,
        };
        Some(held)
    }
}

impl Protocol for Acp {
    fn name(&self) -> &'static str {
        "acp"
    }

    fn server_label(&self) -> String {
        format!("the ACP agent {:?}", self.agent)
    }

    fn methods(&self, dir: Direction) -> Option<&'static [&'static str]> {
        Some(match dir {
            Direction::ToServer => &[PROMPT, NEW_SESSION, LOAD_SESSION, CANCEL],
            Direction::ToClient => &[PERMISSION, WRITE, READ, TERMINAL, UPDATE],
        })
    }

    fn call(&self, dir: Direction, method: &str, params: Option<&Value>, request: bool) -> OnCall {
        match (dir, method) {
            // Held with or without an id: a lenient peer might act on a call that is not
            // valid ACP, and only a decision may let it through.
            (Direction::ToServer, PROMPT)
            | (Direction::ToClient, PERMISSION | WRITE | READ | TERMINAL) => {
                self.held(method, params).map_or(OnCall::Pass, OnCall::Hold)
            }
            (Direction::ToServer, NEW_SESSION) if request => OnCall::Watch(Tracked {
                method: NEW_SESSION.into(),
                note: json!(str_at(params, "cwd")),
            }),
            (Direction::ToServer, CANCEL) => match str_at(params, "sessionId") {
                Some(session) => OnCall::Cancel(session.to_owned()),
                None => OnCall::Pass,
            },
            (Direction::ToServer, LOAD_SESSION) => {
                self.remember(str_at(params, "sessionId"), str_at(params, "cwd"));
                OnCall::Pass
            }
            (Direction::ToClient, UPDATE) => {
                let Some(params) = self.tool_call_as_known(params) else {
                    return OnCall::Pass;
                };
                let cwd = self.cwd_of(Some(&params));
                match payload::tool_result(Some(&params), cwd.as_deref()) {
                    Some(p) => OnCall::Notify(self.event(EventType::PostAction, p)),
                    None => OnCall::Pass,
                }
            }
            _ => OnCall::Pass,
        }
    }

    fn resolve(
        &self,
        _dir: Direction,
        method: &str,
        params: Option<&Value>,
        held: &HeldCall,
        verdict: &Final,
    ) -> Resolution {
        match method {
            PROMPT => prompt_decided(params, verdict),
            PERMISSION => permission_decided(params, verdict),
            _ => op_decided(method, params, held, verdict),
        }
    }

    fn cancelled(
        &self,
        _dir: Direction,
        method: &str,
        _params: Option<&Value>,
        _held: &HeldCall,
    ) -> Disposition {
        match method {
            // What the protocol asks the editor to answer after its own session/cancel.
            PERMISSION => Disposition::Answer(json!({"outcome": {"outcome": "cancelled"}})),
            _ => Disposition::Refuse {
                code: super::REQUEST_CANCELLED,
                message: format!(
                    "ahp-wrap: the editor cancelled the session before {method} was decided"
                ),
            },
        }
    }

    fn answered(
        &self,
        _dir: Direction,
        tracked: Tracked,
        outcome: &Result<Value, RpcError>,
    ) -> Option<GateEvent> {
        match tracked.method.as_str() {
            NEW_SESSION => {
                let result = outcome.as_ref().ok();
                self.remember(str_at(result, "sessionId"), tracked.note.as_str());
                None
            }
            WRITE | READ | TERMINAL => {
                let mut payload = tracked.note;
                payload["result"] = post_action_result(outcome, false);
                Some(self.event(EventType::PostAction, payload))
            }
            _ => None,
        }
    }
}

/// Why a verdict that does not let the call through did not, in words for a person.
fn refusal_reason(verdict: &Final) -> String {
    match verdict {
        Final::Block { reason } => reason.clone(),
        // An escalation comes back only where the editor is the native ask; one that comes
        // back elsewhere was not answered.
        Final::Ask { reason, .. } => format!(
            "ahp-wrap blocked this because it was escalated to a person ({reason}) and no person \
             answered"
        ),
        // The callers forward an allow and apply a modify before they ask for a reason.
        Final::Allow { .. } | Final::Modify { .. } => {
            "ahp-wrap blocked this because the harness did not decide in time".to_owned()
        }
    }
}

/// The reason shown to the editor's person, as the agent's own message in the session.
fn shown_to_editor(params: Option<&Value>, reason: &str) -> Vec<Notice> {
    let Some(session) = str_at(params, "sessionId") else {
        return Vec::new();
    };
    vec![Notice {
        to: Direction::ToClient,
        method: UPDATE.into(),
        params: json!({
            "sessionId": session,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": format!("[ahp-wrap] {reason}")},
            },
        }),
    }]
}

fn resolution(outcome: Disposition, watch: Option<Tracked>, notices: Vec<Notice>) -> Resolution {
    Resolution {
        outcome,
        watch,
        notices,
    }
}

fn prompt_decided(params: Option<&Value>, verdict: &Final) -> Resolution {
    let why = match (verdict.replacement(), verdict) {
        (Some(modified), _) => match payload::rewritten_prompt(params, modified) {
            Ok(p) => return resolution(Disposition::Rewrite(p), None, Vec::new()),
            Err(why) => unapplicable_modify(&why),
        },
        (None, Final::Allow { .. }) => return resolution(Disposition::Forward, None, Vec::new()),
        (None, v) => refusal_reason(v),
    };
    let answer = Disposition::Answer(json!({"stopReason": "refusal"}));
    resolution(answer, None, shown_to_editor(params, &why))
}

/// The `optionId` of the first option of one of these kinds, in the order given.
fn option(params: Option<&Value>, kinds: &[&str]) -> Option<Value> {
    let options = params?.get("options")?.as_array()?;
    kinds.iter().find_map(|k| {
        options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(k))
            .and_then(|o| o.get("optionId").cloned())
    })
}

fn permission_decided(params: Option<&Value>, verdict: &Final) -> Resolution {
    let why = match (verdict.replacement(), verdict) {
        // The tool call's input lives in the agent: a permission cannot change it.
        (Some(_), _) => unapplicable_modify(
            "an ACP permission request cannot change the tool call it asks about",
        ),
        (None, Final::Allow { explicit: true, .. }) => {
            match option(params, &["allow_once", "allow_always"]) {
                Some(id) => {
                    let chosen = json!({"outcome": {"outcome": "selected", "optionId": id}});
                    return resolution(Disposition::Answer(chosen), None, Vec::new());
                }
                // Nothing to choose: the editor's person decides.
                None => return resolution(Disposition::Forward, None, Vec::new()),
            }
        }
        // No opinion: the editor asks its person, as without ahp-wrap.
        (None, Final::Allow { .. }) => return resolution(Disposition::Forward, None, Vec::new()),
        // A person must decide: the editor's permission UI is the native ask.
        (None, Final::Ask { reason, .. }) => {
            let ask = format!("the harness asks you to decide: {reason}");
            return resolution(Disposition::Forward, None, shown_to_editor(params, &ask));
        }
        (None, v) => refusal_reason(v),
    };
    let outcome = match option(params, &["reject_once", "reject_always"]) {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        // No reject option offered: "cancelled" is the one answer that never approves.
        None => json!({"outcome": {"outcome": "cancelled"}}),
    };
    resolution(
        Disposition::Answer(outcome),
        None,
        shown_to_editor(params, &why),
    )
}

fn op_decided(
    method: &str,
    params: Option<&Value>,
    held: &HeldCall,
    verdict: &Final,
) -> Resolution {
    let watch = |note: Value| {
        Some(Tracked {
            method: method.to_owned(),
            note,
        })
    };
    let why = match (verdict.replacement(), verdict) {
        (Some(modified), _) => match payload::rewritten_op(method, params, modified) {
            Ok(p) => {
                let cwd = held.event.payload["context"]["working_directory"].as_str();
                let note = payload::editor_op(method, Some(&p), cwd);
                return resolution(Disposition::Rewrite(p), watch(note), Vec::new());
            }
            Err(why) => unapplicable_modify(&why),
        },
        (None, Final::Allow { .. }) => {
            return resolution(
                Disposition::Forward,
                watch(held.event.payload.clone()),
                Vec::new(),
            )
        }
        (None, v) => refusal_reason(v),
    };
    let refuse = Disposition::Refuse {
        code: PROXY_ERROR,
        message: why.clone(),
    };
    resolution(refuse, None, shown_to_editor(params, &why))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The map holds no invariant a panic could break halfway.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
