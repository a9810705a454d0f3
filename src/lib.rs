//! `ahp-wrap`: run any AI agent CLI under an Agent Harness Protocol (AHP) harness.
//!
//! # Layout
//!
//! ```text
//!  terminal / CI ─stdio─▶ ahp-wrap (parent) ─spawn─▶ agent CLI (child, unmodified)
//!                            ▲   │                        │ the agent's own hooks
//!                            │   │ AHP JSON-RPC 2.0       ▼
//!                            │   ▼                   `ahp-wrap hook <framework> <hook>`
//!                            │  harness: embedded policy | stdio | unix | http | ws
//!                            └──── control socket (0700 dir, per-run token, peer uid) ◀┘
//!                                  audit log (append-only JSONL)
//! ```
//!
//! - [`protocol`]: AHP 2.4 wire types and strict decision parsing.
//! - [`frameworks`]: one module per agent framework (injection, mapping, rendering).
//! - [`policy`]: the embedded default harness.
//! - [`audit`]: the audit log.

pub mod audit;
pub mod frameworks;
pub mod policy;
pub mod protocol;
