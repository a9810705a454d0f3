//! The host as the gate's [`Approver`]: every event and decision becomes session state and
//! actions; an escalation waits as a pending tool confirmation for its first answer.

use serde_json::{json, Value};

use super::state::{chat_uri, session_uri, CallStatus, ROOT, TURN};
use super::{event_key, Host, Waiting};
use crate::gate::{Approval, Approver, BoxFuture, DecidedBy, Decision, Escalation};
use crate::protocol::{Event, EventType, Final};

/// How long a session may stay silent before it is taken for ended.
const QUIET: std::time::Duration = std::time::Duration::from_secs(300);

impl Approver for Host {
    fn approve<'a>(&'a self, e: Escalation<'a>) -> BoxFuture<'a, Approval> {
        Box::pin(self.wait_for_person(e))
    }

    fn observe(&self, event: &Event, decision: Option<&Decision>) {
        self.seen(event, decision);
    }
}

/// Settles an escalation whose wait was dropped before it ended.
struct Withdrawn<'a> {
    host: &'a Host,
    sid: &'a str,
    id: &'a str,
    armed: bool,
}

impl Drop for Withdrawn<'_> {
    fn drop(&mut self) {
        if self.armed {
            let why = Approval::Unanswered("the call was withdrawn before an answer".into());
            self.host.settle(self.sid, self.id, &why);
        }
    }
}

