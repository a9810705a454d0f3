//! The light look: frames the protocol has no interest in are passed on after reading only
//! their method and id (nothing built), which is most of a busy stream.

use serde_json::Value;

use super::{lock, Engine, Step};
use crate::intercept::proxy::{Decide, Direction, Protocol};
use crate::jsonrpc::{Frame, Id};

impl<P: Protocol, G: Decide> Engine<'_, P, G> {
    /// The light look at a frame the protocol has no interest in: its method and id only,
    /// read without building the message. `None` leaves the frame to the full look (not a
    /// plain object, a duplicate key, a call the protocol intercepts, an answer it watches).
    pub(super) async fn light(&self, dir: Direction, frame: &Frame) -> Option<Step> {
        let peek: Peek = serde_json::from_slice(frame.content()).ok()?;
        let id = match &peek.id {
            Some(v) => Some(Id::from_value(v)?),
            None => None,
        };
        match (peek.method.as_deref(), id) {
            (Some(method), _) if self.protocol.intercepts(dir, method) => None,
            (Some(_), None) => Some(self.forward(dir, frame.raw()).await),
            (Some(_), Some(id)) => {
                if !self.insert(dir, &id, false, None) {
                    return Some(self.refuse_busy(dir, &id).await);
                }
                Some(self.forward(dir, frame.raw()).await)
            }
            (None, Some(id)) if peek.result.is_some() != peek.error.is_some() => {
                if self.watched(dir.back(), &id) {
                    return None;
                }
                let _ = self.take_answered(dir.back(), &id);
                Some(self.forward(dir, frame.raw()).await)
            }
            (None, _) => None,
        }
    }

    /// Whether the request that travelled `dir` with this id is watched by the protocol.
    fn watched(&self, dir: Direction, id: &Id) -> bool {
        lock(&self.pending[dir.index()])
            .get(&id.to_string())
            .is_some_and(|f| f.tracked.is_some())
    }
}

/// What the light look reads of a frame: the method and id, and whether it has a result or
/// an error. Anything else is skipped without being built; a duplicate of these keys fails
/// the look (the full look then decides, as a peer would read it: the last one wins).
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    result: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}
