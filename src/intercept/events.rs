//! Events from the wrappers a run starts inside its own agent (`--wrap-mcp`: each of the
//! agent's MCP servers behind `ahp-wrap mcp --via-run`): an `event` request carries one
//! AHP event of that inner wrapper, decided (when blocking) or recorded by this run's gate,
//! so that this run's harness or policy decides for all of them and one audit log holds
//! everything.
//!
//! Owns: the `event` service, and the interceptor that asks the framework to put the
//! agent's MCP servers behind inner wrappers. Must not touch: the framework's configuration
//! formats (each shim's `wrap_mcp`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Interceptor, PrepareError, Router};
use crate::control::{CallerReply, Request};
use crate::frameworks::{AgentCommand, Framework, RunContext};
use crate::gate::{Gate, PARENT_SCOPE};
use crate::protocol::Event;

/// Answers `event` requests for one run.
pub(crate) struct EventService {
    gate: Arc<Gate>,
    answered: AtomicU64,
}

impl EventService {
    /// Served by `gate`, which decides the blocking events and records the others.
    pub(crate) fn new(gate: Arc<Gate>) -> EventService {
        EventService {
            gate,
            answered: AtomicU64::new(0),
        }
    }

    /// Answers one `event` request: stdout is the decision (`{}` for a notification).
    pub(crate) async fn handle(&self, request: Request) -> CallerReply {
        if request.scope != PARENT_SCOPE {
            return refused(&format!("no events are served for {:?}", request.scope));
        }
        let event: Event = match serde_json::from_slice(&request.payload) {
            Ok(e) => e,
            Err(e) => return refused(&format!("the event is not an AHP event ({e})")),
        };
        if event.event_type.to_string() != request.name {
            return refused("the event's type is not the one its request names");
        }
        let origin = super::origin(request.peer, None);
        if !event.event_type.is_blocking() {
            self.gate.notify(event, origin).await;
            return answered(b"{}".to_vec());
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        let decision = self.gate.decide(&event, false, origin).await;
        answered(decision.verdict.into_json().to_string().into_bytes())
    }
}

fn answered(stdout: Vec<u8>) -> CallerReply {
    CallerReply {
        stdout,
        stderr: Vec::new(),
        exit_code: 0,
    }
}

fn refused(why: &str) -> CallerReply {
    CallerReply {
        stdout: Vec::new(),
        stderr: format!("ahp-wrap: {why}\n").into_bytes(),
        exit_code: 126,
    }
}

/// `--wrap-mcp`: the framework puts the agent's MCP servers behind inner wrappers, whose
/// events this run serves.
pub(crate) struct WrappedMcp {
    framework: &'static dyn Framework,
    service: Arc<EventService>,
}

impl WrappedMcp {
    /// `framework` rewrites where the agent finds its MCP servers; their inner wrappers'
    /// events go to `gate`.
    pub(crate) fn new(framework: &'static dyn Framework, gate: Arc<Gate>) -> WrappedMcp {
        WrappedMcp {
            framework,
            service: Arc::new(EventService::new(gate)),
        }
    }
}

impl Interceptor for WrappedMcp {
    fn prepare(&mut self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), PrepareError> {
        let wrapper = std::env::current_exe().map_err(PrepareError::NoSelf)?;
        Ok(self.framework.wrap_mcp(run, cmd, &wrapper)?)
    }

    fn serve(&self, router: &mut Router) {
        router.events = Some(self.service.clone());
    }

    fn answered(&self) -> u64 {
        self.service.answered.load(Ordering::Relaxed)
    }
}
