//! The run's floor: the policy's `[floor]` made concrete for this agent, what this kernel
//! enforces of it (said before the agent starts), and the step the agent's process applies
//! to itself before `exec`.

use std::path::{Path, PathBuf};

use crate::child::Confine;
use crate::config::Config;
use crate::floor::{self, Context, Plan, Report};
use crate::frameworks::AgentCommand;

/// The floor of one run, once prepared.
pub(super) struct RunFloor {
    pub plan: Plan,
    pub report: Report,
    /// What the agent applies to itself; `None` when nothing can be enforced here.
    pub confine: Option<Confine>,
}

/// Why the run has no floor, or cannot start.
pub(super) enum NoFloor {
    /// `--floor off`, or `enabled = false` in the policy: said and audited.
    Off(&'static str),
    /// The floor cannot be set up: the run must not start.
    Failed(String),
}

/// Prepares the floor for `cmd` (after every interceptor amended it), or says why there is
/// none. `protected` are the wrapper's own files.
pub(super) fn prepare(
    cfg: &Config,
    cmd: &mut AgentCommand,
    run_dir: &Path,
    protected: Vec<PathBuf>,
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
    let home = home_dir();
    let owner = crate::frameworks::floor_owner(cfg.framework, std::path::Path::new(&cfg.program));
    let own = owner.agent_files(&home);
    let cx = Context {
        workspace: cfg.workspace.clone(),
        agent_state: own
            .state
            .into_iter()
            .chain(cmd.floor.state.clone())
            .collect(),
        protected: own
            .protected
            .into_iter()
            .chain(cmd.floor.protected.clone())
            .chain(protected)
            .collect(),
        tmpdir: std::env::var_os("TMPDIR").map(PathBuf::from),
        caches: floor::plan::env_caches(),
        create_missing: true,
        home,
    };
    let plan = Plan::new(&spec, &cx);
    kernel(cmd, plan, run_dir)
}

#[cfg(target_os = "linux")]
fn kernel(cmd: &mut AgentCommand, plan: Plan, run_dir: &Path) -> Result<RunFloor, NoFloor> {
    let support = floor::Support::probe();
    let report = support.report(&plan);
    if support.landlock_abi < 1 {
        return Ok(RunFloor {
            plan,
            report,
            confine: None,
        });
    }
    let prepared = floor::Prepared::new(&plan, &support, run_dir)
        .map_err(|e| NoFloor::Failed(crate::error_chain(&e)))?;
    cmd.env.push((floor::ENV_FLOOR.into(), "1".into()));
    let prepared = std::sync::Arc::new(prepared);
    Ok(RunFloor {
        plan,
        report,
        confine: Some(std::sync::Arc::new(move || prepared.apply())),
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel(_cmd: &mut AgentCommand, plan: Plan, _run_dir: &Path) -> Result<RunFloor, NoFloor> {
    let report = Report {
        enforced: Vec::new(),
        gaps: vec!["the floor is Linux-only: files, signals and secrets are not confined by the kernel on this system".into()],
    };
    Ok(RunFloor {
        plan,
        report,
        confine: None,
    })
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
