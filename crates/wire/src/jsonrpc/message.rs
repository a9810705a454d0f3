//! JSON-RPC 2.0 messages as the wire allows them: ids that are strings or numbers,
//! requests, notifications, responses and error objects; building them, and classifying
//! one parsed frame.

use serde::Serialize;
use serde_json::{Number, Value};

/// A request id: JSON-RPC allows a string or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id {
    /// A string id, such as the ones AHP uses.
    Str(String),
    /// A numeric id, kept as the JSON number it was (integer or not).
    Num(Number),
}

impl Id {
    /// The id in `v`, if `v` is a string or a number.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(s) => Some(Id::Str(s.clone())),
            Value::Number(n) => Some(Id::Num(n.clone())),
            _ => None,
        }
    }

    /// The id as a JSON value (a string or a number), to echo it in an answer.
    pub fn to_value(&self) -> Value {
        match self {
            Id::Str(s) => Value::String(s.clone()),
            Id::Num(n) => Value::Number(n.clone()),
        }
    }
}

impl std::fmt::Display for Id {
    /// As JSON: `"a-1"` or `7`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Str(s) => write!(f, "{s:?}"),
            Id::Num(n) => write!(f, "{n}"),
        }
    }
}

/// An id borrowed for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum IdRef<'a> {
    /// A string id; written as a JSON string.
    Str(&'a str),
    /// A numeric id; written as the JSON number.
    Num(&'a Number),
}

impl<'a> From<&'a str> for IdRef<'a> {
    fn from(s: &'a str) -> IdRef<'a> {
        IdRef::Str(s)
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// The object's `code` (for example -32700 for a parse error); 0 when it has none.
    pub code: i64,
    /// The object's `message`; `(no message)` when it has none.
    pub message: String,
}

impl RpcError {
    /// Reads an error object leniently: a missing code is 0, a missing message says so.
    fn from_value(e: &Value) -> RpcError {
        RpcError {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .to_owned(),
        }
    }
}

/// One message, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A call that expects an answer with the same id.
    Request {
        /// The id the answer must carry.
        id: Id,
        /// The method called.
        method: String,
        /// The `params` member as sent; `None` when absent.
        params: Option<Value>,
    },
    /// A call without an id: no answer.
    Notification {
        /// The method called.
        method: String,
        /// The `params` member as sent; `None` when absent.
        params: Option<Value>,
    },
    /// The answer to request `id`: its `result`, or the error.
    Response {
        /// The id of the request this answers.
        id: Id,
        /// `Ok` with the `result` member, or `Err` with the `error` object.
        outcome: Result<Value, RpcError>,
    },
}

/// Why a parsed frame is not a JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Not a JSON object, or its `jsonrpc` member is missing or not `"2.0"`.
    #[error("not a JSON-RPC 2.0 message (missing or wrong \"jsonrpc\")")]
    NotJsonRpc,
    /// The id (as JSON) is neither a string nor a number.
    #[error("a message with an id that is neither a string nor a number ({0})")]
    InvalidId(String),
    /// A message without a `method` whose `id` is missing or `null`.
    #[error("a response without an id")]
    MissingId,
    /// A response with no `result` and no non-null `error`.
    #[error("a response with neither result nor error")]
    NeitherResultNorError,
    /// JSON-RPC 2.0 forbids it, and which of the two was meant cannot be known.
    #[error("a response with both result and error")]
    BothResultAndError,
}

/// Classifies one parsed frame: a call when it has a string `method`, else a response.
pub fn classify(v: Value) -> Result<Message, MessageError> {
    let Value::Object(mut obj) = v else {
        return Err(MessageError::NotJsonRpc);
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(MessageError::NotJsonRpc);
    }
    let id = obj.remove("id");
    if let Some(Value::String(method)) = obj.remove("method") {
        let params = obj.remove("params");
        return match id {
            None => Ok(Message::Notification { method, params }),
            Some(id) => match Id::from_value(&id) {
                Some(id) => Ok(Message::Request { id, method, params }),
                None => Err(MessageError::InvalidId(id.to_string())),
            },
        };
    }
    let id = match id {
        Some(Value::Null) | None => return Err(MessageError::MissingId),
        Some(id) => Id::from_value(&id).ok_or_else(|| MessageError::InvalidId(id.to_string()))?,
    };
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(r), None | Some(Value::Null)) => Ok(r),
        (None | Some(Value::Null), Some(e)) if !e.is_null() => Err(RpcError::from_value(&e)),
        (Some(_), Some(_)) => return Err(MessageError::BothResultAndError),
        _ => return Err(MessageError::NeitherResultNorError),
    };
    Ok(Message::Response { id, outcome })
}

/// A request, as one line of JSON (without the `\n`).
pub fn request<'a>(id: impl Into<IdRef<'a>>, method: &str, params: &Value) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        id: IdRef<'a>,
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a Value,
    }
    let out = Out {
        id: id.into(),
        jsonrpc: "2.0",
        method,
        params,
    };
    to_line(&out)
}

