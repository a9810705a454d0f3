//! The run's control socket: bound in the prepare phase (its address and token go into the
//! agent's environment), served while the agent runs by the interceptors' [`Router`], and
//! watched: a path socket removed or replaced means callers can no longer reach us, so the
//! run ends.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::json;

use crate::control::{
    AgentSlot, ControlServer, TakenOver, Watched, ENV_BUDGET, ENV_PARENT_PID, ENV_SOCKET, ENV_TOKEN,
};
use crate::gate::Gate;
use crate::intercept::{Alarm, Router, Stop};
use crate::protocol::EventType;

/// The control socket of one run.
pub(super) struct Control {
    server: Option<ControlServer>,
    agent: AgentSlot,
    watched: Option<Watched>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Set once the socket was reported taken over.
    taken: Arc<AtomicBool>,
}

impl Control {
    /// Binds the socket in `run_dir` (an abstract one where the system has them).
    pub(super) fn bind(run_dir: &std::path::Path) -> Result<Control, String> {
        let server = ControlServer::bind(run_dir)
            .map_err(|e| format!("cannot listen on the control socket: {e}"))?;
        Ok(Control {
            agent: server.agent_slot(),
            watched: server.watched(),
            server: Some(server),
            task: None,
            taken: Arc::default(),
        })
    }

    /// The socket's address (`@name` for an abstract one).
    pub(super) fn address(&self) -> OsString {
        self.server
            .as_ref()
            .map(|s| s.address.clone())
            .unwrap_or_default()
    }

    /// Serves `listener` too (the same abstract name, bound in the agent's network
    /// namespace).
    pub(super) fn also_listen(
        &mut self,
        listener: std::os::unix::net::UnixListener,
    ) -> std::io::Result<()> {
        if let Some(server) = self.server.as_mut() {
            server.also_listen(listener)?;
        }
        Ok(())
    }

    /// What a caller from inside the agent needs: the address, our pid, the token, and how
    /// long it may wait for an answer.
    pub(super) fn env(&self, budget_ms: u64) -> Vec<(OsString, OsString)> {
        let Some(server) = &self.server else {
            return Vec::new();
        };
        let env =
            |k: &str, v: &dyn AsRef<std::ffi::OsStr>| (OsString::from(k), v.as_ref().to_owned());
        vec![
            env(ENV_SOCKET, &server.address),
            env(ENV_PARENT_PID, &std::process::id().to_string()),
            env(ENV_TOKEN, &server.token),
            env(ENV_BUDGET, &budget_ms.to_string()),
        ]
    }

    /// Serves requests with `router` once the agent runs as `agent`; raises `alarm` if the
    /// socket is taken over.
    pub(super) fn start(&mut self, agent: i32, router: Router, gate: Arc<Gate>, alarm: Alarm) {
        self.agent.set(agent);
        let Some(server) = self.server.take() else {
            return;
        };
        let taken = self.taken.clone();
        self.task = Some(tokio::spawn(async move {
            // Returns only when a path socket was removed or replaced (see control::endpoint).
            let lost = server.serve(Arc::new(router)).await;
            taken.store(true, Ordering::SeqCst);
            taken_over(&gate, &lost).await;
            let _ = alarm.send(Stop {
                why: lost.to_string(),
                failed: true,
            });
        }));
    }

    /// Stops serving, once the agent has ended. Returns whether the socket was taken over
    /// during the run (checked once more: the agent may have ended between two checks).
    pub(super) async fn finish(&mut self, gate: &Gate) -> bool {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if self.taken.load(Ordering::SeqCst) {
            return true;
        }
        match self.watched.as_ref().map(Watched::check) {
            Some(Err(lost)) => {
                taken_over(gate, &lost).await;
                true
            }
            _ => false,
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Says loudly (on stderr, to the harness and in the audit) that the control socket was
/// removed or replaced: the agent's callers can no longer reach us, so the run must end.
async fn taken_over(gate: &Gate, taken: &TakenOver) {
    eprintln!("ahp-wrap: ERROR: {taken}");
    let payload =
        json!({"source": "wrapper", "message": taken.to_string(), "control_socket": taken.path});
    gate.say(EventType::Error, payload).await;
}
