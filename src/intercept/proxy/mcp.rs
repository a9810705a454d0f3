//! MCP over the stream proxy (agent ⇄ ahp-wrap ⇄ MCP server): `tools/call` is a
//! `pre_action` held for the gate, its answer a `post_action`; everything else passes.
//!
//! Owns: the mapping of MCP calls to AHP payloads and of verdicts back to MCP. Must not
//! touch: framing, ordering or I/O (the engine), the policy (it sees `tool_name`
//! `mcp__<server>__<tool>`, as agents name MCP tools, so the same rules apply).
//!
//! Versions: 2025-11-25 (and earlier) negotiate a version with `initialize`; the stateless
//! 2026-07-28 draft has no `initialize` and names its version in each request's
//! `_meta["io.modelcontextprotocol/protocolVersion"]`. Both send `tools/call` the same way.
//! In the draft a server may answer `resultType: "input_required"` (the tool has not run);
//! that answer passes through without a post_action, and the client's retry (with
//! `inputResponses`/`requestState`) is a new `tools/call`, held and decided again. Anything
//! else (resources, prompts, sampling, elicitation, tasks, unknown methods) passes through.

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::{
    post_action_result, Direction, Disposition, GateEvent, HeldCall, OnCall, Protocol, Resolution,
    Tracked,
};
use crate::jsonrpc::RpcError;
use crate::protocol::{unapplicable_modify, updated_input, EventType, Final, ToolCall};

const TOOLS_CALL: &str = "tools/call";
const INITIALIZE: &str = "initialize";
/// Where a 2026-07-28 request names its protocol version.
const VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";

/// The MCP mapping for one server.
pub struct Mcp {
    server: String,
    cwd: Option<PathBuf>,
    /// The version `initialize` negotiated, once answered.
    negotiated: Mutex<Option<String>>,
}

impl Mcp {
    /// `server` names the server in tool names (`mcp__<server>__<tool>`) and messages, as
    /// the agent's MCP configuration names it; `cwd` is the directory the server runs in
    /// (the policy resolves relative paths against it).
    pub fn new(server: impl Into<String>, cwd: Option<PathBuf>) -> Mcp {
        Mcp {
            server: server.into(),
            cwd,
            negotiated: Mutex::new(None),
        }
    }

    /// The `pre_action` payload of a `tools/call` with these params.
    pub(crate) fn pre_action(&self, params: Option<&Value>) -> Value {
        let tool = params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let arguments = params
            .and_then(|p| p.get("arguments"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let meta_version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(VERSION_META))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let version = meta_version.or_else(|| self.negotiated.lock().ok()?.clone());
        let round_trip = params
            .is_some_and(|p| p.get("inputResponses").is_some() || p.get("requestState").is_some());
        let mut context = Map::new();
        if let Some(cwd) = &self.cwd {
            context.insert("working_directory".into(), cwd.display().to_string().into());
        }
        let mcp = json!({
            "server": self.server,
            "tool": tool,
            "protocol_version": version,
            "round_trip": round_trip,
        });
        let name = format!("mcp__{}__{tool}", self.server);
        ToolCall::new(name, arguments, Value::Object(context))
            .with("mcp", mcp)
            .into_payload()
    }

    fn metadata(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("framework".into(), "mcp".into());
        m.insert("interceptor".into(), "stream-proxy".into());
        m.insert("mcp_server".into(), self.server.clone().into());
        m
    }

    /// A tool result the model reads: MCP reports a refused call this way, not as a
    /// protocol error, so that the model sees why.
    pub(crate) fn tool_error(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}], "isError": true})
    }

    /// A verdict that lets the call through, with the arguments it should run with.
    fn forward(&self, held: &HeldCall, params: Option<&Value>, args: Option<Value>) -> Resolution {
        let mut payload = held.event.payload.clone();
        let outcome = match args {
            None => Disposition::Forward,
            Some(args) => {
                let mut p = params
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                p.insert("arguments".into(), args.clone());
                payload["arguments"] = args;
                Disposition::Rewrite(Value::Object(p))
            }
        };
        Resolution {
            outcome,
            watch: Some(Tracked {
                method: TOOLS_CALL.into(),
                note: payload,
            }),
            notices: Vec::new(),
        }
    }

    fn post_action(&self, mut payload: Value, outcome: &Result<Value, RpcError>) -> GateEvent {
        let is_error = outcome
            .as_ref()
            .is_ok_and(|r| r.get("isError") == Some(&Value::Bool(true)));
        payload["result"] = post_action_result(outcome, is_error);
        GateEvent {
            event_type: EventType::PostAction,
            payload,
            metadata: self.metadata(),
        }
    }
}

/// The answer never forwarded for a call the gate did not let through.
fn refused(text: String) -> Resolution {
    Resolution {
        outcome: Disposition::Answer(Mcp::tool_error(&text)),
        watch: None,
        notices: Vec::new(),
    }
}

impl Protocol for Mcp {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn server_label(&self) -> String {
        format!("the MCP server {:?}", self.server)
    }

    fn methods(&self, dir: Direction) -> Option<&'static [&'static str]> {
        Some(match dir {
            Direction::ToServer => &[TOOLS_CALL, INITIALIZE],
            Direction::ToClient => &[],
        })
    }

    fn call(&self, dir: Direction, method: &str, params: Option<&Value>, request: bool) -> OnCall {
        match (dir, method) {
            // A tools/call without an id (not valid MCP) is held too: a lenient server
            // might run it, and only a decision may let it through.
            (Direction::ToServer, TOOLS_CALL) => OnCall::Hold(HeldCall::new(GateEvent {
                event_type: EventType::PreAction,
                payload: self.pre_action(params),
                metadata: self.metadata(),
            })),
            (Direction::ToServer, INITIALIZE) if request => OnCall::Watch(Tracked {
                method: INITIALIZE.into(),
                note: Value::Null,
            }),
            _ => OnCall::Pass,
        }
    }

    fn resolve(
        &self,
        _dir: Direction,
        _method: &str,
        params: Option<&Value>,
        held: &HeldCall,
        verdict: &Final,
    ) -> Resolution {
        if let Some(modified) = verdict.replacement() {
            return match updated_input(modified) {
                Ok(args) => self.forward(held, params, Some(args)),
                Err(why) => refused(unapplicable_modify(&why)),
            };
        }
        match verdict {
            Final::Allow { .. } => self.forward(held, params, None),
            Final::Block { reason } => refused(reason.clone()),
            // MCP has no native ask: the gate puts an escalation to a person itself, and
            // one that still comes back was not answered.
            Final::Ask { reason, .. } => refused(format!(
                "ahp-wrap blocked this because it was escalated to a person ({reason}) and no \
                 person answered"
            )),
            // Its replacement was taken above.
            Final::Modify { .. } => refused(
                "ahp-wrap blocked this because the harness did not decide in time".to_owned(),
            ),
        }
    }

    fn answered(
        &self,
        _dir: Direction,
        tracked: Tracked,
        outcome: &Result<Value, RpcError>,
    ) -> Option<GateEvent> {
        match tracked.method.as_str() {
            INITIALIZE => {
                let version = outcome.as_ref().ok()?.get("protocolVersion")?.as_str()?;
                if let Ok(mut v) = self.negotiated.lock() {
                    *v = Some(version.to_owned());
                }
                None
            }
            TOOLS_CALL => {
                let pending = outcome
                    .as_ref()
                    .is_ok_and(|r| r.get("resultType") == Some(&json!("input_required")));
                (!pending).then(|| self.post_action(tracked.note, outcome))
            }
            _ => None,
        }
    }
}
