//! A held call: asked of the gate (or cut short by its scope's cancellation), then carried
//! out: forwarded as it is or rewritten, or answered by the proxy and never forwarded.

use serde_json::{Map, Value};

use super::{Engine, Step};
use crate::intercept::proxy::{Decide, Direction, Disposition, HeldCall, Protocol, Resolution};
use crate::jsonrpc::{error_response, notification, response, Frame, Id};

impl<P: Protocol, G: Decide> Engine<P, G> {
    /// Holds a call until the gate decides (or its scope is cancelled first), then
    /// forwards it, rewritten or not, or answers its sender ourselves.
    pub(super) async fn hold(
        &self,
        dir: Direction,
        frame: Frame,
        id: Option<Id>,
        method: &str,
        params: Option<Value>,
        held: HeldCall,
    ) -> Step {
        // What was passed on before this call goes out now, not after its decision.
        self.flush(dir).await?;
        if let Some(id) = &id {
            // Registered before the decision, so that a proxy ending meanwhile answers it.
            if self.register(dir, id, true, None).is_err() {
                return self.refuse_busy(dir, id).await;
            }
        }
        let started = tokio::time::Instant::now();
        let mut watch = held.scope.as_deref().map(|s| self.cancels.watch(s));
        let decision = self.ask(&held);
        let cancelled = async {
            match watch.as_mut() {
                Some(w) => w.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let decided = tokio::select! {
            verdict = decision => {
                self.protocol.resolve(dir, method, params.as_ref(), &held, &verdict)
            }
            () = cancelled => {
                let outcome = self.protocol.cancelled(dir, method, params.as_ref(), &held);
                let why = format!("the peer cancelled {method} before it was decided");
                self.gate.abandoned(held.event.clone(), why, started.elapsed()).await;
                Resolution { outcome, watch: None, notices: Vec::new() }
            }
        };
        drop(watch);
        self.apply(dir, frame, id, decided).await
    }

    /// Asks the gate about a held call.
    async fn ask(&self, held: &HeldCall) -> crate::protocol::Final {
        let event = held.event.clone();
        if held.native_ask {
            self.gate.decide_native(event).await
        } else {
            self.gate.decide(event).await
        }
    }

    /// Carries out what a held call became: forwarded as it is or rewritten, or answered
    /// by us and never forwarded.
    async fn apply(
        &self,
        dir: Direction,
        frame: Frame,
        id: Option<Id>,
        decided: Resolution,
    ) -> Step {
        for n in &decided.notices {
            self.answer(n.to, notification(&n.method, &n.params))
                .await?;
        }
        let id_value = id.as_ref().map_or(Value::Null, Id::to_value);
        let bytes = match decided.outcome {
            Disposition::Forward => frame.into_raw().to_vec(),
            Disposition::Rewrite(params) => match rewrite(frame.content(), params) {
                Some(bytes) => bytes,
                None => {
                    self.forget(dir, id.as_ref());
                    let why = "ahp-wrap: the call could not be rewritten as decided";
                    return self.refuse(dir, &id_value, why).await;
                }
            },
            Disposition::Answer(result) => {
                self.forget(dir, id.as_ref());
                return match id {
                    Some(_) => self.answer(dir.back(), response(&id_value, &result)).await,
                    None => Ok(()),
                };
            }
            Disposition::Refuse { code, message } => {
                self.forget(dir, id.as_ref());
                return match id {
                    Some(_) => {
                        let line = error_response(&id_value, code, &message);
                        self.answer(dir.back(), line).await
                    }
                    None => Ok(()),
                };
            }
        };
        if let Some(id) = &id {
            self.release(dir, id, decided.watch);
        }
        self.forward(dir, &bytes).await
    }
}

/// The message in `content` with its `params` replaced, as a frame.
fn rewrite(content: &[u8], params: Value) -> Option<Vec<u8>> {
    let mut message: Map<String, Value> = serde_json::from_slice(content).ok()?;
    message.insert("params".into(), params);
    let mut bytes = serde_json::to_vec(&message).ok()?;
    bytes.push(b'\n');
    Some(bytes)
}
