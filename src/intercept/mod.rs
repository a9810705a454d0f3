//! Interceptors: the ways a run reaches into an agent it did not write. Each one adds what
//! the agent needs to reach it (environment, arguments, files in the run directory), says
//! how the agent's stdio is wired, starts its own tasks once the agent runs, and reports at
//! the end. Every event an interceptor sees goes through the gate (`crate::gate`).
//!
//! - [`hooks`]: the agent's own hook system calls `ahp-wrap hook <framework> <hook>`,
//!   which relays over the control socket to the hook service.
//! - [`proxy`]: sitting in the agent's JSON-RPC stdio stream (`ahp-wrap mcp` for MCP
//!   servers, `--framework acp` for ACP agents), holding what it intercepts until the gate
//!   decides.
//! - [`events`]: the events of wrappers started inside the agent (`--wrap-mcp`).
//! - [`egress`]: the network floor's proxy, the agent's tree's only way out (each new
//!   connection a `pre_action` with tool `net`).
//! - [`pathshim`]: commands the agent runs by name, caught first on its `PATH` (for
//!   agents without hooks, and in addition to hooks where asked).
//!
//! Owns: the list and its life cycle. Must not touch: the decision (the gate's), spawning
//! or reaping the agent (`child/`, driven by `run/`), or a framework's hook contract
//! (`frameworks/`).

pub(crate) mod egress;
pub(crate) mod events;
pub mod hooks;
pub mod pathshim;
pub mod proxy;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::child::{Agent, Stdio};
use crate::control::{CallerReply, Handler, Kind, Request};
use crate::exit::Exit;
use crate::frameworks::{AgentCommand, FrameworkError, RunContext};
use crate::gate::Origin;
use hooks::HookService;

/// Why an interceptor asks the run to end the agent.
#[derive(Debug, Clone)]
pub(crate) struct Stop {
    /// Why, in words; the run logs it (at debug level) as it ends the agent.
    pub why: String,
    /// Whether supervision failed (the run then exits with the wrapper's code, 125), as
    /// opposed to a normal end of the conversation (a proxy's client hung up).
    pub failed: bool,
}

/// How an interceptor asks the run to end the agent: when it can no longer do its job
/// (whatever the agent does next would not be supervised), or when its peer is gone.
pub(crate) type Alarm = mpsc::UnboundedSender<Stop>;

/// How the agent's run ended, for the interceptors' reports.
#[derive(Debug, Clone)]
pub(crate) struct End<'a> {
    /// The agent's command as typed.
    pub shown: &'a str,
    /// The exit code so far.
    pub exit: Exit,
    /// `--require-hooks`.
    pub require_hooks: bool,
    /// Actions the run's other interceptors asked the gate about (an interceptor that saw
    /// none of its own may still have had the agent supervised by another).
    pub answered_elsewhere: u64,
    /// Connections of the agent's tree the floor's egress decided and audited.
    pub connections: u64,
}

/// What an interceptor reports when the run ends.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// For the person, repeated after the agent's screen is gone.
    pub notes: Vec<String>,
    /// The run's exit code, when the interceptor overrides it.
    pub exit: Option<Exit>,
}

/// Why an interceptor could not add itself to the agent's command: the run does not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    /// The framework could not prepare the agent's command (its hooks, or the inner
    /// wrappers of `--wrap-mcp`).
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    /// A command to shim is not a plain word (or holds a `/`); the name given.
    #[error("--intercept: {0:?} is not a command name")]
    NotACommand(String),
    /// The run's own PATH shim directory could not be made (no kept one was usable).
    #[error("cannot create the PATH shim directory {}: {cause}", dir.display())]
    ShimDir {
        /// The directory (`bin` in the run directory).
        dir: std::path::PathBuf,
        /// What failed.
        cause: std::io::Error,
    },
    /// `--wrap-mcp` needs this executable's path, for the inner wrappers; the OS did not
    /// give it.
    #[error("--wrap-mcp: cannot find ahp-wrap itself ({0})")]
    NoSelf(std::io::Error),
}

/// One way of intercepting the agent.
pub(crate) trait Interceptor: Send {
    /// Adds to the agent's command line and environment what it needs to reach this
    /// interceptor. An error stops the run before the agent starts.
    fn prepare(&mut self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), PrepareError>;

    /// How this interceptor needs the agent's stdio.
    fn stdio(&self) -> Stdio {
        Stdio::Inherit
    }

    /// Registers what answers this interceptor's requests on the control socket.
    fn serve(&self, router: &mut Router) {
        let _ = router;
    }

    /// Starts this interceptor's own tasks once the agent runs (its piped stdio, if this
    /// interceptor asked for it, is there to take).
    fn start(&mut self, agent: &mut Agent, alarm: Alarm) {
        let _ = (agent, alarm);
    }

    /// How many of the agent's actions this interceptor has asked the gate about so far.
    fn answered(&self) -> u64 {
        0
    }

    /// Stops the tasks and reports, once the agent has ended.
    fn finish<'a>(
        &'a mut self,
        end: &'a End<'a>,
    ) -> Pin<Box<dyn Future<Output = Report> + Send + 'a>> {
        let _ = end;
        Box::pin(async { Report::default() })
    }
}

/// Where a request on the control socket came from, for the audit record: the caller as
/// the kernel vouches for it, and the agent's own session id when it reported one.
pub(crate) fn origin(peer: crate::control::Peer, framework_session: Option<String>) -> Origin {
    Origin {
        framework_session,
        peer: Some(crate::audit::AuditPeer {
            pid: peer.pid,
            descends_from_agent: peer.descends_from_agent,
        }),
    }
}

/// Answers the control socket's requests by kind, with the services the interceptors
/// registered; a kind nobody serves is refused with a reason.
#[derive(Default, Clone)]
pub(crate) struct Router {
    /// Answers `hook` requests (the agent's hook system); `None` when no hook interceptor
    /// runs.
    pub hooks: Option<Arc<HookService>>,
    /// Answers `exec` requests (PATH shims); `None` when no command is shimmed.
    pub exec: Option<Arc<pathshim::ExecService>>,
    /// Answers `event` requests (the inner wrappers of `--wrap-mcp`); `None` without it.
    pub events: Option<Arc<events::EventService>>,
}

impl Handler for Router {
    async fn handle(&self, request: Request) -> CallerReply {
        match (request.kind, &self.hooks, &self.exec, &self.events) {
            (Kind::Hook, Some(hooks), ..) => hooks.handle(request).await,
            (Kind::Exec, _, Some(exec), _) => exec.handle(request).await,
            (Kind::Event, .., Some(events)) => events.handle(request).await,
            (kind, ..) => CallerReply {
                stdout: Vec::new(),
                stderr: format!(
                    "ahp-wrap: this run serves no {} requests; blocking\n",
                    kind.as_str()
                )
                .into_bytes(),
                exit_code: 126,
            },
        }
    }
}
