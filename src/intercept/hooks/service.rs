//! The hook service: the parent's answer to one hook call — the framework's mapping, the
//! gate's decision, the framework's rendering — and what the run learns from hook calls
//! (which hooks were called, the agent's own session id).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::control::{CallerReply, Peer, Request};
use crate::frameworks::{self, Framework, HookContext, Mapped};
use crate::gate::{Gate, Origin};
use crate::protocol::{EventType, Final};

/// Answers hook calls for one run.
pub struct HookService {
    gate: Arc<Gate>,
    /// Whether a person can answer on a terminal.
    interactive: bool,
    /// The names of the hooks the agent has called so far.
    called: Mutex<BTreeSet<String>>,
    /// The agent's own session id, as its hooks last reported it (for the exit hint).
    framework_session: Mutex<Option<String>>,
}

impl HookService {
    /// Hook calls decided by `gate`; `interactive`: whether a person can answer on a
    /// terminal. No hook called yet.
    pub fn new(gate: Arc<Gate>, interactive: bool) -> HookService {
        HookService {
            gate,
            interactive,
            called: Mutex::default(),
            framework_session: Mutex::default(),
        }
    }

    /// Whether a person can answer on a terminal.
    pub(crate) fn interactive(&self) -> bool {
        self.interactive
    }

    /// Whether the agent has called the hook named `hook` in this run.
    pub(crate) fn called(&self, hook: &str) -> bool {
        self.called.lock().is_ok_and(|c| c.contains(hook))
    }

    /// Whether the agent has called any hook in this run.
    pub(crate) fn any_called(&self) -> bool {
        self.called.lock().is_ok_and(|c| !c.is_empty())
    }

    /// The agent's own session id, as its hooks last reported it.
    pub(crate) fn framework_session(&self) -> Option<String> {
        self.framework_session.lock().ok()?.clone()
    }

    /// Answers one hook call of `framework`.
    async fn hook(
        &self,
        framework: String,
        hook: String,
        cwd: PathBuf,
        payload: Vec<u8>,
        peer: Peer,
    ) -> CallerReply {
        let origin = |framework_session| crate::intercept::origin(peer, framework_session);
        if !peer.descends_from_agent {
            tracing::warn!(
                pid = peer.pid,
                "a {framework} {hook} hook call with the run's token came from outside the \
                 agent's process tree; it is audited as such"
            );
        }
        self.note_called(&hook);
        let Some(fw) = frameworks::find(&framework) else {
            return unknown_framework(&framework);
        };
        let cx = HookContext {
            hook: &hook,
            cwd: &cwd,
            interactive: self.interactive,
        };
        let mapped = match fw.map(&cx, &payload) {
            Ok(Some(m)) => m,
            Ok(None) => return fw.render(&cx, None, &Final::no_opinion()),
            Err(e) => return self.not_understood(fw, &cx, e, origin(None)).await,
        };
        self.note_framework_session(&mapped);
        let mut metadata = metadata(&framework, &hook, &mapped, peer);
        // Only what the policy decides needs it: a notification pays no read of /proc.
        if mapped.event_type.is_blocking() {
            if let Some(home) = agent_home(peer) {
                metadata.insert("agent_home".into(), home.into());
            }
        }
        let event = self
            .gate
            .event(mapped.event_type, mapped.payload.clone(), metadata);
        let origin = origin(mapped.framework_session.clone());
        if mapped.event_type.is_blocking() {
            let decision = self.gate.decide(&event, fw.native_ask(&cx), origin).await;
            fw.render(&cx, Some(&mapped), &decision.verdict)
        } else {
            let (met, notices) = match mapped.event_type {
                EventType::PostAction => (
                    self.gate.floor_met.met(&mapped.payload, &cwd),
                    self.gate.floor_met.take_notices(),
                ),
                _ => (Vec::new(), Vec::new()),
            };
            self.gate.notify(event, origin.clone()).await;
            if met.is_empty() && notices.is_empty() {
                return fw.render(&cx, Some(&mapped), &Final::no_opinion());
            }
            let told = match met.is_empty() {
                true => Final::no_opinion(),
                false => self.floor_refused(&met, origin).await,
            };
            fw.render(&cx, Some(&mapped), &with_notices(told, &notices))
        }
    }

