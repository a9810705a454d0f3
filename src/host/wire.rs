//! One client connection: Agent Host Protocol v1 JSON-RPC (initialize, authenticate,
//! subscribe, unsubscribe, listSessions, ping, dispatchAction), and which pushed messages
//! it may see.
//!
//! Authentication is the spec's: the client sends `authenticate` with a bearer token for
//! the host's protected resource; `subscribe` and `listSessions` before that are refused
//! with `AuthRequired` (-32007) and the resource's metadata. The result says what the token
//! allows in its `_meta` (`token`, `scopes`), so that a client shows no buttons it may not
//! use.
//!
//! `dispatchAction` is a notification, as the spec has it: a refused one is echoed to its
//! client alone as an `action` envelope with its `origin` and a `rejectionReason` (the
//! spec's write-ahead reconciliation); an accepted answer's echo is the
//! `chat/toolCallConfirmed` every subscriber sees, with the same `origin`.

use std::collections::HashMap;
use std::sync::Arc;

use ahp_types::actions::StateAction;
use ahp_types::commands::{
    AuthenticateParams, DispatchActionParams, InitializeParams, SubscribeParams,
};
use ahp_types::errors::ahp_error_codes::{
    AUTH_REQUIRED, NOT_FOUND, PERMISSION_DENIED, UNSUPPORTED_PROTOCOL_VERSION,
};
use serde_json::{json, Value};

use super::{Host, Outgoing, Reply, Token};
use crate::jsonrpc;

/// The protected resource clients authenticate for.
pub(crate) const RESOURCE: &str = "ahp-wrap:approvals";

/// One connected client.
pub(crate) struct Connection {
    host: Arc<Host>,
    /// Where it connects from (for the audit log).
    peer: String,
    /// The `clientId` it gave in `initialize` (the `origin` of what it dispatches).
    client_id: String,
    token: Option<Token>,
    /// Subscribed channels, and the sequence number of the snapshot each started from.
    subscribed: HashMap<String, u64>,
}

type RpcFailure = (i64, String, Option<Value>);

/// A dispatched action that was not taken: the error for a client that sent it as a
/// request, the `action` echo with its `rejectionReason` for one that followed the spec.
struct Refusal {
    failure: RpcFailure,
    echo: Option<String>,
}

impl Connection {
    /// A client from `peer` (its address, for the audit log): not yet authenticated,
    /// subscribed to nothing.
    pub(crate) fn new(host: Arc<Host>, peer: String) -> Connection {
        Connection {
            host,
            peer,
            client_id: String::new(),
            token: None,
            subscribed: HashMap::new(),
        }
    }

    /// Handles one message; returns what to send back, if anything (the response to a
    /// request, the echo of a refused `dispatchAction`).
    pub(crate) fn handle(&mut self, text: &str) -> Option<String> {
        let jsonrpc::Incoming { id, method, params } = match jsonrpc::incoming(text) {
            Ok(m) => m,
            Err(e) => return Some(e.answer()),
        };
        let result = match method.as_str() {
            "initialize" => self.initialize(params),
            "ping" => Ok(json!({})),
            "authenticate" => self.authenticate(params),
            "subscribe" => self.subscribe(params),
            "listSessions" => self.authed().map(|t| json!({"items": self.host.list(t)})),
            "unsubscribe" => {
                if let Some(c) = params.get("channel").and_then(Value::as_str) {
                    self.subscribed.remove(c);
                }
                Ok(Value::Null)
            }
            "dispatchAction" => match self.dispatch(params) {
                Ok(v) => Ok(v),
                Err(refused) if id.is_none() => return refused.echo,
                Err(refused) => Err(refused.failure),
            },
            "" => Err((-32600, "Invalid Request: no method".into(), None)),
            other => Err((-32601, format!("Method not found: {other}"), None)),
        };
        let id = id?;
        Some(match result {
            Ok(r) => jsonrpc::response(&id, &r),
            Err((code, message, None)) => jsonrpc::error_response(&id, code, &message),
            Err((code, message, Some(data))) => json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": code, "message": message, "data": data}})
            .to_string(),
        })
    }

    /// A pushed message, if this client subscribed to its channel after it was taken and
    /// its token may see the session.
    pub(crate) fn forward(&self, out: &Outgoing) -> Option<Arc<str>> {
        let token = self.token.as_ref()?;
        let from = *self.subscribed.get(&out.channel)?;
        (out.seq > from && token.sees(&out.cwd)).then(|| out.text.clone())
    }

