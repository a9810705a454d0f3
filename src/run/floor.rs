//! The run's floor: the policy's `[floor]` made concrete for this agent, what this kernel
//! enforces of it (said before the agent starts), and the step the agent's process applies
//! to itself before `exec`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Run, RunGuard};

#[cfg(target_os = "linux")]
pub(crate) mod container;
mod credentials;
mod end;
mod kernel;
mod net;
mod runfiles;
use crate::child::Confine;
use crate::config::Config;
use crate::exit::{Exit, Failure};
use crate::floor::finished::Copies;
use crate::floor::hosts::HostRules;
use crate::floor::{self, Context, Plan, Report};
use crate::frameworks::AgentCommand;
use crate::protocol::EventType;
use credentials::credentials;
use kernel::kernel;
#[cfg(target_os = "linux")]
pub(super) use kernel::{probe_ahead, Probing};
pub(super) use net::{NetRunning, NetSide};

/// The floor of one run, once prepared.
pub(super) struct RunFloor {
    pub plan: Plan,
    pub report: Report,
    /// What the agent applies to itself; `None` when nothing can be enforced here.
    pub confine: Option<Confine>,
    /// The network part, until the agent runs (then [`NetRunning`]).
    pub net: Option<NetSide>,
    /// The kernel's audit log, where the run can read the floor's refusals (until the agent
    /// runs; then [`Watching`](super::denials::Watching)).
    #[cfg(target_os = "linux")]
    pub denials: Option<floor::denials::Reader>,
    /// The private copies of the agent's mixed state files, sorted and merged at the end.
    pub copies: Copies,
    /// The caches' layers, held to be removed with the run.
    #[cfg(target_os = "linux")]
    pub layers: Option<floor::caches::Layers>,
    /// The credentials taken out of the agent's environment (names).
    pub removed_env: Vec<String>,
    /// The credentials given to the agent as placeholders: names, and the hosts each is
    /// sent to.
    pub placeholders: Vec<(String, Vec<String>)>,
    /// What a person should know about the declared credentials (one that cannot be read,
    /// one left real).
    pub credential_notes: Vec<String>,
    /// The workspace's `Cargo.lock` as the run found it, when a cache is overlaid: a `.crate`
    /// file the tree adds to cargo's cache lands only with a checksum recorded before the run.
    pub lock_at_start: Option<String>,
    /// The tree has a PID namespace of its own (while this switch is on): the agent's process
    /// is its outer helper.
    pub own_pids: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// When the floor was prepared (before the agent started): a run file changed since is
    /// the tree's.
    pub started: std::time::SystemTime,
    /// The kinds of run files the policy lets the tree create and change (`[floor] run_files`).
    pub run_files: Vec<String>,
}