    /// The floor refused what a tool call tried (its result says so, on a path the floor
    /// refuses): audited, and the agent is told why in the context its framework takes after
    /// a tool call.
    async fn floor_refused(&self, met: &[crate::gate::Told], origin: Origin) -> Final {
        let told = self.gate.floor_met.explain(met);
        let refused: Vec<Value> = met
            .iter()
            .map(|t| match t {
                crate::gate::Told::Write(m) => json!({
                    "path": m.path,
                    "refusal": m.refusal.text(),
                    "why": format!("{:?}", m.why).to_lowercase(),
                }),
                crate::gate::Told::Net { target, reason } => json!({
                    "target": target,
                    "why": reason,
                }),
            })
            .collect();
        let error = self.gate.event(
            EventType::Error,
            json!({"source": "floor", "message": told, "refused": refused}),
            Map::new(),
        );
        self.gate.notify(error, origin).await;
        let mut extra = Map::new();
        extra.insert("additional_context".into(), told.into());
        Final::Allow {
            explicit: false,
            modified_payload: None,
            extra,
        }
    }

    fn note_called(&self, hook: &str) {
        if let Ok(mut called) = self.called.lock() {
            if !called.contains(hook) {
                called.insert(hook.to_owned());
            }
        }
    }

    fn note_framework_session(&self, mapped: &Mapped) {
        if let (Some(fs), Ok(mut last)) = (&mapped.framework_session, self.framework_session.lock())
        {
            if last.as_ref() != Some(fs) {
                *last = Some(fs.clone());
            }
        }
    }

    /// A payload the framework's mapping rejected: an error event, and the fail mode.
    async fn not_understood(
        &self,
        fw: &dyn Framework,
        cx: &HookContext<'_>,
        e: frameworks::FrameworkError,
        origin: Origin,
    ) -> CallerReply {
        let (framework, hook) = (fw.name(), cx.hook);
        let message = format!("the {framework} {hook} hook payload was not understood: {e}");
        let error = self.gate.event(
            EventType::Error,
            json!({"source": "shim", "framework": framework, "hook": hook, "message": message}),
            Map::new(),
        );
        self.gate.notify(error, origin).await;
        fw.render(cx, None, &self.gate.fail(message).verdict)
    }
}

/// The event's metadata: where it came from, and a warning flag when the caller is not the
/// agent's own process.
fn metadata(framework: &str, hook: &str, mapped: &Mapped, peer: Peer) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("framework".into(), framework.into());
    metadata.insert("hook".into(), hook.into());
    if let Some(fs) = &mapped.framework_session {
        metadata.insert("framework_session_id".into(), fs.clone().into());
    }
    if !peer.descends_from_agent {
        // The harness should know too: this call is not the agent's own.
        metadata.insert(
            "sender".into(),
            json!({"pid": peer.pid, "descends_from_agent": false}),
        );
    }
    metadata
}

/// The `HOME` the hook process `peer` runs with: the agent's own, which `~` in the policy's
/// rules also covers (an agent started with another home still writes its start-up files
/// and keys there). Read from the environment the process started with (each hook call is a
/// process of its own, its parent often a shell of its own too, so there is nothing to
/// cache); `None` when it cannot be read or is not an absolute path.
fn agent_home(peer: Peer) -> Option<String> {
    if peer.pid <= 0 {
        return None;
    }
    let env = crate::child::procfs::environ(peer.pid)?;
    let home = crate::child::procfs::env_value(&env, "HOME")?;
    std::str::from_utf8(home)
        .ok()
        .filter(|home| home.starts_with('/'))
        .map(str::to_owned)
}

fn unknown_framework(framework: &str) -> CallerReply {
    CallerReply {
        stdout: Vec::new(),
        stderr: format!("ahp-wrap: unknown framework {framework:?}; blocking\n").into_bytes(),
        exit_code: 2,
    }
}

impl HookService {
    /// Answers a hook request from the control socket.
    pub async fn handle(&self, request: Request) -> CallerReply {
        self.hook(
            request.scope,
            request.name,
            request.cwd,
            request.payload,
            request.peer,
        )
        .await
    }
}

/// `told`, with `notices` for the agent added to its context after a tool call.
fn with_notices(told: Final, notices: &[String]) -> Final {
    if notices.is_empty() {
        return told;
    }
    let (explicit, modified_payload, mut extra) = match told {
        Final::Allow {
            explicit,
            modified_payload,
            extra,
        } => (explicit, modified_payload, extra),
        other => return other,
    };
    let mut text = extra
        .get("additional_context")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_default();
    for n in notices {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(n);
    }
    extra.insert("additional_context".into(), text.into());
    Final::Allow {
        explicit,
        modified_payload,
        extra,
    }
}