    /// The version both speak. Snapshots come with `subscribe`, after `authenticate`.
    fn initialize(&mut self, params: Value) -> Result<Value, RpcFailure> {
        let p: InitializeParams = serde_json::from_value(params)
            .map_err(|e| (-32602, format!("Invalid params: {e}"), None))?;
        self.client_id = p.client_id.clone();
        let version = ahp_types::negotiate_protocol_version(&p.protocol_versions)
            .map_err(|e| (-32602, e, None))?
            .ok_or_else(|| {
                let data = json!({"supportedVersions": ahp_types::SUPPORTED_PROTOCOL_VERSIONS});
                let offered = p.protocol_versions.join(", ");
                let message = format!("Unsupported protocol version: {offered}");
                (UNSUPPORTED_PROTOCOL_VERSION as i64, message, Some(data))
            })?;
        Ok(json!({
            "protocolVersion": version,
            "serverSeq": 0,
            "serverInfo": {"name": "ahp-wrap", "version": env!("CARGO_PKG_VERSION")},
            "snapshots": [],
        }))
    }

    fn resource() -> Value {
        json!({
            "resource": RESOURCE,
            "resource_name": "ahp-wrap approvals",
            "bearer_methods_supported": ["authenticate"],
            "scopes_supported": ["approve", "view"],
            "required": true,
        })
    }

    fn authed(&self) -> Result<&Token, RpcFailure> {
        self.token.as_ref().ok_or_else(|| {
            let data = json!({"resources": [Self::resource()]});
            (
                AUTH_REQUIRED as i64,
                "Authentication required: send authenticate with a bearer token".into(),
                Some(data),
            )
        })
    }

    fn authenticate(&mut self, params: Value) -> Result<Value, RpcFailure> {
        let p: AuthenticateParams = serde_json::from_value(params)
            .map_err(|e| (-32602, format!("Invalid params: {e}"), None))?;
        match self.host.tokens.check(&p.token) {
            Some(t) => {
                tracing::info!(
                    "approvals host: {} authenticated from {}",
                    t.name,
                    self.peer
                );
                self.token = Some(t.clone());
                self.subscribed.clear();
                // AuthenticateResult is `{}`; what the token allows is the host's own
                // extension, in the `_meta` slot receivers ignore when they do not know it.
                Ok(json!({"_meta": {"token": t.name, "scopes": t.scope.names()}}))
            }
            None => {
                tracing::warn!("approvals host: a wrong token from {}", self.peer);
                self.token = None;
                self.subscribed.clear();
                let data = json!({"resources": [Self::resource()]});
                Err((
                    AUTH_REQUIRED as i64,
                    "Authentication failed: unknown token".into(),
                    Some(data),
                ))
            }
        }
    }

    fn subscribe(&mut self, params: Value) -> Result<Value, RpcFailure> {
        let p: SubscribeParams = serde_json::from_value(params)
            .map_err(|e| (-32602, format!("Invalid params: {e}"), None))?;
        let token = self.authed()?;
        let Some((state, seq)) = self.host.snapshot(&p.channel, token) else {
            return Err((
                NOT_FOUND as i64,
                format!("No such channel: {}", p.channel),
                None,
            ));
        };
        self.subscribed.insert(p.channel.clone(), seq);
        Ok(json!({"snapshot": {"resource": p.channel, "state": state, "fromSeq": seq}}))
    }

    /// `dispatchAction`: the one action a client may dispatch here is its answer to a
    /// pending tool confirmation.
    fn dispatch(&mut self, params: Value) -> Result<Value, Refusal> {
        let p: DispatchActionParams = serde_json::from_value(params).map_err(|e| Refusal {
            failure: (-32602, format!("Invalid params: {e}"), None),
            echo: None,
        })?;
        let origin = json!({"clientId": self.client_id, "clientSeq": p.client_seq});
        // A refusal changes nothing, so its echo takes no new sequence number.
        let refuse = |code: i32, why: String| {
            let echo = json!({"jsonrpc": "2.0", "method": "action", "params": {
                "channel": p.channel, "action": p.action, "serverSeq": self.host.seq(),
                "origin": origin, "rejectionReason": why}});
            Refusal {
                failure: (code as i64, why, None),
                echo: Some(echo.to_string()),
            }
        };
        let token = match self.authed() {
            Ok(t) => t,
            Err((code, why, _)) => return Err(refuse(code as i32, why)),
        };
        let StateAction::ChatToolCallConfirmed(a) = &p.action else {
            let why = "Only chat/toolCallConfirmed may be dispatched here".into();
            return Err(refuse(PERMISSION_DENIED, why));
        };
        let message = a.reason_message.as_ref().map(|m| m.as_text().to_owned());
        let reply = Reply {
            chat: &p.channel,
            call: &a.tool_call_id,
            approved: a.approved,
            message,
            origin: origin.clone(),
        };
        let answered = self.host.answer(token, &self.peer, reply);
        match answered {
            Ok(()) => {
                tracing::info!(
                    "approvals host: {} {} {} from {}",
                    token.name,
                    if a.approved { "approved" } else { "denied" },
                    a.tool_call_id,
                    self.peer
                );
                Ok(Value::Null)
            }
            Err(why) => {
                tracing::warn!(
                    "approvals host: refused an answer from {}: {why}",
                    self.peer
                );
                Err(refuse(PERMISSION_DENIED, why))
            }
        }
    }
}