/// A notification, as one line of JSON.
pub fn notification(method: &str, params: &Value) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a Value,
    }
    let out = Out {
        jsonrpc: "2.0",
        method,
        params,
    };
    to_line(&out)
}

/// A success response to the request `id` (echoed as the caller sent it).
pub fn response(id: &Value, result: &Value) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        id: &'a Value,
        jsonrpc: &'static str,
        result: &'a Value,
    }
    let out = Out {
        id,
        jsonrpc: "2.0",
        result,
    };
    to_line(&out)
}

/// An error response to the request `id` (`null` when it could not be read).
pub fn error_response(id: &Value, code: i64, message: &str) -> String {
    #[derive(Serialize)]
    struct Err<'a> {
        code: i64,
        message: &'a str,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        error: Err<'a>,
        id: &'a Value,
        jsonrpc: &'static str,
    }
    let out = Out {
        error: Err { code, message },
        id,
        jsonrpc: "2.0",
    };
    to_line(&out)
}

/// One message as a line of JSON.
#[allow(
    clippy::expect_used,
    reason = "a message of JSON values, strings and numbers always serialises"
)]
fn to_line(out: &impl serde::Serialize) -> String {
    serde_json::to_string(out).expect("a JSON value always serialises")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(text: &str) -> Result<Message, MessageError> {
        classify(serde_json::from_str(text).unwrap())
    }

    #[test]
    fn ids_are_strings_or_numbers() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":7,"method":"m"}"#),
            Ok(Message::Request { id: Id::Num(_), .. })
        ));
        let Ok(Message::Response { id, outcome }) =
            parse(r#"{"jsonrpc":"2.0","id":"a","result":1}"#)
        else {
            panic!()
        };
        assert_eq!((id.to_string(), outcome), ("\"a\"".into(), Ok(json!(1))));
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":{"x":1},"result":1}"#),
            Err(MessageError::InvalidId("{\"x\":1}".into()))
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":[],"method":"m"}"#),
            Err(MessageError::InvalidId("[]".into()))
        );
    }

    #[test]
    fn classifies_calls_and_faulty_responses() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"m","params":[1]}"#),
            Ok(Message::Notification {
                method: "m".into(),
                params: Some(json!([1]))
            })
        );
        assert_eq!(parse(r#"[1]"#), Err(MessageError::NotJsonRpc));
        assert_eq!(
            parse(r#"{"jsonrpc":"1.0","id":1,"result":1}"#),
            Err(MessageError::NotJsonRpc)
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":null,"result":1}"#),
            Err(MessageError::MissingId)
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1}}"#),
            Err(MessageError::BothResultAndError)
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"error":{}}"#),
            Ok(Message::Response {
                id: Id::Num(1.into()),
                outcome: Err(RpcError {
                    code: 0,
                    message: "(no message)".into()
                })
            })
        );
    }

    #[test]
    fn builds_messages_that_classify_back() {
        let n = Number::from(3);
        for (id, want) in [
            (IdRef::Str("a-1"), json!("a-1")),
            (IdRef::Num(&n), json!(3)),
        ] {
            let text = request(id, "ahp/event", &json!({"k": "v"}));
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["id"], want);
            assert!(matches!(classify(v), Ok(Message::Request { .. })));
        }
        assert_eq!(
            notification("m", &json!({})),
            r#"{"jsonrpc":"2.0","method":"m","params":{}}"#
        );
        assert_eq!(
            response(&json!(1), &json!(null)),
            r#"{"id":1,"jsonrpc":"2.0","result":null}"#
        );
        assert_eq!(
            error_response(&Value::Null, -32700, "Parse error"),
            r#"{"error":{"code":-32700,"message":"Parse error"},"id":null,"jsonrpc":"2.0"}"#
        );
    }
}

/// A message as a server reads it, leniently: its id (`None` for a notification), method
/// (empty when there is none) and params (`null` when there are none).
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// The `id` member as sent, of any JSON type, to echo in the answer; `None` when absent.
    pub id: Option<Value>,
    /// The `method` member; empty when it is missing or not a string.
    pub method: String,
    /// The `params` member; `null` when absent.
    pub params: Value,
}

/// A message a server received that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("Parse error: {0}")]
pub struct NotJson(#[source] pub serde_json::Error);

impl NotJson {
    /// The error answer to send back (code -32700, null id).
    pub fn answer(&self) -> String {
        error_response(&Value::Null, -32700, &self.to_string())
    }
}

/// Reads one message a server received. Text that is not JSON is a [`NotJson`], which
/// gives the error answer to send back.
pub fn incoming(text: &str) -> Result<Incoming, NotJson> {
    let mut msg: Value = serde_json::from_str(text).map_err(NotJson)?;
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    Ok(Incoming {
        method: method.to_owned(),
        id: msg.get("id").cloned(),
        params: msg
            .get_mut("params")
            .map(Value::take)
            .unwrap_or(Value::Null),
    })
}
