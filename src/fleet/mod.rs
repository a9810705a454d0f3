//! HCP (Harness Communication Protocol) over AMQP 0-9-1: a wrapped agent offered as a
//! remote skill, so a fleet of workers takes tasks from one queue on a shared broker.
//!
//! ```text
//!  caller (`ahp-wrap task submit`)            broker (RabbitMQ)             worker (`ahp-wrap worker`)
//!   ── task (persistent, reply_to, ──▶ hcp.tasks ─▶ hcp.task.<capability> ─▶ L3 gate (capability
//!      correlation id = task id)        (direct)     (durable, prefetch 1)      ceiling, policy)
//!   ◀─ events, result ─────────────── reply queue ◀─────────────────────────  run: `ahp-wrap
//!   ── abort ────────────────────────▶ hcp.abort (fanout) ─▶ each worker       [opts] -- agent`
//! ```
//!
//! Each task runs as a normal supervised run (hooks, policy, audit, guardian): the worker
//! starts `ahp-wrap [run options] --audit-log <task dir>/audit.jsonl -- <agent>` and streams
//! the records of that audit log, mapped to HCP events, to the caller. A task is acked only
//! after its result is confirmed by the broker (at-least-once delivery).
//!
//! - [`capability`]: the capability file (TOML) and its small JSON-Schema subset.
//! - [`message`]: the wire messages (task, abort, event, result) and their checks.
//! - [`safety`]: the safety gate a task passes before anything runs (HCP's layer 3, "safety and
//!   contract", between the task layer and the session layer).
//! - [`amqp`]: connecting (heartbeats, timeouts), the topology, confirmed publishing.
//! - [`events`]: audit records of a run as HCP events.
//! - [`task_run`]: one task's run: the wrapped agent, its audit tail, abort, output.
//! - [`worker`]: the worker's loop: connect, consume, reconnect with backoff.
//! - [`handle`]: one delivery: parse, gate, run with its events streamed, result, ack.
//! - [`submit`]: the caller: submit a task, print its events and result; abort a task.
//! - [`command`]: the `worker` and `task` subcommands (options, printing, exit codes).
//!
//! Owns: everything HCP. Must not touch: how a run is supervised (`run/`), decided
//! (`gate/`, `policy/`) or audited (`audit/`); it only starts runs and reads their logs.

pub mod amqp;
pub mod capability;
pub mod command;
pub(crate) mod events;
pub(crate) mod handle;
pub mod message;
pub mod safety;
pub(crate) mod submit;
pub(crate) mod task_run;
pub(crate) mod worker;

/// The direct exchange tasks are published to, routed by capability name.
pub(crate) const TASK_EXCHANGE: &str = "hcp.tasks";
/// The fanout exchange abort messages are published to; every worker hears every abort.
pub(crate) const ABORT_EXCHANGE: &str = "hcp.abort";

/// A message's body: one of the fleet's messages (a task, an abort, an event, a result), as
/// JSON.
#[allow(
    clippy::expect_used,
    reason = "the fleet's messages are plain data: their serialisation cannot fail"
)]
fn body(message: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(message).expect("a fleet message serialises")
}

/// The durable queue of a capability's tasks.
pub(crate) fn task_queue(capability: &str) -> String {
    format!("hcp.task.{capability}")
}

/// Whether `s` is a plain name: 1 to 128 letters, digits, `-`, `_`, `.`, `:`.
pub(crate) fn is_name(s: &str) -> bool {
    crate::is_plain_name(s, 128, b":")
}
