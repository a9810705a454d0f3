//! JSON-RPC 2.0, protocol-agnostic: messages and one bounded newline framing.
//!
//! Owns: the message types as the wire allows them ([`Id`] is a string or a number), building
//! and classifying messages (`message`), and the newline-delimited framing every line
//! reader of the crate uses — the async [`codec::LineCodec`] (harness transports, `serve`,
//! the control socket's parent side) and the blocking [`framing::read_line`] (the hook
//! executable, the audit log), which follow the same rules and share [`LineError`].
//!
//! Must not touch: AHP itself (methods, events, the rule that our ids are strings and a
//! numeric answer id is a fault: that is `protocol/`), transports, or any policy. The
//! [`framing`] file stays free of tokio: the hook executable links it.

pub mod codec;
pub mod framing;
pub(crate) mod message;

pub use codec::{Frame, LineCodec};
pub use framing::LineError;
pub use message::{
    classify, error_response, incoming, notification, request, response, Id, IdRef, Incoming,
    Message, MessageError, NotJson, RpcError,
};
