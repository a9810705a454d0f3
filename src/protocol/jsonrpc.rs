//! The JSON-RPC 2.0 envelope as AHP uses it: string ids, requests, notifications, responses.

use serde_json::{json, Value};

/// A request (expects an answer with the same string id).
pub fn request(id: &str, method: &str, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A notification (no id, no answer).
pub fn notification(method: &str, params: &Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// One message received from a harness, classified.
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// A response to request `id`: its `result`, or the JSON-RPC error.
    Response {
        id: String,
        outcome: Result<Value, RpcError>,
    },
    /// A request or notification from the harness to us (we serve none yet).
    Call { method: String, id: Option<Value> },
}

/// A JSON-RPC error object returned by the harness.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

/// Why a frame from the harness is not a valid JSON-RPC 2.0 message for AHP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("malformed JSON ({0})")]
    Json(String),
    #[error("not a JSON-RPC 2.0 message (missing or wrong \"jsonrpc\")")]
    NotJsonRpc,
    #[error("a response with a non-string id {0} (AHP ids are strings)")]
    NonStringId(String),
    #[error("a response without an id")]
    MissingId,
    #[error("a response with neither result nor error")]
    NeitherResultNorError,
    /// JSON-RPC 2.0 forbids it, and which of the two was meant cannot be known.
    #[error("a malformed reply (the harness reply has both result and error)")]
    BothResultAndError,
}

/// Classifies one frame.
pub fn parse_inbound(frame: &str) -> Result<Inbound, FrameError> {
    // Strict: a duplicate key (`"decision"` twice) is malformed, never "the last one wins".
    let v: Value = super::strict::from_str(frame).map_err(|e| FrameError::Json(e.to_string()))?;
    let obj = v.as_object().ok_or(FrameError::NotJsonRpc)?;
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(FrameError::NotJsonRpc);
    }
    if let Some(method) = obj.get("method").and_then(Value::as_str) {
        return Ok(Inbound::Call {
            method: method.to_owned(),
            id: obj.get("id").cloned(),
        });
    }
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => return Err(FrameError::MissingId),
        Some(other) => return Err(FrameError::NonStringId(other.to_string())),
    };
    let outcome = match (obj.get("result"), obj.get("error")) {
        (Some(r), None | Some(Value::Null)) => Ok(r.clone()),
        (None | Some(Value::Null), Some(e)) if !e.is_null() => Err(RpcError {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_owned(),
        }),
        (Some(_), Some(_)) => return Err(FrameError::BothResultAndError),
        _ => return Err(FrameError::NeitherResultNorError),
    };
    Ok(Inbound::Response { id, outcome })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_frames() {
        assert_eq!(
            parse_inbound(r#"{"jsonrpc":"2.0","id":"7","result":{"decision":"allow"}}"#),
            Ok(Inbound::Response {
                id: "7".into(),
                outcome: Ok(json!({"decision":"allow"}))
            })
        );
        assert!(matches!(
            parse_inbound(r#"{"jsonrpc":"2.0","id":"7","error":{"code":-32601,"message":"nope"}}"#),
            Ok(Inbound::Response {
                outcome: Err(RpcError { code: -32601, .. }),
                ..
            })
        ));
        assert_eq!(
            parse_inbound(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
            Err(FrameError::NonStringId("7".into()))
        );
        assert!(matches!(
            parse_inbound("nonsense"),
            Err(FrameError::Json(_))
        ));
        assert_eq!(
            parse_inbound(r#"{"id":"1","result":{}}"#),
            Err(FrameError::NotJsonRpc)
        );
        assert_eq!(
            parse_inbound(r#"{"jsonrpc":"2.0","id":"1"}"#),
            Err(FrameError::NeitherResultNorError)
        );
        assert_eq!(
            parse_inbound(r#"{"jsonrpc":"2.0","id":"1","error":null}"#),
            Err(FrameError::NeitherResultNorError)
        );
        assert_eq!(
            parse_inbound(
                r#"{"jsonrpc":"2.0","id":"1","result":{"decision":"allow"},"error":{"code":1,"message":"x"}}"#
            ),
            Err(FrameError::BothResultAndError)
        );
    }
}
