//! The supervise phase: while the agent runs, keep its whole process tree in view, send
//! heartbeats, and end the agent when an interceptor can no longer supervise it.

use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::child::procfs::Sampler;
use crate::child::tree::{self, Tracker};
use crate::gate::Gate;
use crate::intercept::Stop;
use crate::protocol::EventType;

/// Far enough in the future to mean "never" for a heartbeat that is off.
const NEVER: Duration = Duration::from_secs(3600 * 24 * 365);

/// Waits for the agent to end. Returns its status, and the first stop an interceptor asked
/// for (its cause has been said, or is normal).
pub(super) async fn until_exit(
    child: &mut crate::child::Process,
    tree: &mut Tracker,
    gate: &Gate,
    heartbeat: Option<Duration>,
    mut alarms: mpsc::UnboundedReceiver<Stop>,
) -> (std::io::Result<std::process::ExitStatus>, Option<Stop>) {
    let pid = child.id();
    let mut tree_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + tree::TICK, tree::TICK);
    let mut sampler = Sampler::new(pid);
    let beat = heartbeat.unwrap_or(NEVER);
    let mut beats = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    let mut stopped: Option<Stop> = None;
    loop {
        tokio::select! {
            status = child.wait() => return (status, stopped),
            _ = tree_tick.tick() => tree.tick(),
            Some(stop) = alarms.recv(), if stopped.is_none() => {
                tracing::debug!("ending the agent: {}", stop.why);
                stopped = Some(stop);
                tree.end(tree::LEFTOVER_GRACE);
            }
            _ = beats.tick(), if heartbeat.is_some() => heartbeat_event(gate, &mut sampler).await,
        }
    }
}

/// One heartbeat: uptime, events so far, and the agent's CPU and memory where known.
async fn heartbeat_event(gate: &Gate, sampler: &mut Sampler) {
    let s = sampler.sample();
    let mut payload = json!({
        "uptime_ms": s.uptime_ms,
        "total_events_processed": gate.events_seen(),
        "current_state": "running",
    });
    if let Some(cpu) = s.cpu_percent {
        payload["cpu_percent"] = json!(cpu);
    }
    if let Some(mem) = s.memory_bytes {
        payload["memory_bytes"] = json!(mem);
    }
    gate.say(EventType::Heartbeat, payload).await;
}