/// Why the run has no floor, or cannot start.
pub(super) enum NoFloor {
    /// `--floor off`, or `enabled = false` in the policy: said and audited.
    Off(&'static str),
    /// The floor cannot be set up: the run must not start.
    Failed(String),
}

/// Prepares the floor for `cmd` (after every interceptor amended it), or says why there is
/// none. `premade` brings the namespaces made at start-up; `protected` are the wrapper's own
/// files; `control` the control socket's address (an abstract one must exist in the agent's
/// network namespace too).
pub(super) fn prepare(
    cfg: &Config,
    cmd: &mut AgentCommand,
    run_dir: &Path,
    #[cfg(target_os = "linux")] (premade, probing): (
        Option<floor::NamespaceReceiver>,
        Option<Probing>,
    ),
    protected: Vec<PathBuf>,
    control: &OsStr,
) -> Result<RunFloor, NoFloor> {
    if cfg.floor == floor::Mode::Off {
        return Err(NoFloor::Off("--floor off"));
    }
    let spec = crate::policy::floor_spec(cfg.policy.as_deref()).map_err(|e| {
        NoFloor::Failed(format!("the policy's [floor]: {}", crate::error_chain(&e)))
    })?;
    if !spec.enabled {
        return Err(NoFloor::Off("the policy's [floor] says enabled = false"));
    }
    let mut cx = context(
        cfg.framework,
        Path::new(&cfg.program),
        cfg.workspace.clone(),
    );
    cx.agent_state.extend(cmd.floor.state.iter().cloned());
    cx.protected.extend(cmd.floor.protected.iter().cloned());
    cx.mixed.extend(cmd.floor.mixed.iter().cloned());
    cx.protected.extend(protected);
    cx.create_missing = true;
    let home = home_dir();
    let owner = crate::frameworks::floor_owner(cfg.framework, Path::new(&cfg.program));
    // The checkpoints' store holds copies of other workspaces' files (their `.env`s): never
    // read by the tree. The caches' layers lie in the user's state directory, out of the
    // tree's reach.
    let store = crate::checkpoint::store::Store::open().map(|s| s.root().to_owned());
    let run = floor::plan::RunInputs {
        hidden: store
            .and_then(|s| s.canonicalize().ok())
            .into_iter()
            .collect(),
        credentials: &cfg.credentials,
        layers: &|| caches_dir().filter(|d| crate::termlog::make_private_dir(d).is_ok()),
        nested: cfg.nested_sandboxes,
        own_sandbox: &|| owner.own_sandbox(&cmd.args, &home, &cfg.workspace),
    };
    let (plan, layers) = Plan::for_run(&spec, &cx, &run);
    let layers = layers.and_then(|d| Some(d.join(run_dir.file_name()?)));
    let own_env = owner.own_env(&cmd.args);
    if spec.env.removes() {
        let keep = own_env.iter().cloned();
        let keep = keep.chain(spec.env.keep.iter().flatten().cloned());
        let keep = keep.chain(cfg.keep_env.iter().cloned());
        cmd.remove_env = floor::secrets::of_this_environment(keep).1;
    }
    let (credentials, credential_notes) = credentials(&spec, cfg, &own_env);
    let rules = HostRules::new(&spec.net, owner.model_hosts())
        .map_err(|e| NoFloor::Failed(format!("the policy's [floor.net]: {e}")))?
        .with_loopback_ports(started_with_ports(cmd, owner, cfg));
    // The run directory holds the wrapper's own sockets when it cannot use abstract ones.
    let mut unix_allow = spec.unix.allow(&home, &cfg.workspace);
    unix_allow.push(run_dir.to_owned());
    #[cfg(target_os = "linux")]
    let floor = kernel(
        cmd,
        plan,
        (run_dir, layers.as_deref()),
        (premade, probing),
        (rules, unix_allow, credentials),
        control,
    );
    #[cfg(not(target_os = "linux"))]
    let floor = kernel(cmd, plan, run_dir, (rules, unix_allow), control);
    let started = std::time::SystemTime::now();
    let run_files = spec.run_files.clone().unwrap_or_default();
    floor.map(|f| RunFloor {
        removed_env: cmd.remove_env.clone(),
        credential_notes,
        started,
        run_files,
        lock_at_start: match f.plan.overlays.is_empty() {
            true => None,
            false => std::fs::read_to_string(cfg.workspace.join("Cargo.lock")).ok(),
        },
        ..f
    })
}

/// The ports of this machine's loopback the run was started with, which the tree reaches
/// without a decision of their own: those of the loopback URLs in the agent's command line
/// (`--registry http://127.0.0.1:4873`, a model provider's `base_url`), in the variables its
/// shim names as its model API's (`ANTHROPIC_BASE_URL`), in the configuration files it names
/// (with the variables they refer to), and `--loopback-port`. Not the environment at large: a
/// `DOCKER_HOST` or a proxy there is the person's, not given to the agent.
fn started_with_ports(
    cmd: &AgentCommand,
    owner: &dyn crate::frameworks::adapter::Framework,
    cfg: &Config,
) -> Vec<u16> {
    let mut ports = cfg.loopback_ports.clone();
    let env = |name: &str| {
        cmd.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os(name))
            .map(|v| v.to_string_lossy().into_owned())
    };
    let mut texts: Vec<String> = cmd
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .chain(owner.model_url_env().iter().filter_map(|n| env(n)))
        .collect();
    for file in owner.model_url_files(&home_dir()) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        texts.extend(floor::hosts::variables_named(&text).filter_map(|n| env(&n)));
        texts.push(text);
    }
    for text in &texts {
        ports.extend(floor::hosts::loopback_url_ports(text));
    }
    ports
}

