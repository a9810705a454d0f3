//! The floor's refusals the kernel reports (Linux, where the audit log can be read): each
//! one audited as the floor's block while the agent runs, all of them counted at the end.
//! [`floor::denials`](crate::floor::denials) reads and sorts the records; this is the run's side.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map};
use tokio::io::unix::AsyncFd;

use crate::audit::AuditPeer;
use crate::floor::denials::{self, Collector, Denial, Reader};
use crate::gate::{Gate, Origin};
use crate::protocol::{EventType, ToolCall};

/// How long the end of a run waits for records the kernel has yet to hand over, and for
/// the end of a domain that refused something (its record carries the kernel's count).
const TRAILING: Duration = Duration::from_millis(20);
const DOMAIN_END: Duration = Duration::from_millis(300);

/// Refusals of one run's tree, read while the agent runs.
pub(super) struct Watching {
    reader: Arc<AsyncFd<Reader>>,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
    /// Tells the task to stop between two records (never in the middle of an audit write).
    stop: tokio::sync::oneshot::Sender<()>,
    gate: Arc<Gate>,
}

struct State {
    collector: Collector,
    kept: Vec<Denial>,
    /// What was audited already (the same refusal repeated is counted, not audited again).
    audited: HashSet<(String, Option<String>)>,
}

/// What the run's end reports.
pub(super) struct Refusals {
    pub total: u64,
    pub kept: Vec<Denial>,
}

impl Watching {
    /// Starts reading for the domain the process `agent` made.
    pub(super) fn start(reader: Reader, agent: i32, gate: Arc<Gate>) -> std::io::Result<Watching> {
        let reader = Arc::new(reader.into_async()?);
        let state = Arc::new(Mutex::new(State {
            collector: Collector::new(agent),
            kept: Vec::new(),
            audited: HashSet::new(),
        }));
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = {
            let (reader, state, gate) = (reader.clone(), state.clone(), gate.clone());
            tokio::spawn(async move {
                loop {
                    let mut ready = tokio::select! {
                        _ = &mut stopped => return,
                        ready = reader.readable() => match ready {
                            Ok(r) => r,
                            Err(_) => return,
                        },
                    };
                    let new = read(reader.get_ref(), &state);
                    ready.clear_ready();
                    audit(&gate, &state, new).await;
                }
            })
        };
        Ok(Watching {
            reader,
            state,
            task,
            stop,
            gate,
        })
    }

    /// Once the tree has ended: reads what the kernel still has to hand over, audits it,
    /// and returns the count.
    pub(super) async fn finish(self) -> Refusals {
        let _ = self.stop.send(());
        let _ = self.task.await;
        let start = Instant::now();
        loop {
            let new = read(self.reader.get_ref(), &self.state);
            audit(&self.gate, &self.state, new).await;
            let awaiting = lock(&self.state).collector.awaiting_end();
            let waited = start.elapsed();
            if waited >= DOMAIN_END || (!awaiting && waited >= TRAILING) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let rest = {
            let mut st = lock(&self.state);
            let rest = st.collector.close_all();
            denials::keep(&mut st.kept, rest.clone());
            rest
        };
        audit(&self.gate, &self.state, rest).await;
        let st = lock(&self.state);
        Refusals {
            total: st.collector.total(),
            kept: st.kept.clone(),
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The records queued now, fed to the collector: the denials they complete.
fn read(reader: &Reader, state: &Mutex<State>) -> Vec<Denial> {
    let mut st = lock(state);
    let mut new = Vec::new();
    reader.read_ready(|ty, text| new.extend(st.collector.feed(ty, text)));
    denials::keep(&mut st.kept, new.clone());
    new
}

/// Each refusal not audited yet, as the floor's block of a `pre_action`.
async fn audit(gate: &Gate, state: &Mutex<State>, new: Vec<Denial>) {
    for d in new {
        let first = lock(state).audited.insert((
            d.access.clone(),
            d.path.clone().or(d.target.as_ref().map(|t| t.1.clone())),
        ));
        if !first {
            continue;
        }
        let mut arguments = json!({"access": d.access});
        if let Some(p) = &d.path {
            arguments["path"] = p.clone().into();
        }
        if let Some((pid, comm)) = &d.target {
            arguments["target"] = json!({"pid": pid, "comm": comm});
        }
        let mut context = json!({"interceptor": "floor"});
        if let Some(pid) = d.pid {
            context["process"] = json!({"pid": pid, "comm": d.comm, "exe": d.exe});
        }
        let payload = ToolCall::new(d.tool(), arguments, context).into_payload();
        let mut metadata = Map::new();
        metadata.insert("interceptor".into(), "floor".into());
        let event = gate.event(EventType::PreAction, payload, metadata);
        let origin = Origin {
            framework_session: None,
            peer: d.pid.map(|pid| AuditPeer {
                pid,
                descends_from_agent: true,
            }),
        };
        let reason = format!("refused by the kernel (the floor): {}", d.line());
        gate.refused(&event, reason, origin).await;
    }
}
