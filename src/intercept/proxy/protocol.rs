//! What a JSON-RPC protocol tells the proxy engine: which calls are held for the gate, what
//! a verdict becomes on the wire, and which answers are reported. Owns no I/O and no state
//! of the engine; a protocol keeps its own (e.g. the version MCP negotiated).

use serde_json::Value;

use super::{Direction, GateEvent};
use crate::jsonrpc::RpcError;
use crate::protocol::Final;

/// The JSON-RPC error code of a request cancelled before it was answered (LSP's
/// `RequestCancelled`, which ACP uses too).
pub(crate) const REQUEST_CANCELLED: i64 = -32800;

/// What a protocol says about one call (a request or a notification) travelling one way.
#[derive(Debug, Clone, PartialEq)]
pub enum OnCall {
    /// Pass it on untouched.
    Pass,
    /// Pass it on untouched, then tell the gate (no decision).
    Notify(GateEvent),
    /// Pass it on untouched, and keep this to see its answer (requests only; for a
    /// notification it is the same as [`OnCall::Pass`]).
    Watch(Tracked),
    /// Hold it, and everything behind it in its direction, until the gate has decided.
    Hold(HeldCall),
    /// Pass it on untouched, after cutting short every decision still held in this scope
    /// (see [`HeldCall::scope`]): each of those calls gets [`Protocol::cancelled`] instead.
    Cancel(String),
}

/// A call held for the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldCall {
    /// What the gate is asked.
    pub event: GateEvent,
    /// The protocol has its own way to ask a person (ACP's permission request goes on to
    /// the editor): the gate is asked with [`super::Decide::decide_native`], and an
    /// `escalate` may come back.
    pub native_ask: bool,
    /// What a peer may cancel this call by ([`OnCall::Cancel`]), e.g. its ACP session.
    /// While the decision is pending, a cancellation of this scope ends the wait.
    pub scope: Option<String>,
}

impl HeldCall {
    /// A call the gate decides alone (an `escalate` is resolved before it comes back).
    pub(crate) fn new(event: GateEvent) -> HeldCall {
        HeldCall {
            event,
            native_ask: false,
            scope: None,
        }
    }
}

/// A forwarded request whose answer the protocol wants to see.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracked {
    /// The request's JSON-RPC method, which says how to read its answer.
    pub method: String,
    /// Whatever the protocol needs when the answer comes (e.g. the pre_action payload).
    pub note: Value,
}

/// What a held call becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    /// Forward the original bytes.
    Forward,
    /// Forward it with these `params` instead (the rest of the message unchanged).
    Rewrite(Value),
    /// Never forwarded: the sender gets this `result` from us (a notification is dropped).
    Answer(Value),
    /// Never forwarded: the sender gets this JSON-RPC error (a notification is dropped).
    Refuse {
        /// The error's `code` (e.g. `REQUEST_CANCELLED`).
        code: i64,
        /// The error's `message`, which names the cause.
        message: String,
    },
}

/// A notification the proxy writes on its own before a held call's outcome (e.g. ACP: the
/// reason of a refusal, shown to the editor).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// Which way it travels.
    pub to: Direction,
    /// The notification's JSON-RPC method (e.g. ACP's `session/update`).
    pub method: String,
    /// The notification's `params`.
    pub params: Value,
}

/// A verdict applied: what happens to the call, and what to keep to see its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// What happens to the held call.
    pub outcome: Disposition,
    /// The request to watch for its answer, when forwarded (e.g. an allowed MCP
    /// `tools/call`, whose answer becomes a `post_action`); `None`: nothing to watch.
    pub watch: Option<Tracked>,
    /// Written, in order, before the outcome.
    pub notices: Vec<Notice>,
}

/// One JSON-RPC protocol's view of the frames (MCP, ACP).
pub trait Protocol: Send + Sync + 'static {
    /// Who the server is, for messages: "the MCP server filesystem".
    fn server_label(&self) -> String;

    /// The protocol's short name, for metrics: `mcp`, `acp`.
    fn name(&self) -> &'static str;

    /// Every method whose calls travelling `dir` the protocol may hold, watch, notify or
    /// cancel by (anything [`Protocol::call`] may answer with other than [`OnCall::Pass`]).
    /// `None`, the default, means "any": every frame takes the full look. With a list, a
    /// frame that names none of them and has no id is passed on after a byte scan alone.
    fn methods(&self, dir: Direction) -> Option<&'static [&'static str]> {
        let _ = dir;
        None
    }

    /// Whether a call of `method` travelling `dir` may be held or watched (see
    /// [`Protocol::methods`]). `false` lets the engine pass such calls on after a look at
    /// look (method and id only).
    fn intercepts(&self, dir: Direction, method: &str) -> bool {
        self.methods(dir).is_none_or(|m| m.contains(&method))
    }

    /// A call travelling `dir`: `request` is false for a notification.
    fn call(&self, dir: Direction, method: &str, params: Option<&Value>, request: bool) -> OnCall;

    /// The gate's verdict on a held call (the same arguments as [`Protocol::call`]).
    fn resolve(
        &self,
        dir: Direction,
        method: &str,
        params: Option<&Value>,
        held: &HeldCall,
        verdict: &Final,
    ) -> Resolution;

    /// What a held call becomes when its scope was cancelled before its decision (the
    /// same arguments as [`Protocol::resolve`]). By default the sender gets a JSON-RPC
    /// error ([`REQUEST_CANCELLED`]) and nothing is forwarded.
    fn cancelled(
        &self,
        dir: Direction,
        method: &str,
        params: Option<&Value>,
        held: &HeldCall,
    ) -> Disposition {
        let _ = (dir, params, held);
        Disposition::Refuse {
            code: REQUEST_CANCELLED,
            message: format!("ahp-wrap: {method} was cancelled before it was decided"),
        }
    }

    /// The answer to a watched request that travelled `dir`; an event to notify, if any.
    fn answered(
        &self,
        dir: Direction,
        tracked: Tracked,
        outcome: &Result<Value, RpcError>,
    ) -> Option<GateEvent>;
}

/// The `result` of a `post_action`: how a forwarded call was answered. `failed` says whether
/// a JSON-RPC result still reports a failed call (an MCP tool's `isError`).
pub(crate) fn post_action_result(outcome: &Result<Value, RpcError>, failed: bool) -> Value {
    match outcome {
        Ok(result) => serde_json::json!({
            "status": if failed { "error" } else { "success" },
            "output": result,
        }),
        Err(e) => serde_json::json!({
            "status": "error",
            "error": {"code": e.code, "message": e.message},
        }),
    }
}