impl Run<'_> {
    /// Starts the network part and the reading of the kernel's refusals once the agent runs
    /// as `agent` (nothing to do without a floor).
    pub(super) fn floor_start(
        &mut self,
        held: &mut RunGuard<'_>,
        agent: i32,
    ) -> Result<(), String> {
        let Some(Ok(floor)) = held.floor.as_mut() else {
            return Ok(());
        };
        // What earlier runs left of their caches' layers, removed once the agent runs (it
        // would compete with its start).
        #[cfg(target_os = "linux")]
        if !floor.plan.overlays.is_empty() {
            if let Some(dir) = caches_dir() {
                floor::caches::sweep(&dir);
            }
            let missing = floor::caches::unmounted(agent, &floor.plan.overlays);
            if !missing.is_empty() {
                let shown: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
                let m = format!(
                    "floor: not enforced here: the cache(s) {} are written in place (their \
                     overlay could not be mounted: see docs/floor.md)",
                    shown.join(", ")
                );
                eprintln!("ahp-wrap: warning: {m}");
                self.notes.push(format!("warning: {m}"));
                let gate = self.gate.clone();
                let payload = json!({"source": "floor", "message": m, "caches": shown});
                tokio::spawn(async move { gate.say(EventType::Error, payload).await });
                floor.plan.overlays.retain(|o| !missing.contains(&o.cache));
            }
        }
        #[cfg(target_os = "linux")]
        if let Some(reader) = floor.denials.take() {
            // Counting is not the floor: the run goes on without it.
            match super::denials::Watching::start(reader, agent, self.gate.clone()) {
                Ok(watching) => held.denials = Some(watching),
                Err(e) => tracing::warn!("the floor's refusals are not counted: {e}"),
            }
        }
        let Some(side) = floor.net.take() else {
            return Ok(());
        };
        #[cfg(target_os = "linux")]
        {
            let (running, control) = side
                .start(self.gate.clone(), agent)
                .map_err(|e| e.to_string())?;
            if let (Some(listener), Some(c)) = (control, held.control.as_mut()) {
                c.also_listen(listener).map_err(|e| e.to_string())?;
            }
            held.net = Some(running);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (side, agent);
        Ok(())
    }

    /// Says what the floor cannot enforce here (refusing to start under `--require-floor`),
    /// or that there is none; both are audited.
    pub(super) async fn floor_before_start(&mut self, held: &RunGuard<'_>) -> Result<(), Failure> {
        if let Some(Ok(floor)) = &held.floor {
            self.say_removed_env(floor).await;
            if floor.confine.is_some() {
                // What the agent's tools report refused is then explained as the floor's.
                let lines = floor::explain::Lines::new(&floor.plan, Some(home_dir()));
                self.gate.floor_met.draw(lines);
            }
            // The tree's only way out will be the egress proxy, which asks about each
            // connection: the policy leaves the hosts commands contact to it. Said before the
            // agent starts, so that no event of it is judged otherwise (a run whose proxy then
            // fails to start ends).
            if floor.net.is_some() {
                if let crate::gate::Harness::Embedded(e) = &self.gate.decider.harness {
                    e.egress_in_force();
                    let names = floor.placeholders.iter().map(|(n, _)| n.clone());
                    e.placeholder_vars(names.collect());
                }
            }
        }
        let message = match &held.floor {
            None => return Ok(()),
            Some(Err(NoFloor::Off(why))) => {
                let m = format!(
                    "the floor is off ({why}): the agent's tree is confined only by what the \
                     policy sees"
                );
                eprintln!("ahp-wrap: warning: {m}");
                self.notes.push(format!("warning: {m}"));
                m
            }
            Some(Err(NoFloor::Failed(why))) => {
                let m = format!("cannot set up the floor: {why} (--floor off runs without it)");
                let payload = json!({"source": "floor", "message": m});
                self.gate.say(EventType::Error, payload).await;
                return Err(Failure::new(Exit::Wrapper, m));
            }
            Some(Ok(floor)) if floor.report.complete() && floor.report.withheld.is_empty() => {
                tracing::debug!("floor: {}", floor.report.enforced.join("; "));
                return Ok(());
            }
            Some(Ok(floor)) => {
                let r = &floor.report;
                if self.cfg.require_floor && !r.complete() {
                    let gaps = r.gaps.join("; ");
                    let m = format!("refusing to start (--require-floor): the floor is not complete here: {gaps}");
                    let payload = json!({"source": "floor", "message": m});
                    self.gate.say(EventType::Error, payload).await;
                    return Err(Failure::new(Exit::Wrapper, m));
                }
                let said: Vec<&str> = r
                    .gaps
                    .iter()
                    .chain(&r.withheld)
                    .map(String::as_str)
                    .collect();
                let m = format!("floor: not enforced here: {}", said.join("; "));
                eprintln!("ahp-wrap: warning: {m}");
                self.notes.push(format!("warning: {m}"));
                m
            }
        };
        let payload = json!({"source": "floor", "message": message});
        self.gate.say(EventType::Error, payload).await;
        Ok(())
    }
}

