//! What travels between ahp-wrap's processes and its peers, with no knowledge of either end:
//! JSON-RPC 2.0 and its one bounded line codec, the AHP 2.4 wire types, and the control
//! socket's framing.
//!
//! - [`jsonrpc`]: JSON-RPC 2.0 messages (string or number ids) and the one bounded
//!   newline codec every line reader uses.
//! - [`protocol`]: AHP 2.4 wire types, AHP's string-id rule and strict decision parsing.
//! - [`control`]: the control socket's private framing (header lines, then raw bytes)
//!   between the wrapper and the processes that call in from inside the agent, and
//!   [`CallerReply`](control::CallerReply), what such a process prints and how it exits.

#![forbid(unsafe_code)]

pub mod control;
pub mod jsonrpc;
pub mod protocol;

/// Whether `s` is a plain name: 1 to `max` ASCII letters, digits, `-`, `_`, `.`, or bytes
/// of `extra`. Names that travel in protocol headers, queue names and file names are
/// checked with it, so that none can smuggle a separator, a path or a control byte.
pub fn is_plain_name(s: &str, max: usize, extra: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') || extra.contains(&b)
        })
}
