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
//!                            └──── control socket (abstract, per-run token, peer pid/uid) ◀┘
//!                                  audit log (append-only JSONL)
//! ```
//!
//! The workspace's layers beneath this crate are crates of their own, re-exported here under
//! the module names the rest of the code uses: `ahp-wrap-wire` ([`jsonrpc`], [`protocol`]),
//! `ahp-wrap-floor` (the floor's data, re-exported in [`floor`]; [`rundir`], [`statefile`],
//! [`exit`], [`beneath`]), `ahp-wrap-confine` ([`child`], [`floor`], [`vfork`], [`tty`];
//! the only crate allowed `unsafe`, which sees the process tree of `ahp-wrap-process` as
//! `child::tree`, `child::procfs`…) and `ahp-wrap-policy` ([`policy`]). See
//! docs/architecture.md.
//!
//! - [`cli`], [`config`]: the command line, then a validated configuration.
//! - [`run`]: one wrapped run, as phases (prepare, spawn, supervise, finish), and its private
//!   run directory; [`report`]: what is said at its end; [`exit`]: every exit code.
//! - [`child`]: spawning the agent, process groups, signals, the guardian, the whole process
//!   tree (subreaper), exit codes.
//! - [`jsonrpc`]: JSON-RPC 2.0 messages (string or number ids) and the one bounded
//!   newline codec every line reader uses.
//! - [`protocol`]: AHP 2.4 wire types, AHP's string-id rule and strict decision parsing.
//! - [`transport`]: stdio, Unix socket, HTTP and WebSocket links to a harness.
//! - [`client`]: the AHP client (handshake, pipelining, deadlines, batching, reconnects).
//! - [`gate`]: the one place an event becomes an enforced [`gate::Decision`] (harness or
//!   embedded policy, defer, escalate, fail mode, durable audit before enforcement).
//! - [`intercept`]: the ways a run reaches into the agent (its hook system, stream proxies,
//!   PATH shims, the floor's egress proxy), each adding to the agent's command and feeding
//!   the gate.
//! - [`control`]: the control socket: request kinds, the parent's server, and the one
//!   blocking client every process calling in from the agent uses.
//! - [`frameworks`]: one shim per agent framework (injection, mapping, rendering); each
//!   shim's code, samples and README live in `shims/<name>/` (see `shims/README.md`), and a
//!   shim sees only the adapter API, [`frameworks::adapter`] (enforced by a test).
//! - [`floor`]: the kernel's confinement of the agent's whole process tree (Landlock, a user,
//!   mount and network namespace, a connect filter), configured by the policy's `[floor]`
//!   section.
//! - [`policy`]: the embedded default harness.
//! - [`audit`]: the audit log.
//! - [`checkpoint`]: the workspace kept before each tool call that may write, in a
//!   content-addressed store (`ahp-wrap undo` and `ahp-wrap changes` read it back).
//! - [`telemetry`]: Prometheus metrics (`/metrics`) and OpenTelemetry spans over OTLP/HTTP,
//!   told what the audit log recorded once it is durable.
//! - [`fleet`]: HCP over AMQP (RabbitMQ): `ahp-wrap worker` takes a capability's tasks from
//!   a queue and runs each as an ordinary supervised run (a child `ahp-wrap -- <agent>`),
//!   streaming its audit records as events; `ahp-wrap task submit|abort` is the caller.
//! - [`host`]: the Agent Host Protocol host: live sessions, tool calls and decisions, and
//!   pending escalations answered from the approvals page or any client.
//! - [`termlog`]: where our log goes (stderr, or a file while the agent owns the terminal).
//! - [`serve`]: `ahp-wrap serve`, the embedded policy as a standalone AHP harness.
//! - [`commands`]: the subcommands other than a run (`serve`, `policy …`, `audit …`).
//! - [`ask`]: asking a person on the controlling terminal, for `escalate`.
//! - [`report`]: the summary, notes and held-back warnings at the end of a run.
//! - [`rundir`]: the private run directory for one run's generated files.
//! - [`statefile`]: an agent's mixed state files (its bookkeeping beside instructions in one
//!   file), and the key-by-key merge of what it changed in its private copy on the floor.
//! - [`exit`]: every exit code, in one type.
//! - [`vfork`]: a function run in a new process that shares our memory until it calls
//!   `exec` (the agent's process, the namespaces' maker).

#![forbid(unsafe_code)]
#![allow(
    rustdoc::private_intra_doc_links,
    reason = "the application's documentation is read with its private items (CI builds it \
              so): a module's doc links to its private parts"
)]

// The layers beneath, each a crate of its own (docs/architecture.md), under the names the
// rest of this crate has always used.
pub use ahp_wrap_confine::{at_exit, child, floor, tty, vfork};
pub use ahp_wrap_floor::{beneath, error_chain, exit, random_hex, rundir, statefile};
pub use ahp_wrap_policy as policy;
pub use ahp_wrap_wire::{is_plain_name, jsonrpc, protocol};

pub mod ask;
pub mod audit;
pub mod checkpoint;
pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod control;
pub mod fleet;
pub mod frameworks;
pub mod gate;
pub mod host;
pub mod intercept;
pub mod report;
pub mod run;
pub mod serve;
pub mod telemetry;
pub mod termlog;
pub mod transport;
