//! The Agent Host Protocol (Microsoft's AHP v1) host: live sessions, their tool calls and
//! decisions, and pending escalations that an authenticated client answers from anywhere.
//!
//! Owns: the sessions the gate (a wrapper's, or `serve`'s) shows it ([`Host`] is an
//! [`Approver`](crate::gate::Approver)), holding an escalation as a pending tool confirmation until the first
//! authorised answer or the deadline, the wire (JSON-RPC over WebSocket: [`wire`]), the
//! tokens ([`auth`]), the approvals page and its HTTP routes ([`http`]) and the optional
//! webhook ([`notify`]). Must not touch: what an answer means for the agent (the gate
//! turns [`Approval`] into a decision, the fail mode included) or the audit log (the gate
//! records who answered, from [`Answerer`]).

pub(crate) mod auth;
pub(crate) mod http;
pub(crate) mod notify;
mod observe;
mod options;
mod state;
pub(crate) mod wire;

pub(crate) use auth::{Token, Tokens};
pub(crate) use http::{router, serve_on};
pub(crate) use options::{HostError, HostOptions, HostRequest};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot};

use crate::gate::{Answerer, Approval};
use crate::protocol::Event;
use state::{chat_uri, Call, CallStatus, Session, Sessions, ROOT, TURN};

/// One message for the clients subscribed to `channel`, about a session in `cwd`.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// The channel URI: `ahp-root://`, or a session's `ahp-session:/…` / `ahp-chat:/…`.
    pub channel: String,
    /// The session's working directory; a token that does not see it gets nothing.
    pub cwd: String,
    /// The host's sequence number for this message; a client gets it only if it is past
    /// the snapshot its subscription started from.
    pub seq: u64,
    /// The whole JSON-RPC notification, serialised once for every client.
    pub text: Arc<str>,
}

/// A client's answer to a pending tool confirmation, as it dispatched it.
pub(crate) struct Reply<'a> {
    /// The chat it was dispatched to.
    pub chat: &'a str,
    /// The tool call it answers.
    pub call: &'a str,
    /// `true` lets the tool call run; `false` denies it.
    pub approved: bool,
    /// Why, in the client's words (for a denial).
    pub message: Option<String>,
    /// Who dispatched it: an `ActionOrigin` (`clientId`, `clientSeq`), which the
    /// confirmation that shows the answer carries.
    pub origin: Value,
}

/// An escalation waiting for its first answer.
struct Waiting {
    session: String,
    reason: String,
    tx: oneshot::Sender<Approval>,
}

#[derive(Default)]
struct Inner {
    sessions: Sessions,
    /// By tool call id.
    waiting: HashMap<String, Waiting>,
    /// The tool call made for an escalated event, by [`event_key`].
    escalated: HashMap<String, String>,
    /// Who dispatched the answer being applied to a call (its `ActionEnvelope.origin`), by
    /// tool call id: the `chat/toolCallConfirmed` that shows the answer carries it, so that
    /// the client knows its answer was taken.
    origins: HashMap<String, Value>,
    seq: u64,
}

/// The host: shared by every client connection and the gate.
pub(crate) struct Host {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Outgoing>,
    /// The tokens clients authenticate with, and what each may see and answer.
    pub tokens: Tokens,
    webhook: Option<notify::Webhook>,
}

/// How many messages a slow client may fall behind before it is dropped.
const BACKLOG: usize = 4096;

