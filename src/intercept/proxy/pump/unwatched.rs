//! Frames the protocol does not watch: passed on after reading only their method and id
//! (nothing built), which is most of a busy stream; and before that, the byte scan
//! ([`ByteScan`]) that passes a frame with no id naming none of the protocol's methods
//! without parsing it at all.

use memchr::memmem::Finder;
use serde_json::Value;

use super::{lock, Engine, Step};
use crate::intercept::proxy::{Decide, Direction, Protocol};
use crate::jsonrpc::{Frame, Id};

impl<P: Protocol, G: Decide> Engine<P, G> {
    /// A frame the protocol may not watch, read for its method and id only,
    /// read without building the message. `None` leaves the frame to the full look (not a
    /// plain object, a duplicate key, a call the protocol intercepts, an answer it watches).
    pub(super) async fn unwatched(&self, dir: Direction, frame: &Frame) -> Option<Step> {
        if self.scans[dir.index()]
            .as_ref()
            .is_some_and(|q| q.passes(frame.content()))
        {
            return Some(self.forward(dir, frame.raw()).await);
        }
        let peek: Peek = serde_json::from_slice(frame.content()).ok()?;
        let id = match &peek.id {
            Some(v) => Some(Id::from_value(v)?),
            None => None,
        };
        match (peek.method.as_deref(), id) {
            (Some(method), _) if self.protocol.intercepts(dir, method) => None,
            (Some(_), None) => Some(self.forward(dir, frame.raw()).await),
            (Some(_), Some(id)) => {
                if self.register(dir, &id, false, None).is_err() {
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

/// What is read of a frame the protocol may not watch: the method and id, and whether it has a result or
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

/// The byte scan that passes a frame without parsing it: it has no `"id"` (so it is neither
/// a request nor an answer), names none of the protocol's methods for its direction, and has
/// no escape that could spell either (`\u`, `\/`). JSON spells a key or a string without
/// those escapes only with its literal bytes, so such a frame, whatever it is (a
/// notification the protocol ignores, a log line, not JSON at all), would be passed on as it
/// is by the full look too. Anything else is read for its method and id ([`Engine::unwatched`]).
pub(super) struct ByteScan {
    id: Finder<'static>,
    names: Vec<Finder<'static>>,
}

impl ByteScan {
    /// The scan for a direction whose calls of `methods` the protocol may intercept; `None`
    /// when the protocol does not say which (every frame is looked at).
    pub(super) fn new(methods: Option<&'static [&'static str]>) -> Option<ByteScan> {
        Some(ByteScan {
            id: Finder::new(b"\"id\""),
            names: methods?.iter().map(|m| Finder::new(m.as_bytes())).collect(),
        })
    }

    pub(super) fn passes(&self, content: &[u8]) -> bool {
        self.first_suspect(content).is_none()
    }

    /// Where the first byte that fails the scan is in `bytes` (an `"id"` key, an escape, a
    /// method of interest). None of them spans a `\n`, so in a run of frames every frame
    /// that ends before that offset passes (see [`ByteScan::passing_run`]).
    fn first_suspect(&self, bytes: &[u8]) -> Option<usize> {
        let mut end = self.id.find(bytes).unwrap_or(bytes.len());
        if let Some(at) = memchr::memchr_iter(b'\\', &bytes[..end])
            .find(|&i| matches!(bytes.get(i + 1), Some(b'u' | b'/')))
        {
            end = at;
        }
        for name in &self.names {
            if let Some(at) = name.find(&bytes[..end]) {
                end = at;
            }
        }
        (end < bytes.len()).then_some(end)
    }

    /// How many bytes at the start of `whole` (whole frames) are frames that all pass the
    /// scan: those before the first one that fails it. One scan for the whole run instead of
    /// one per frame.
    pub(super) fn passing_run(&self, whole: &[u8]) -> usize {
        self.first_suspect(whole).map_or(whole.len(), |at| {
            memchr::memrchr(b'\n', &whole[..at]).map_or(0, |nl| nl + 1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ByteScan;

    #[test]
    fn only_a_frame_that_cannot_be_a_call_of_interest_or_an_answer_passes_unparsed() {
        let q = ByteScan::new(Some(&["tools/call"])).unwrap();
        let passes = |s: &str| q.passes(s.as_bytes());
        assert!(passes(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"a\nb"}}"#
        ));
        assert!(passes("a banner, not JSON"));
        // An id: a request or an answer, matched by id.
        assert!(!passes(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(!passes(r#"{"jsonrpc":"2.0", "id" :1,"method":"ping"}"#));
        // A method of interest, anywhere, or spelled with escapes.
        assert!(!passes(r#"{"jsonrpc":"2.0","method":"tools/call"}"#));
        assert!(!passes(r#"{"jsonrpc":"2.0","method":"tools\/call"}"#));
        assert!(!passes(r#"{"jsonrpc":"2.0","method":"tools/\u0063all"}"#));
        assert!(!passes(r#"{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}"#));
        assert!(!passes(
            r#"[{"jsonrpc":"2.0","method":"tools/call","params":{}}]"#
        ));
        // A protocol that does not list its methods: nothing passes unparsed.
        assert!(ByteScan::new(None).is_none());
    }

    #[test]
    fn a_run_ends_before_the_first_frame_the_scan_would_not_pass() {
        let q = ByteScan::new(Some(&["tools/call"])).unwrap();
        let note = r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        let run = |frames: &[&str]| {
            let whole: String = frames.iter().map(|f| format!("{f}\n")).collect();
            let n = q.passing_run(whole.as_bytes());
            whole[..n].matches('\n').count()
        };
        assert_eq!(run(&[note, note, note]), 3);
        assert_eq!(run(&[note, r#"{"id":1,"result":{}}"#, note]), 1);
        assert_eq!(run(&[r#"{"method":"tools/call"}"#, note]), 0);
        assert_eq!(run(&[note, note, r#"{"method":"tools\/call"}"#]), 2);
        assert_eq!(run(&[note, "not JSON", "", r#"{"\u0069d":1}"#]), 3);
    }

    /// A frame the byte scan passes unparsed must be one the protocol would pass anyway: every
    /// method whose call is anything but `Pass` is in the protocol's list.
    #[test]
    fn every_method_a_protocol_acts_on_is_in_its_list() {
        use crate::intercept::proxy::acp::Acp;
        use crate::intercept::proxy::mcp::Mcp;
        use crate::intercept::proxy::{Direction, OnCall, Protocol};
        use serde_json::json;
        let methods = [
            "initialize",
            "tools/call",
            "tools/list",
            "ping",
            "notifications/cancelled",
            "notifications/message",
            "resources/read",
            "session/prompt",
            "session/new",
            "session/load",
            "session/cancel",
            "session/request_permission",
            "session/update",
            "fs/write_text_file",
            "fs/read_text_file",
            "terminal/create",
            "terminal/output",
            "authenticate",
            "session/set_mode",
        ];
        let params = json!({"sessionId": "s1", "cwd": "/ws", "name": "x", "arguments": {},
            "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"},
            "toolCall": {"toolCallId": "c"}, "options": [], "path": "/ws/a", "command": "ls"});
        let check = |p: &dyn Fn(Direction, &str, bool) -> OnCall,
                     listed: &dyn Fn(Direction) -> Vec<&'static str>| {
            for dir in [Direction::ToServer, Direction::ToClient] {
                for m in methods {
                    for request in [true, false] {
                        if p(dir, m, request) != OnCall::Pass {
                            assert!(
                                listed(dir).contains(&m),
                                "{m} ({dir:?}) is acted on but not listed"
                            );
                        }
                    }
                }
            }
        };
        let mcp = Mcp::new("fs", None);
        check(&|d, m, r| mcp.call(d, m, Some(&params), r), &|d| {
            mcp.methods(d).unwrap().to_vec()
        });
        let acp = Acp::new("agent", None);
        check(&|d, m, r| acp.call(d, m, Some(&params), r), &|d| {
            acp.methods(d).unwrap().to_vec()
        });
    }
}
