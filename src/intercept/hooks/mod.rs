//! The hooks interceptor: the framework's shim injects this run's hooks into the agent's
//! own hook system (for this run only), the agent's hooks run the small hook executable
//! ([`relay`]), and it relays each call over the control socket to the [`service`], which
//! answers through the gate in the framework's contract.
//!
//! Owns: the control socket's server for the run, the hook executable's side, and what the
//! run says when the hooks did not run. Must not touch: a framework's contract (its shim
//! in `shims/<name>/` does that) or the decision (the gate's).

pub mod relay;
pub mod service;

use std::ffi::OsString;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::json;

use super::{Alarm, End, Interceptor, Report};
use crate::child::ChildId;
use crate::control::{
    AgentSlot, ControlServer, TakenOver, Watched, ENV_BUDGET, ENV_PARENT_PID, ENV_SOCKET, ENV_TOKEN,
};
use crate::exit::Exit;
use crate::frameworks::{AgentCommand, Framework, RunContext};
use crate::gate::Gate;
use crate::protocol::EventType;
pub use service::HookService;

/// The hooks interceptor of one run.
pub struct Hooks {
    framework: &'static dyn Framework,
    gate: Arc<Gate>,
    service: Arc<HookService>,
    /// The executable `ahp-wrap` itself, for `AHP_WRAP_BIN`.
    self_exe: PathBuf,
    server: Option<ControlServer>,
    agent: AgentSlot,
    watched: Option<Watched>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Set once the control socket was reported taken over.
    taken: Arc<std::sync::atomic::AtomicBool>,
    /// A hook the agent calls in every session once the injection works.
    expect_hook: Option<String>,
}

impl Hooks {
    pub fn new(
        framework: &'static dyn Framework,
        gate: Arc<Gate>,
        interactive: bool,
        self_exe: PathBuf,
    ) -> Hooks {
        Hooks {
            framework,
            service: Arc::new(HookService::new(gate.clone(), interactive)),
            gate,
            self_exe,
            server: None,
            agent: AgentSlot::default(),
            watched: None,
            task: None,
            taken: Default::default(),
            expect_hook: None,
        }
    }

    /// The hook service (what the run learned from hook calls).
    pub fn service(&self) -> &Arc<HookService> {
        &self.service
    }
}

impl Interceptor for Hooks {
    fn prepare(&mut self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), String> {
        let control = ControlServer::bind(&run.run_dir)
            .map_err(|e| format!("cannot listen on the control socket: {e}"))?;
        self.framework
            .prepare(run, cmd)
            .map_err(|e| e.to_string())?;
        self.expect_hook = cmd.expect_hook.clone();
        let env =
            |k: &str, v: &dyn AsRef<std::ffi::OsStr>| (OsString::from(k), v.as_ref().to_owned());
        let mut ours = vec![
            env(ENV_SOCKET, &control.address),
            env(ENV_PARENT_PID, &std::process::id().to_string()),
            env(ENV_TOKEN, &control.token),
            env(ENV_BUDGET, &run.hook_budget_ms.to_string()),
            env("AHP_WRAP_FRAMEWORK", &self.framework.name()),
            env("AHP_WRAP_BIN", &self.self_exe),
            env("AHP_WRAP_HOOK_BIN", &run.self_exe),
        ];
        // Ours first: a framework's own variables come after, as the agent reads them.
        ours.append(&mut cmd.env);
        cmd.env = ours;
        self.agent = control.agent_slot();
        self.watched = control.watched();
        self.server = Some(control);
        Ok(())
    }

    fn start(&mut self, agent: ChildId, alarm: Alarm) {
        self.agent.set(agent.pid());
        let Some(server) = self.server.take() else {
            return;
        };
        let (service, gate, taken) = (self.service.clone(), self.gate.clone(), self.taken.clone());
        self.task = Some(tokio::spawn(async move {
            // Returns only when a path socket was removed or replaced (see control::endpoint).
            let lost = server.serve(service).await;
            taken.store(true, std::sync::atomic::Ordering::SeqCst);
            taken_over(&gate, &lost).await;
            let _ = alarm.send(lost.to_string());
        }));
    }