impl Host {
    /// A host with no sessions yet; `webhook`, when given, gets each new escalation posted.
    pub(crate) fn new(tokens: Tokens, webhook: Option<notify::Webhook>) -> Arc<Host> {
        Arc::new(Host {
            inner: Mutex::default(),
            tx: broadcast::channel(BACKLOG).0,
            tokens,
            webhook,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every message from now on (each connection filters what it may see).
    pub(crate) fn updates(&self) -> broadcast::Receiver<Outgoing> {
        self.tx.subscribe()
    }

    /// A snapshot of `channel` as `token` may see it, and the sequence number it was taken
    /// at; `None` when there is no such channel for this token.
    pub(crate) fn snapshot(&self, channel: &str, token: &Token) -> Option<(Value, u64)> {
        let inner = self.lock();
        let visible = |s: &&Session| token.sees(&s.cwd);
        let state = if channel == ROOT {
            let n = inner.sessions.values().filter(visible).count();
            json!({
                "agents": [{
                    "provider": "ahp-wrap",
                    "displayName": "ahp-wrap",
                    "description": "Agents run under ahp-wrap; their escalated tool calls wait here for a person.",
                    "models": [],
                }],
                "activeSessions": n,
            })
        } else {
            let id = channel
                .strip_prefix("ahp-session:/")
                .or_else(|| channel.strip_prefix("ahp-chat:/"))?;
            let s = inner.sessions.get(id).filter(visible)?;
            if channel.starts_with("ahp-session:") {
                s.state()
            } else {
                s.chat()
            }
        };
        Some((state, inner.seq))
    }

    /// Summaries of the sessions `token` may see.
    pub(crate) fn list(&self, token: &Token) -> Vec<Value> {
        let inner = self.lock();
        inner
            .sessions
            .values()
            .filter(|s| token.sees(&s.cwd))
            .map(Session::summary)
            .collect()
    }

    /// The sequence number of the last message sent.
    pub(crate) fn seq(&self) -> u64 {
        self.lock().seq
    }

    /// A client's answer to a pending tool confirmation. The first one wins; later ones,
    /// and answers the token may not give, are refused with why.
    #[allow(
        clippy::expect_used,
        reason = "looked up just above, under the same lock"
    )]
    pub(crate) fn answer(&self, token: &Token, peer: &str, reply: Reply<'_>) -> Result<(), String> {
        let Reply {
            chat,
            call,
            approved,
            message,
            origin,
        } = reply;
        let mut inner = self.lock();
        let Some(w) = inner.waiting.get(call) else {
            return Err(format!(
                "no pending confirmation {call} (answered already, or past its deadline)"
            ));
        };
        let session = inner.sessions.get(&w.session);
        if chat != chat_uri(&w.session) || !session.is_some_and(|s| token.sees(&s.cwd)) {
            return Err(format!("no pending confirmation {call} on {chat}"));
        }
        if !token.scope.approve {
            return Err(format!(
                "the token {} may only watch (its scope is view)",
                token.name
            ));
        }
        let w = inner.waiting.remove(call).expect("looked up above");
        inner.origins.insert(call.to_owned(), origin);
        let by = Some(Answerer {
            who: token.name.clone(),
            from: peer.to_owned(),
        });
        let answer = if approved {
            Approval::Allow { by }
        } else {
            let said = message
                .filter(|m| !m.trim().is_empty())
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            Approval::Deny {
                by,
                reason: format!(
                    "denied by {} on the approvals page{said} (escalated because {})",
                    token.name, w.reason
                ),
            }
        };
        drop(inner);
        // The waiting escalation may have reached its deadline at this very moment: then
        // the fail mode has it, and this answer is refused.
        if w.tx.send(answer).is_err() {
            self.lock().origins.remove(call);
            return Err(format!(
                "no pending confirmation {call} (past its deadline)"
            ));
        }
        Ok(())
    }
}

impl Inner {
    /// Sends one JSON-RPC notification to the subscribers of `channel`.
    fn emit(
        &mut self,
        tx: &broadcast::Sender<Outgoing>,
        channel: &str,
        cwd: &str,
        method: &str,
        mut params: Value,
    ) {
        self.seq += 1;
        params["channel"] = json!(channel);
        if method == "action" {
            params["serverSeq"] = json!(self.seq);
        }
        let text = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        let _ = tx.send(Outgoing {
            channel: channel.to_owned(),
            cwd: cwd.to_owned(),
            seq: self.seq,
            text: text.into(),
        });
    }

    fn action(&mut self, tx: &broadcast::Sender<Outgoing>, channel: &str, cwd: &str, a: Value) {
        self.emit(tx, channel, cwd, "action", json!({ "action": a }));
    }

    /// The session of `event`, made from it if this is its first event.
    fn session(&mut self, tx: &broadcast::Sender<Outgoing>, event: &Event) -> String {
        let id = event.session_id.clone();
        if !self.sessions.contains_key(&id) {
            let s = Session::from_event(event);
            let (summary, cwd) = (s.summary(), s.cwd.clone());
            self.sessions.insert(id.clone(), s);
            self.emit(
                tx,
                ROOT,
                &cwd,
                "root/sessionAdded",
                json!({"summary": summary}),
            );
        }
        id
    }

    /// A new tool call for `event` on its session (announced: started, then ready).
    #[allow(clippy::expect_used, reason = "made just above, under the same lock")]
    fn new_call(&mut self, tx: &broadcast::Sender<Outgoing>, event: &Event) -> (String, String) {
        let sid = self.session(tx, event);
        let (tool, input) = state::describe_call(event);
        let s = self.sessions.get_mut(&sid).expect("made above");
        let mut id = event
            .payload
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if s.calls.iter().any(|c| c.id == id) {
            id = format!("{id}-{}", s.calls.len());
        }
        s.modified = event.timestamp.clone();
        s.calls.push(Call {
            id: id.clone(),
            tool: tool.clone(),
            input: input.clone(),
            status: CallStatus::Running {
                confirmed: "setting",
            },
            waiting: false,
            escalation: None,
        });
        let (chat, cwd) = (chat_uri(&sid), s.cwd.clone());
        let start = json!({"type": "chat/toolCallStart", "turnId": TURN, "toolCallId": id,
            "toolName": tool, "displayName": tool});
        self.action(tx, &chat, &cwd, start);
        let ready = json!({"type": "chat/toolCallReady", "turnId": TURN, "toolCallId": id,
            "invocationMessage": format!("{tool}: {input}"), "toolInput": input});
        self.action(tx, &chat, &cwd, ready);
        (sid, id)
    }

    /// Tells the root channel that a session's status changed (it waits for a person, or
    /// no longer does).
    fn status_changed(&mut self, tx: &broadcast::Sender<Outgoing>, sid: &str) {
        let Some(s) = self.sessions.get(sid) else {
            return;
        };
        let (cwd, status) = (s.cwd.clone(), s.status());
        let changed = json!({"session": state::session_uri(sid), "changes": {"status": status}});
        self.emit(tx, ROOT, &cwd, "root/sessionSummaryChanged", changed);
    }

    fn call(&mut self, sid: &str, id: &str) -> Option<&mut Call> {
        self.sessions
            .get_mut(sid)?
            .calls
            .iter_mut()
            .find(|c| c.id == id)
    }
}

/// Identifies one event between the escalation and the decision that follows it.
fn event_key(event: &Event) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}",
        event.session_id, event.timestamp, event.payload
    )
}

#[cfg(test)]
mod tests;
