//! The JSON-RPC 2.0 envelope as AHP uses it, over [`crate::jsonrpc`]: our ids are strings,
//! a harness answering with any other id breaks the protocol, and its replies are parsed
//! strictly (a duplicate key is malformed).

use serde_json::Value;

pub use crate::jsonrpc::RpcError;
use crate::jsonrpc::{self as rpc, Id, Message, MessageError};

/// A request (expects an answer with the same string id).
pub fn request(id: &str, method: &str, params: &Value) -> String {
    rpc::request(id, method, params)
}

/// A notification (no id, no answer).
pub fn notification(method: &str, params: &Value) -> String {
    rpc::notification(method, params)
}

/// One message received from a harness, classified.
#[derive(Debug, PartialEq)]
pub enum Inbound {
    /// A response to request `id`: its `result`, or the JSON-RPC error.
    Response {
        /// The string id of our request that this answers.
        id: String,
        /// `Ok` with the `result` member, or `Err` with the `error` object.
        outcome: Result<Value, RpcError>,
    },
    /// A request or notification from the harness to us (we serve none yet).
    Call {
        /// The method the harness called.
        method: String,
        /// The request's id (a string or a number); `None` for a notification.
        id: Option<Id>,
    },
}

/// Why a frame from the harness is not a valid JSON-RPC 2.0 message for AHP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame is not strict JSON (a duplicate key included); holds the parser's message.
    #[error("malformed JSON ({0})")]
    Json(String),
    /// Not a JSON object, or its `jsonrpc` member is missing or not `"2.0"`.
    #[error("not a JSON-RPC 2.0 message (missing or wrong \"jsonrpc\")")]
    NotJsonRpc,
    /// A response whose id is not a string, so it cannot answer one of ours; holds the id
    /// as JSON.
    #[error("a response with a non-string id {0} (AHP ids are strings)")]
    NonStringId(String),
    /// A call whose id is neither a string nor a number; holds the id as JSON.
    #[error("a call with an id that is neither a string nor a number ({0})")]
    InvalidCallId(String),
    /// A response whose `id` is missing or `null`.
    #[error("a response without an id")]
    MissingId,
    /// A response with no `result` and no non-null `error`.
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
    let is_call = v.get("method").is_some_and(Value::is_string);
    let message = rpc::classify(v).map_err(|e| match e {
        MessageError::NotJsonRpc => FrameError::NotJsonRpc,
        MessageError::InvalidId(id) if is_call => FrameError::InvalidCallId(id),
        MessageError::InvalidId(id) => FrameError::NonStringId(id),
        MessageError::MissingId => FrameError::MissingId,
        MessageError::NeitherResultNorError => FrameError::NeitherResultNorError,
        MessageError::BothResultAndError => FrameError::BothResultAndError,
    })?;
    Ok(match message {
        Message::Request { id, method, .. } => Inbound::Call {
            method,
            id: Some(id),
        },
        Message::Notification { method, .. } => Inbound::Call { method, id: None },
        Message::Response {
            id: Id::Str(id),
            outcome,
        } => Inbound::Response { id, outcome },
        Message::Response { id: Id::Num(n), .. } => {
            return Err(FrameError::NonStringId(n.to_string()))
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
