//! One wrapped run, start to finish, as phases: **prepare** (the gate: harness, audit log;
//! the run directory; each interceptor's additions to the agent's command), **spawn**,
//! **supervise** (the agent's tree, heartbeats, interceptors' alarms) and **finish** (end
//! events, interceptors' reports, the summary). The run's resources are held by one value
//! whose `Drop` cleans up whatever path the run takes out.
//!
//! Owns: the order of the phases and the exit code. Must not touch: how an event is decided
//! (`gate/`), how the agent is reached (`intercept/`), or process mechanics (`child/`).

mod checkpoints;
mod control;
#[cfg(target_os = "linux")]
mod denials;
pub(crate) mod floor;
mod phases;
mod prepare;
mod supervise;

pub(crate) use crate::rundir::{only_root_can_write, RunDir};
pub(crate) use phases::hook_executable;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::ask::Asker;
use crate::child::guardian::Guardian;
use crate::child::signals::Forwarder;
use crate::child::tree;
use crate::child::GroupPolicy;
use crate::config::Config;
use crate::exit::{CommandResult, Exit, Failure, OrExit};
use crate::gate::{Approver, Gate, Harness};
use crate::intercept::Interceptor;

/// Extra time a hook waits beyond the parent's own deadline, so the parent answers first.
const HOOK_MARGIN: Duration = Duration::from_secs(2);

/// The longest the run's last spans may hold its exit (a collector that is down costs
/// nothing: the connection is refused at once).
const EXPORT_AT_EXIT: Duration = Duration::from_secs(2);

/// The helper processes a run starts first, before its log and its configuration are read:
/// the guardian (the small executable beside this one, spawned), which, where the floor
/// wants namespaces, first makes them for the agent while we prepare.
pub struct Helpers {
    guardian: std::io::Result<Guardian>,
    #[cfg(target_os = "linux")]
    premade: Option<crate::floor::NamespaceReceiver>,
}

impl Helpers {
    /// Starts the guardian, for a run whose floor is `floor`, whose policy file is `policy`
    /// and whose workspace is `workspace` (`None`: the current directory). Call it while
    /// this process is single-threaded.
    pub fn start(
        floor: crate::floor::Mode,
        policy: Option<&Path>,
        workspace: Option<&Path>,
    ) -> Helpers {
        let small = phases::small_executable(&std::env::current_exe().unwrap_or_default());
        #[cfg(target_os = "linux")]
        // (None where the container refuses them: the agent's process would not join them.)
        let premade = crate::floor::premade_namespaces(floor)
            .filter(|_| floor::container::decide(floor::container::here()).is_ok());
        let (premade, maker) = match premade {
            Some((premade, maker)) if small.is_some() => (Some(premade), Some(maker.into_socket())),
            _ => (None, None),
        };
        #[cfg(not(target_os = "linux"))]
        let (maker, _, _, _) = (None, floor, policy, workspace);
        let args: &[&str] = match maker {
            Some(_) => &[crate::floor::MAKE_NAMESPACES_ARG],
            None => &[],
        };
        let guardian = Guardian::spawn(small.as_deref(), args, maker);
        #[cfg(target_os = "linux")]
        let premade = premade.map(|mut premade| {
            // The maker waits for this list (an empty one when the guardian did not start).
            let (caches, dir) = match &guardian {
                Ok(_) => floor::caches_ahead(policy, workspace),
                Err(_) => (Vec::new(), None),
            };
            premade.ask_overlays(caches, dir.as_deref());
            premade
        });
        Helpers {
            guardian,
            #[cfg(target_os = "linux")]
            premade,
        }
    }
}

/// Runs the agent under the harness, with what [`Helpers::start`] started; returns how we
/// exit.
pub fn run(cfg: Config, helpers: Helpers) -> CommandResult {
    let guardian = match helpers.guardian {
        Ok(g) => Some(g),
        Err(e) => {
            tracing::warn!("no guardian process ({e}): the agent may outlive a killed wrapper");
            None
        }
    };
    #[cfg(target_os = "linux")]
    let premade = helpers.premade;
    // Orphans of the agent's tree come back to us, so that none outlives the run.
    match tree::become_subreaper() {
        Ok(()) => tracing::debug!("the wrapper is a child subreaper"),
        Err(e) => tracing::debug!("the wrapper is no child subreaper ({e})"),
    }
    let group = GroupPolicy::detect();
    let forwarder = Forwarder::install(group).map_err(|e| {
        Failure::new(
            Exit::Wrapper,
            format!("cannot install signal handlers: {e}"),
        )
    })?;
    // A stream proxy pumps its two directions on two threads; everything else runs on
    // this one (the hook path is lighter without a thread pool).
    let mut builder = match cfg.proxy {
        Some(_) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
        None => tokio::runtime::Builder::new_current_thread(),
    };
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| Failure::new(Exit::Wrapper, format!("cannot start the runtime: {e}")))?;
    let process = Process {
        group,
        forwarder,
        guardian,
        #[cfg(target_os = "linux")]
        premade,
    };
    runtime.block_on(run_async(cfg, process))
}

/// What the run set up before its runtime: where the agent lives among process groups,
/// the signal forwarder, the guardian, and where the agent's namespaces arrive.
struct Process {
    group: GroupPolicy,
    forwarder: Forwarder,
    guardian: Option<Guardian>,
    #[cfg(target_os = "linux")]
    premade: Option<crate::floor::NamespaceReceiver>,
}

