//! The run's floor: the policy's `[floor]` made concrete for this agent, what this kernel
//! enforces of it (said before the agent starts), and the step the agent's process applies
//! to itself before `exec`.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Held, Run};
use crate::child::Confine;
use crate::config::Config;
use crate::exit::Exit;
use crate::floor::{self, Context, Plan, Report};
use crate::frameworks::AgentCommand;
use crate::protocol::EventType;

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
    let mut cx = context(
        cfg.framework,
        Path::new(&cfg.program),
        cfg.workspace.clone(),
    );
    cx.agent_state.extend(cmd.floor.state.iter().cloned());
    cx.protected.extend(cmd.floor.protected.iter().cloned());
    cx.protected.extend(protected);
    cx.create_missing = true;
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
    let report = floor::report(&plan);
    Ok(RunFloor {
        plan,
        report,
        confine: None,
    })
}

impl Run<'_> {
    /// Says what the floor cannot enforce here (refusing to start under `--require-floor`),
    /// or that there is none; both are audited.
    pub(super) async fn floor_before_start(&mut self, held: &Held<'_>) -> Result<(), Exit> {
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
                eprintln!("ahp-wrap: {m}");
                let payload = json!({"source": "floor", "message": m});
                self.gate.say(EventType::Error, payload).await;
                return Err(Exit::Wrapper);
            }
            Some(Ok(floor)) if floor.report.complete() => {
                tracing::debug!("floor: {}", floor.report.enforced.join("; "));
                return Ok(());
            }
            Some(Ok(floor)) => {
                let gaps = floor.report.gaps.join("; ");
                if self.cfg.require_floor {
                    let m = format!("refusing to start (--require-floor): the floor is not complete here: {gaps}");
                    eprintln!("ahp-wrap: {m}");
                    let payload = json!({"source": "floor", "message": m});
                    self.gate.say(EventType::Error, payload).await;
                    return Err(Exit::Wrapper);
                }
                let m = format!("floor: not enforced here: {gaps}");
                eprintln!("ahp-wrap: warning: {m}");
                self.notes.push(format!("warning: {m}"));
                m
            }
        };
        let payload = json!({"source": "floor", "message": message});
        self.gate.say(EventType::Error, payload).await;
        Ok(())
    }

    /// Protected paths that did not exist when the agent started (nothing could be bound
    /// over them) and exist now: said and audited.
    pub(super) async fn floor_after_end(&mut self, held: &Held<'_>) {
        let Some(Ok(floor)) = &held.floor else {
            return;
        };
        let appeared = floor.plan.appeared();
        if appeared.is_empty() {
            return;
        }
        let list: Vec<String> = appeared.iter().map(|p| p.display().to_string()).collect();
        let m = format!(
            "protected path(s) created during the run (absent at the start, so the floor could \
             not bind them): {}",
            list.join(", ")
        );
        eprintln!("ahp-wrap: warning: {m}");
        self.notes.push(format!("warning: {m}"));
        let payload = json!({"source": "floor", "message": m, "paths": list});
        self.gate.say(EventType::Error, payload).await;
    }
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
    Context {
        workspace,
        agent_state: own.state,
        protected: own.protected,
        temp: floor::plan::temp_dirs(),
        caches: floor::plan::env_caches(),
        home,
        create_missing: false,
    }
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
