//! The hooks interceptor: the framework's shim injects this run's hooks into the agent's
//! own hook system (for this run only), the agent's hooks run the small hook executable
//! ([`relay`]), and it relays each call over the control socket to the [`service`], which
//! answers through the gate in the framework's contract.
//!
//! Owns: the control socket's server for the run, the hook executable's side, and what the
//! run says when the hooks did not run. Must not touch: a framework's contract (its shim
//! in `shims/<name>/` does that) or the decision (the gate's).

pub mod relay;
pub(crate) mod service;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::json;

use super::{End, Interceptor, PrepareError, Report, Router};
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
    /// A hook the agent calls in every session once the injection works.
    expect_hook: Option<String>,
}

impl Hooks {
    /// Injects `framework`'s hooks, whose calls `gate` decides; `interactive` when a person
    /// is at the terminal (the run may then end by saying how to resume the agent's session).
    pub(crate) fn new(
        framework: &'static dyn Framework,
        gate: Arc<Gate>,
        interactive: bool,
    ) -> Hooks {
        Hooks {
            framework,
            service: Arc::new(HookService::new(gate.clone(), interactive)),
            gate,
            expect_hook: None,
        }
    }
}

impl Interceptor for Hooks {
    fn prepare(&mut self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), PrepareError> {
        self.framework.prepare(run, cmd)?;
        self.expect_hook = cmd.expect_hook.clone();
        Ok(())
    }

    fn serve(&self, router: &mut Router) {
        router.hooks = Some(self.service.clone());
    }

    fn finish<'a>(
        &'a mut self,
        end: &'a End<'a>,
    ) -> Pin<Box<dyn Future<Output = Report> + Send + 'a>> {
        Box::pin(async move {
            let mut report = Report::default();
            let code = end.exit.code();
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
        // Without hooks of its own, commands checked through PATH shims were supervision.
        let supervised_otherwise = !self.framework.injects_hooks() && end.answered_elsewhere > 0;
        if self.service.any_called()
            || (!end.require_hooks && (self.framework.injects_hooks() || supervised_otherwise))
        {
            return None;
        }
        let mut message = match end.connections {
            0 => format!(
                "{} never called `ahp-wrap hook` (framework {}): none of its actions went \
                 through the policy or the audit log (the floor, when on, still confined it)",
                end.shown,
                self.framework.name()
            ),
            n => format!(
                "{} never called `ahp-wrap hook` (framework {}): only its tree's network \
                 connections ({n}) went through the policy and the audit log, none of its \
                 other actions (the floor, when on, still confined them)",
                end.shown,
                self.framework.name()
            ),
        };
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