impl Host {
    #[allow(clippy::expect_used, reason = "made just above, under the same lock")]
    async fn wait_for_person(&self, e: Escalation<'_>) -> Approval {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let left = e
            .deadline
            .saturating_duration_since(tokio::time::Instant::now());
        let deadline = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + left);
        let (sid, id, text) = {
            let mut inner = self.lock();
            let (sid, id) = inner.new_call(&self.tx, e.event);
            let meta = json!({"reason": e.reason, "rule": e.rule, "target": e.target,
                "deadline": deadline.to_string()});
            let call = inner.call(&sid, &id).expect("just made");
            call.status = CallStatus::Pending;
            call.waiting = true;
            call.escalation = Some(meta);
            let s = &inner.sessions[&sid];
            let request = s.input_request(s.calls.last().expect("just made"));
            let (cwd, text) = (
                s.cwd.clone(),
                format!(
                    "{} in {}: {}",
                    s.framework,
                    s.cwd,
                    crate::ask::describe(e.event)
                ),
            );
            let set = json!({"type": "session/inputNeededSet", "request": request});
            inner.action(&self.tx, &session_uri(&sid), &cwd, set);
            inner.status_changed(&self.tx, &sid);
            inner.escalated.insert(event_key(e.event), id.clone());
            inner.waiting.insert(
                id.clone(),
                Waiting {
                    session: sid.clone(),
                    reason: e.reason.to_owned(),
                    tx,
                },
            );
            (sid, id, text)
        };
        // If this wait is abandoned (the call was cancelled upstream), it still leaves the
        // page and the pending list.
        let mut withdrawn = Withdrawn {
            host: self,
            sid: &sid,
            id: &id,
            armed: true,
        };
        if let Some(w) = &self.webhook {
            w.post(&text, e.reason, e.rule);
        }
        let answer = match tokio::time::timeout_at(e.deadline, rx).await {
            Ok(Ok(answer)) => answer,
            _ => Approval::Unanswered(format!(
                "escalated to a person ({}), and nobody answered on the approvals host within {} s",
                e.reason,
                left.as_secs()
            )),
        };
        withdrawn.armed = false;
        self.settle(&sid, &id, &answer);
        answer
    }

    /// The escalation of call `id` is over: it leaves `inputNeeded`, and a person's answer
    /// is shown at once (the fail mode's, when the decision comes).
    fn settle(&self, sid: &str, id: &str, answer: &Approval) {
        let mut inner = self.lock();
        inner.waiting.remove(id);
        let origin = inner.origins.remove(id);
        let Some(call) = inner.call(sid, id) else {
            return;
        };
        call.waiting = false;
        let cwd = inner.sessions[sid].cwd.clone();
        let removed = json!({"type": "session/inputNeededRemoved", "id": id});
        inner.action(&self.tx, &session_uri(sid), &cwd, removed);
        inner.status_changed(&self.tx, sid);
        let status = match answer {
            Approval::Allow { .. } => CallStatus::Running {
                confirmed: "user-action",
            },
            Approval::Deny { reason, .. } => CallStatus::Denied {
                reason: reason.clone(),
            },
            Approval::Unanswered(_) => return,
        };
        self.confirm(&mut inner, sid, id, status, origin);
    }

    /// Shows the call's new status as a `chat/toolCallConfirmed`: the echo of a client's
    /// answer when `origin` says whose.
    fn confirm(
        &self,
        inner: &mut super::Inner,
        sid: &str,
        id: &str,
        status: CallStatus,
        origin: Option<Value>,
    ) {
        let Some(call) = inner.call(sid, id) else {
            return;
        };
        call.status = status.clone();
        let mut a = json!({"type": "chat/toolCallConfirmed", "turnId": TURN, "toolCallId": id});
        match status {
            CallStatus::Running { confirmed } => {
                a["approved"] = json!(true);
                a["confirmed"] = json!(confirmed);
            }
            CallStatus::Denied { reason } => {
                a["approved"] = json!(false);
                a["reason"] = json!("denied");
                a["reasonMessage"] = json!(reason);
            }
            _ => return,
        }
        let cwd = inner.sessions[sid].cwd.clone();
        let mut envelope = json!({ "action": a });
        if let Some(origin) = origin {
            envelope["origin"] = origin;
        }
        inner.emit(&self.tx, &chat_uri(sid), &cwd, "action", envelope);
    }

    /// An event the gate saw, with its decision if it was blocking.
    #[allow(
        clippy::expect_used,
        reason = "checked just above, under the same lock"
    )]
    fn seen(&self, event: &Event, decision: Option<&Decision>) {
        let mut inner = self.lock();
        self.sweep(&mut inner);
        if let Some(s) = inner.sessions.get_mut(&event.session_id) {
            s.last_seen = std::time::Instant::now();
        }
        match event.event_type {
            EventType::SessionEnd => self.ended(&mut inner, &event.session_id),
            EventType::PreAction => {
                let Some(d) = decision else { return };
                let (sid, id) = match inner.escalated.remove(&event_key(event)) {
                    Some(id) => (event.session_id.clone(), id),
                    None => inner.new_call(&self.tx, event),
                };
                let pending = inner.call(&sid, &id).is_some_and(|c| {
                    matches!(c.status, CallStatus::Pending) || c.escalation.is_none()
                });
                if !pending {
                    return; // a person's answer, already shown
                }
                let status = match &d.verdict {
                    Final::Block { reason } => CallStatus::Denied {
                        reason: reason.clone(),
                    },
                    Final::Allow { .. } | Final::Modify { .. } => CallStatus::Running {
                        confirmed: if matches!(d.by, DecidedBy::Person(_)) {
                            "user-action"
                        } else {
                            "setting"
                        },
                    },
                    _ => return,
                };
                self.confirm(&mut inner, &sid, &id, status, None);
            }
            EventType::PostAction => self.completed(&mut inner, event),
            EventType::SessionStart if inner.sessions.contains_key(&event.session_id) => {
                let s = inner.sessions.get_mut(&event.session_id).expect("checked");
                s.started_by(event);
                let (summary, cwd) = (s.summary(), s.cwd.clone());
                let changes = json!({"session": summary["resource"], "changes": summary});
                inner.emit(&self.tx, ROOT, &cwd, "root/sessionSummaryChanged", changes);
            }
            _ => {
                inner.session(&self.tx, event);
            }
        }
    }

    fn completed(&self, inner: &mut super::Inner, event: &Event) {
        let Some(use_id) = event.payload.get("tool_use_id").and_then(|v| v.as_str()) else {
            return;
        };
        let sid = event.session_id.clone();
        let Some(call) = inner.call(&sid, use_id) else {
            return;
        };
        if !matches!(call.status, CallStatus::Running { .. }) {
            return;
        }
        let success = !event
            .payload
            .get("is_error")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        call.status = CallStatus::Completed { success };
        let past = format!("Ran {}", call.tool);
        let cwd = inner.sessions[&sid].cwd.clone();
        let a = json!({"type": "chat/toolCallComplete", "turnId": TURN, "toolCallId": use_id,
            "result": {"success": success, "pastTenseMessage": past}});
        inner.action(&self.tx, &chat_uri(&sid), &cwd, a);
    }

    /// Sessions that sent nothing for [`QUIET`] and wait for nobody are taken for ended
    /// (their wrapper died without `session_end`; heartbeats come every 30 s by default).
    fn sweep(&self, inner: &mut super::Inner) {
        let quiet: Vec<String> = inner
            .sessions
            .values()
            .filter(|s| s.last_seen.elapsed() > QUIET && !s.calls.iter().any(|c| c.waiting))
            .map(|s| s.id.clone())
            .collect();
        for sid in quiet {
            self.ended(inner, &sid);
        }
    }

    /// The session is over: its waiting escalations get no answer, it leaves the catalogue.
    fn ended(&self, inner: &mut super::Inner, sid: &str) {
        let Some(s) = inner.sessions.remove(sid) else {
            return;
        };
        inner.waiting.retain(|_, w| w.session != sid);
        let done = json!({"type": "chat/turnComplete", "turnId": TURN});
        inner.action(&self.tx, &chat_uri(sid), &s.cwd, done);
        let gone = json!({"session": session_uri(sid)});
        inner.emit(&self.tx, ROOT, &s.cwd, "root/sessionRemoved", gone);
    }
}