async fn run_async(cfg: Config, process: Process) -> CommandResult {
    let hold = crate::ask::Hold::new()
        .map(Arc::new)
        .map_err(|e| Failure::new(Exit::Wrapper, format!("cannot make a pipe: {e}")))?;
    let asker = match process.group {
        GroupPolicy::Foreground => Asker::for_terminal(cfg.ask_timeout, hold.clone()),
        GroupPolicy::OwnGroup => None,
    };
    let interactive = asker.is_some();
    if interactive {
        hold.save_terminal();
    }
    let approver = match &cfg.host {
        // The host's clients answer escalations instead of the terminal.
        Some(options) => {
            // The run's host always has a listener of its own (`--host-listen`).
            let (host, page) = options
                .listen(None)
                .await
                .map_err(|e| Failure::from(e).exiting(Exit::Wrapper))?;
            let page = page.unwrap_or_default();
            eprintln!(
                "ahp-wrap: approvals page on {page} (Agent Host Protocol: {}host)",
                page.replacen("http", "ws", 1)
            );
            Some(host as Arc<dyn Approver>)
        }
        None => asker.map(|a| Arc::new(a) as Arc<dyn Approver>),
    };
    let telemetry = crate::telemetry::Options {
        framework: Some(cfg.kind().to_owned()),
        ..cfg.telemetry.clone()
    };
    let telemetry = crate::telemetry::start(telemetry)
        .await
        .or_exit(Exit::Wrapper)?;
    let (gate, limits) = prepare::gate(&cfg, prepare::Ids::new(&cfg), approver)
        .await
        .or_exit(Exit::Wrapper)?;
    if let Some(t) = telemetry {
        t.run_started(crate::telemetry::RunSpan {
            session_id: gate.session_id.clone(),
            agent: cfg.program.to_string_lossy().into_owned(),
            framework: cfg.kind().to_owned(),
            depth: gate.depth,
            start: std::time::SystemTime::now(),
        });
    }
    let mut run = Run {
        cfg: &cfg,
        gate: gate.clone(),
        interactive,
        shown: cfg.program.to_string_lossy().into_owned(),
        notes: Vec::new(),
        hold,
    };
    let ended = run.agent(process, &limits).await;
    let exit = ended.as_ref().map_or_else(|f| f.exit, |exit| *exit);
    // Finish: the harness link, the run's span, then what the person reads.
    if let Harness::Remote(client) = &gate.decider.harness {
        client.close(Duration::from_secs(2)).await;
    }
    if let Some(t) = telemetry {
        t.run_ended(exit.code(), gate.events_seen(), EXPORT_AT_EXIT)
            .await;
    }
    if let Some(met) = gate.floor_met.summary() {
        run.notes.push(met);
    }
    crate::report::report(&cfg, &gate.audit, &run.notes).await;
    ended
}

/// The run once the gate exists.
struct Run<'a> {
    cfg: &'a Config,
    gate: Arc<Gate>,
    interactive: bool,
    /// The agent's command as typed.
    shown: String,
    /// What the person must read after the agent's screen is gone (see `report`).
    notes: Vec<String>,
    /// What a question at the terminal holds still: the agent, once it runs.
    hold: Arc<crate::ask::Hold>,
}

/// What the run holds while the agent may run; dropping it cleans up on every path: the
/// forwarder stops (the agent's pid may be reused), interceptors' tasks stop (their own
/// `Drop`), and the run directory is removed. Once the agent's tree has ended, the guardian
/// is released and removes the run directory itself, after we exit; before that, it is
/// dropped without release: it then ends whatever of the agent is left (and removes the
/// directory).
struct RunGuard<'a> {
    forwarder: &'a Forwarder,
    guardian: Option<Guardian>,
    interceptors: Vec<Box<dyn Interceptor>>,
    /// The control socket, from the prepare phase on.
    control: Option<control::Control>,
    /// The agent's cgroup until the tree tracker takes it.
    cgroup: Option<crate::child::cgroup::Cgroup>,
    /// The floor, from the prepare phase on (`Err`: why there is none).
    floor: Option<Result<floor::RunFloor, floor::NoFloor>>,
    /// The network floor's proxy and bridge, once the agent runs.
    net: Option<floor::NetRunning>,
    /// The floor's refusals read from the kernel's audit log, once the agent runs.
    #[cfg(target_os = "linux")]
    denials: Option<denials::Watching>,
    /// The agent's namespaces made ahead, until the floor is prepared.
    #[cfg(target_os = "linux")]
    premade: Option<crate::floor::NamespaceReceiver>,
    /// The kernel being asked what it offers the floor, until the floor is prepared.
    #[cfg(target_os = "linux")]
    probing: Option<floor::Probing>,
    run_dir: RunDir,
    /// The agent's tree has ended (or never started): the guardian may be released.
    ended: bool,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.forwarder.clear_target();
        self.interceptors.clear();
        // Dropped without release (the tree not ended), the guardian ends what is left.
        let released = self.ended && self.guardian.take().is_some_and(Guardian::release);
        if released {
            self.run_dir.leave();
        }
        let how = if released {
            "left to the guardian"
        } else {
            "removed"
        };
        tracing::debug!("run directory {} {how}", self.run_dir.path().display());
    }
}