    fn finish<'a>(
        &'a mut self,
        end: &'a End<'a>,
    ) -> Pin<Box<dyn Future<Output = Report> + Send + 'a>> {
        Box::pin(async move {
            if let Some(task) = self.task.take() {
                task.abort();
            }
            let mut report = Report::default();
            let was_taken = self.taken.load(std::sync::atomic::Ordering::SeqCst);
            if let Some(Err(lost)) = self
                .watched
                .as_ref()
                .filter(|_| !was_taken)
                .map(Watched::check)
            {
                // The agent may have ended between two checks.
                taken_over(&self.gate, &lost).await;
                report.exit = Some(Exit::Wrapper);
            }
            if was_taken {
                report.exit = Some(Exit::Wrapper);
            }
            let code = report.exit.unwrap_or(end.exit).code();
            if let Some(hook) = self.expect_hook.as_deref() {
                self.unsupervised_warning(end.shown, hook, code).await;
            }
            if let Some(note) = self.resume_note() {
                report.notes.push(note);
            }
            if let Some(note) = self.no_hooks(end, code).await {
                report.notes.push(note);
                if end.require_hooks {
                    report.exit = Some(Exit::NoHooks);
                }
            }
            report
        })
    }
}

impl Hooks {
    /// Says loudly (on stderr, to the harness and in the audit) when the agent never called
    /// the hook its framework expects in every session: then the injected hooks did not run
    /// (the agent changed how it accepts them, say), and whatever it did was not supervised.
    async fn unsupervised_warning(&self, shown: &str, hook: &str, code: u8) {
        if self.service.called(hook) {
            return;
        }
        let framework = self.framework.name();
        let message = format!(
            "{shown} exited (code {code}) without ever calling ahp-wrap's {hook} hook: if it ran \
             a session, the injected hooks did not run and NOTHING it did was supervised \
             (see shims/{framework}/README.md)"
        );
        eprintln!("ahp-wrap: WARNING: {message}");
        let payload = json!({"source": "wrapper", "message": message, "expected_hook": hook});
        self.gate.say(EventType::Error, payload).await;
    }

    /// After an interactive run: how to resume the agent's session under the wrapper, when
    /// the framework says its own exit hint would resume it unsupervised.
    fn resume_note(&self) -> Option<String> {
        if !self.service.interactive() {
            return None;
        }
        let id = self.service.framework_session()?;
        self.framework.resume_hint(&id)
    }

    /// When the agent never called a hook: tells the harness and the audit log, and returns
    /// the note for the exit summary. Said for an agent whose framework injects no hooks
    /// (nothing else could have supervised it) and, with `--require-hooks`, for any.
    async fn no_hooks(&self, end: &End<'_>, code: u8) -> Option<String> {
        if self.service.any_called() || (self.framework.injects_hooks() && !end.require_hooks) {
            return None;
        }
        let mut message = format!(
            "{} never called `ahp-wrap hook` (framework {}): NOTHING it did was supervised or audited",
            end.shown,
            self.framework.name()
        );
        if end.require_hooks {
            message.push_str(&format!(
                "; exiting {} (--require-hooks) instead of the agent's {code}",
                Exit::NoHooks.code()
            ));
        } else {
            message.push_str(" (--require-hooks makes such a run fail)");
        }
        let payload = json!({"source": "wrapper", "message": message, "hooks_called": 0});
        self.gate.say(EventType::Error, payload).await;
        Some(format!("WARNING: {message}"))
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Says loudly (on stderr, to the harness and in the audit) that the control socket was
/// removed or replaced: the agent's hooks can no longer reach us, so the run must end.
async fn taken_over(gate: &Gate, taken: &TakenOver) {
    eprintln!("ahp-wrap: ERROR: {taken}");
    let payload =
        json!({"source": "wrapper", "message": taken.to_string(), "control_socket": taken.path});
    gate.say(EventType::Error, payload).await;
}
