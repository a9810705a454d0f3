//! What travels between ahp-wrap's processes and its peers, with no knowledge of either end:
//! JSON-RPC 2.0 and its one bounded line codec, and the AHP 2.4 wire types.
//!
//! - [`jsonrpc`]: JSON-RPC 2.0 messages (string or number ids) and the one bounded
//!   newline codec every line reader uses.
//! - [`protocol`]: AHP 2.4 wire types, AHP's string-id rule and strict decision parsing.

#![forbid(unsafe_code)]

pub mod jsonrpc;
pub mod protocol;