impl Run<'_> {
    /// Says which credentials were taken out of the agent's environment, which it holds as
    /// placeholders, and what stopped a declared one (names, never values): on stderr unless
    /// quiet, and in the audit log.
    async fn say_removed_env(&mut self, floor: &RunFloor) {
        let names = &floor.removed_env;
        let mut lines = Vec::new();
        if !names.is_empty() {
            lines.push(format!(
                "floor: credentials removed from the agent's environment: {} (--keep-env NAME, \
                 or [floor.env] keep in the policy, leaves one in place)",
                names.join(", ")
            ));
        }
        if !floor.placeholders.is_empty() {
            let shown: Vec<String> = floor
                .placeholders
                .iter()
                .map(|(name, hosts)| format!("{name} (to {})", hosts.join(", ")))
                .collect();
            lines.push(format!(
                "floor: credentials the agent holds as placeholders, their values put on its \
                 HTTPS requests to their hosts only: {}",
                shown.join(", ")
            ));
        }
        lines.extend(floor.credential_notes.iter().map(|n| format!("floor: {n}")));
        if lines.is_empty() {
            return;
        }
        let m = lines.join("\n");
        if !self.cfg.quiet {
            for l in &lines {
                eprintln!("ahp-wrap: {l}");
            }
        }
        tracing::info!("{m}");
        let placeholders: Vec<&str> = floor.placeholders.iter().map(|(n, _)| n.as_str()).collect();
        let payload = json!({
            "source": "floor",
            "message": m,
            "removed_env": names,
            "placeholder_env": placeholders,
        });
        self.gate.say(EventType::Error, payload).await;
    }
}

/// Where the caches' layers lie: `caches/` in the user's state directory for ahp-wrap.
fn caches_dir() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("caches"))
}

/// The caches a run under `policy` in `workspace` (`None`: here) will most likely overlay,
/// and a new directory for their layers: what the namespaces' maker mounts ahead, before the
/// run has read its configuration. Nothing when the policy's floor cannot be read or is off
/// (the run says why later).
#[cfg(target_os = "linux")]
pub(super) fn caches_ahead(
    policy: Option<&Path>,
    workspace: Option<&Path>,
) -> (Vec<PathBuf>, Option<PathBuf>) {
    let Ok(spec) = crate::policy::floor_spec(policy) else {
        return (Vec::new(), None);
    };
    let here = std::env::current_dir();
    let Some(ws) = workspace.or(here.as_deref().ok()) else {
        return (Vec::new(), None);
    };
    if !spec.enabled {
        return (Vec::new(), None);
    }
    let caches = floor::plan::caches_ahead(&spec, &home_dir(), ws);
    if caches.is_empty() {
        return (Vec::new(), None);
    }
    let dir = caches_dir()
        .filter(|d| crate::termlog::make_private_dir(d).is_ok())
        .map(|d| d.join(format!("ahead-{}", crate::random_hex(8))));
    (caches, dir)
}

/// What a run of `program` under `framework` in `workspace` starts its floor from: the home
/// directory, the agent's own files (from its shim), `$TMPDIR` and the caches the
/// environment names. Nothing is created (the caller sets `create_missing`).
pub(crate) fn context(
    framework: &'static dyn crate::frameworks::Framework,
    program: &Path,
    workspace: PathBuf,
) -> Context {
    let home = home_dir();
    let own = crate::frameworks::floor_owner(framework, program).agent_files(&home);
    let mut protected = own.protected;
    protected.extend(floor::plan::git_hooks(&workspace));
    Context {
        workspace,
        agent_state: own.state,
        protected,
        protected_dirs: own.protected_dirs,
        project: own.project,
        mixed: own.mixed,
        temp: floor::plan::temp_dirs(),
        caches: floor::plan::env_caches(),
        home,
        create_missing: false,
    }
}

/// What a run (or `policy floor`) in `workspace` says first when the workspace is the home
/// directory or `/`: in one line, what that means and how to start in a project instead.
pub(crate) fn workspace_warning(workspace: &Path) -> Option<String> {
    use crate::checkpoint::NotAProject;
    let (what, files) = match crate::checkpoint::not_a_project(workspace)? {
        NotAProject::Home => ("your home directory", "every file in it"),
        NotAProject::Root => ("/, the whole file system", "every file you can"),
    };
    Some(format!(
        "the workspace is {what} ({}): the agent may write {files}, and no checkpoints are \
         kept (nothing to undo); to work on a project, `cd` into it first or give \
         --workspace DIR",
        workspace.display()
    ))
}

/// `$HOME`, else the password database's home of our user, else `/`.
pub(crate) fn home_dir() -> PathBuf {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| PathBuf::from("/"), |u| u.dir)
}
