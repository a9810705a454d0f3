//! The phases of a run once the gate exists: prepare, spawn, supervise, finish.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::control::Control;
use super::{prepare::Limits, Process, Run, RunDir, RunGuard, HOOK_MARGIN};
use crate::child::guardian::Guardian;
use crate::child::tree::{self, Tracker};
use crate::child::{self, Agent, GroupPolicy, SpawnOptions, Stdio};
use crate::config::{Proxy, ENV_DEPTH, ENV_SESSION, SECRET_ENV};
use crate::exit::{CommandResult, Exit, Failure};
use crate::frameworks::{AgentCommand, RunContext};
use crate::gate::Harness;
use crate::intercept::hooks::Hooks;
use crate::intercept::pathshim::PathShims;
use crate::intercept::proxy::StreamProxy;
use crate::intercept::{End, Router};
use crate::policy::Protected;
use crate::protocol::EventType;

/// How long after the agent starts the embedded policy is built ahead of its first event,
/// on a thread of its own: the agent's first tool call comes later than that (a model's
/// answer), and a run that is over sooner never builds it.
const POLICY_AHEAD_AFTER: std::time::Duration = std::time::Duration::from_millis(20);

impl Run<'_> {
    /// Prepare, spawn, supervise and finish the agent; returns the exit code.
    pub(super) async fn agent(&mut self, process: Process, limits: &Limits) -> CommandResult {
        let started = Instant::now();
        if self.cfg.depth > limits.max_depth {
            let message = format!(
                "refusing to start {}: it would run at sub-agent depth {}, past {} {}",
                self.shown, self.cfg.depth, limits.depth_source, limits.max_depth
            );
            let payload = json!({"source": "wrapper", "message": message});
            self.gate.say(EventType::Error, payload).await;
            return Err(Failure::new(Exit::Wrapper, message));
        }
        let checkpoints = self.first_checkpoint();
        #[cfg(target_os = "linux")]
        let probing = super::floor::probe_ahead(self.cfg.floor);
        let run_dir = RunDir::create().map_err(|e| {
            Failure::new(
                Exit::Wrapper,
                format!("cannot create a private run directory: {e}"),
            )
        })?;
        let Process {
            group,
            forwarder,
            mut guardian,
            #[cfg(target_os = "linux")]
            premade,
        } = process;
        if let Some(g) = guardian.as_mut() {
            g.clean_up(run_dir.path());
            g.mark(&format!("{ENV_SESSION}={}", self.gate.session_id));
        }
        let mut held = RunGuard {
            forwarder: &forwarder,
            guardian,
            interceptors: Vec::new(),
            control: None,
            cgroup: None,
            floor: None,
            net: None,
            #[cfg(target_os = "linux")]
            denials: None,
            #[cfg(target_os = "linux")]
            premade,
            #[cfg(target_os = "linux")]
            probing,
            run_dir,
            ended: false,
        };
        let cmd = self
            .prepare(&mut held, limits)
            .map_err(|e| Failure::new(Exit::Wrapper, e))?;
        self.floor_before_start(&held).await?;
        self.checkpoints_ready(checkpoints).await;
        let mut agent = self.spawn(&mut held, &cmd, group).await?;
        if let Some(checkpoints) = self.gate.checkpoints.get() {
            checkpoints.prune_in_background();
        }
        let exit = self.supervise(&mut held, &mut agent).await;
        let exit = self.finish(&mut held, exit).await;
        let payload = json!({
            "exit_code": exit.code(),
            "duration_ms": started.elapsed().as_millis() as u64,
            "total_events_processed": self.gate.events_seen(),
        });
        self.gate.say(EventType::SessionEnd, payload).await;
        Ok(exit)
    }

    /// Prepare: protects the run's own files and processes, lets each interceptor add to
    /// the agent's command, and says what the person must know before the agent starts.
    fn prepare(
        &mut self,
        held: &mut RunGuard<'_>,
        limits: &Limits,
    ) -> Result<AgentCommand, String> {
        let ask_budget = if self.interactive {
            self.cfg.ask_timeout
        } else {
            std::time::Duration::ZERO
        };
        let hook_budget = limits.timeout + ask_budget + HOOK_MARGIN;
        let self_exe = std::env::current_exe().unwrap_or_else(|_| "ahp-wrap".into());
        let run = RunContext {
            self_exe: hook_executable(&self_exe),
            run_dir: held.run_dir.path().to_owned(),
            hook_budget_ms: hook_budget.as_millis() as u64,
            interactive: self.interactive,
        };
        self.protect(&self_exe, held);
        let control = Control::bind(held.run_dir.path())?;
        match &self.cfg.proxy {
            None => held.interceptors.push(Box::new(Hooks::new(
                self.cfg.framework,
                self.gate.clone(),
                self.interactive,
            ))),
            Some(Proxy::Mcp { name }) => {
                let cwd = std::env::current_dir().ok();
                let mcp = crate::intercept::proxy::mcp::Mcp::new(name.clone(), cwd);
                held.interceptors
                    .push(Box::new(StreamProxy::new(mcp, self.gate.clone())));
            }
            Some(Proxy::Acp) => {
                let cwd = std::env::current_dir().ok();
                let acp = crate::intercept::proxy::acp::Acp::new(self.shown.clone(), cwd);
                held.interceptors
                    .push(Box::new(StreamProxy::new(acp, self.gate.clone())));
            }
        }
        if self.cfg.wrap_mcp {
            let wrapped =
                crate::intercept::events::WrappedMcp::new(self.cfg.framework, self.gate.clone());
            held.interceptors.push(Box::new(wrapped));
        }
        if !self.cfg.path_shims.is_empty() {
            let shims = PathShims::new(self.cfg.path_shims.clone(), self.gate.clone());
            held.interceptors.push(Box::new(shims));
        }
        let mut cmd = AgentCommand {
            program: self.cfg.program.clone(),
            args: self.cfg.args.clone(),
            ..AgentCommand::default()
        };
        for interceptor in &mut held.interceptors {
            interceptor
                .prepare(&run, &mut cmd)
                .map_err(|e| crate::error_chain(&e))?;
        }
        let env =
            |k: &str, v: &dyn AsRef<std::ffi::OsStr>| (OsString::from(k), v.as_ref().to_owned());
        // Ours first: an interceptor's own variables come after, as the agent reads them.
        let mut ours = control.env(run.hook_budget_ms);
        ours.extend([
            env(ENV_DEPTH, &self.cfg.depth.to_string()),
            env(ENV_SESSION, &self.gate.session_id),
            env("AHP_WRAP_FRAMEWORK", &self.cfg.kind()),
            env("AHP_WRAP_BIN", &self_exe),
            env("AHP_WRAP_HOOK_BIN", &run.self_exe),
        ]);
        ours.append(&mut cmd.env);
        cmd.env = ours;
        // The floor protects the audit log as well: the policy has rules of its own for it.
        let mut own_files = own_files(&self_exe, held);
        own_files.extend(self.cfg.audit_log.iter().cloned());
        own_files.extend(self.cfg.audit_trail.iter().map(|t| t.dir.clone()));
        held.floor = Some(super::floor::prepare(
            self.cfg,
            &mut cmd,
            held.run_dir.path(),
            #[cfg(target_os = "linux")]
            (held.premade.take(), held.probing.take()),
            own_files,
            &control.address(),
        ));
        held.control = Some(control);
        // The caches' layers are removed by the guardian once the run is over (after the
        // wrapper exits), as the run directory is.
        #[cfg(target_os = "linux")]
        if let (Some(g), Some(Ok(floor))) = (held.guardian.as_mut(), held.floor.as_mut()) {
            if let Some(layers) = floor.layers.as_mut() {
                let dir = layers.hand_over().to_owned();
                if !g.clean_up(&dir) {
                    layers.take_back();
                }
            }
        }
        if let Some(w) = unproven_version(self.cfg.framework, &self.cfg.program) {
            cmd.warnings.push(w);
        }
        self.say_before_start(&cmd);
        Ok(cmd)
    }

    /// Names the run's own executables, run directory and processes to the embedded
    /// policy, which protects them from the agent.
    fn protect(&self, self_exe: &Path, held: &RunGuard<'_>) {
        let Harness::Embedded(e) = &self.gate.decider.harness else {
            return;
        };
        let pids = std::iter::once(std::process::id())
            .chain(held.guardian.as_ref().map(|g| g.pid() as u32));
        e.protect(Protected::new(own_files(self_exe, held), pids));
    }

    /// Said now, before the agent may take the screen (warnings again at exit).
    fn say_before_start(&mut self, cmd: &AgentCommand) {
        for w in &cmd.warnings {
            eprintln!("ahp-wrap: warning: {w}");
            self.notes.push(format!("warning: {w}"));
        }
        // Once, here: the person chose where to start, and a line at exit comes too late.
        if let Some(w) = super::floor::workspace_warning(&self.cfg.workspace) {
            eprintln!("ahp-wrap: warning: {w}");
        }
        if self.cfg.quiet {
            return;
        }
        if self.cfg.audit_off {
            eprintln!("ahp-wrap: note: --audit-log none: this run keeps no audit log");
        }
        let path_shims = !self.cfg.path_shims.is_empty();
        if self.cfg.proxy.is_none() {
            if let Some(notice) = self.cfg.framework.start_notice(&self.shown, path_shims) {
                eprintln!("ahp-wrap: {notice}");
            }
        }
        if path_shims {
            let list: Vec<&str> = self.cfg.path_shims.iter().map(String::as_str).collect();
            eprintln!(
                "ahp-wrap: note: PATH shims ask about {} run by name (not by absolute path, as \
                 a shell builtin or from an interpreter)",
                list.join(", ")
            );
        }
        // The default log file is named only once it is there (made at the start when the
        // filter logs more than warnings; else at its first line, named at exit).
        let log = crate::termlog::sink();
        match (log.default_file, log.made_at_start, &log.path) {
            (true, true, Some(path)) => eprintln!(
                "ahp-wrap: the terminal is the agent's: ahp-wrap's log goes to {} (warnings are repeated at exit)",
                path.display()
            ),
            (true, _, _) => eprintln!(
                "ahp-wrap: the terminal is the agent's: nothing of ahp-wrap's is written on it \
                 while the agent runs (warnings are repeated at exit)"
            ),
            _ => {}
        }
    }

    /// Spawn: starts the agent as the interceptors need its stdio, and tells the signal
    /// forwarder and the guardian about it. A failure is said and audited.
    async fn spawn(
        &mut self,
        held: &mut RunGuard<'_>,
        cmd: &AgentCommand,
        group: GroupPolicy,
    ) -> Result<Agent, Failure> {
        let stdio = if held.interceptors.iter().any(|i| i.stdio() == Stdio::Piped) {
            Stdio::Piped
        } else {
            Stdio::Inherit
        };
        if held.guardian.as_ref().is_some_and(Guardian::ended) {
            // Before the agent writes to its pipe (a pipe with no reader would kill it).
            let m = "the guardian process ended at once (an ahp-wrap-hook older than this \
                     wrapper beside it?): the agent may outlive a killed wrapper";
            eprintln!("ahp-wrap: warning: {m}");
            self.notes.push(format!("warning: {m}"));
            held.guardian = None;
            // The same executable is the PID namespace's helper: not this one, then.
            if let Some(Ok(floor)) = &held.floor {
                if let Some(on) = &floor.own_pids {
                    on.store(false, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        let cgroup = child::cgroup::Cgroup::create()
            .inspect_err(|e| tracing::debug!("no cgroup for the agent: {e}"))
            .ok();
        let procs = cgroup.as_ref().map(|c| c.procs_path());
        let opts = SpawnOptions {
            group,
            stdio,
            remove_env: &SECRET_ENV,
            guardian_fd: held.guardian.as_ref().map(Guardian::fd),
            cgroup: procs,
            confine: match &held.floor {
                Some(Ok(floor)) => floor.confine.clone(),
                _ => None,
            },
            own_pids: matches!(&held.floor, Some(Ok(f)) if f.own_pids.as_ref()
                .is_some_and(|on| on.load(std::sync::atomic::Ordering::Relaxed))),
        };
        let agent = match child::spawn(cmd, opts) {
            Ok(a) => a,
            Err(e) => {
                let exit = e.exit();
                let payload = json!({"source": "agent", "message": e.to_string()});
                self.gate.say(EventType::Error, payload).await;
                let payload = json!({"exit_code": exit.code(), "reason": "spawn_failed"});
                self.gate.say(EventType::SessionEnd, payload).await;
                held.ended = true;
                return Err(Failure::new(exit, e));
            }
        };
        held.forwarder.set_target(agent.id.kill_target());
        if let Some(g) = held.guardian.as_mut() {
            g.watch(agent.id);
        }
        let dir = cgroup
            .as_ref()
            .filter(|c| c.contains(agent.process.id() as i32))
            .map(|c| c.dir().to_owned());
        self.hold
            .agent_started(agent.process.id() as i32, agent.pid, dir);
        held.cgroup = cgroup;
        Ok(agent)
    }
}

impl Run<'_> {
    /// Supervise: starts the interceptors, announces the session, and waits for the agent
    /// to end while its tree is tracked; then ends what it left behind and releases the
    /// guardian. Returns the agent's exit code (or the wrapper's, after an alarm).
    async fn supervise(&mut self, held: &mut RunGuard<'_>, agent: &mut Agent) -> Exit {
        let (alarm, alarms) = mpsc::unbounded_channel();
        let mut router = Router::default();
        for interceptor in &mut held.interceptors {
            interceptor.serve(&mut router);
            interceptor.start(agent, alarm.clone());
        }
        if let Err(e) = self.floor_start(held, agent.pid) {
            let m = format!("the network floor cannot start: {e}; the agent is stopped");
            eprintln!("ahp-wrap: {m}");
            let payload = json!({"source": "floor", "message": m});
            self.gate.say(EventType::Error, payload).await;
            let _ = alarm.send(crate::intercept::Stop {
                why: m,
                failed: true,
            });
        }
        if let Some(control) = held.control.as_mut() {
            control.start(agent.pid, router, self.gate.clone(), alarm.clone());
        }
        drop(alarm);
        self.gate
            .say(EventType::SessionStart, self.start_payload(agent.pid))
            .await;
        if let Harness::Embedded(embedded) = &self.gate.decider.harness {
            // Unless the run is over by then (a run that ends at once never pays for it).
            let embedded = embedded.clone();
            tokio::spawn(async move {
                tokio::time::sleep(POLICY_AHEAD_AFTER).await;
                embedded.warm_up();
            });
        }
        let link = held.guardian.as_ref().and_then(Guardian::link);
        let mut tree = Tracker::new(agent.process.id(), link, held.cgroup.take());
        let (status, stopped) = super::supervise::until_exit(
            &mut agent.process,
            &mut tree,
            &self.gate,
            self.cfg.heartbeat,
            alarms,
        )
        .await;
        // A question still pending is withdrawn; none is asked now.
        self.hold.agent_gone();
        held.forwarder.clear_target();
        let left = tree.end(tree::LEFTOVER_GRACE);
        if left > 0 {
            tracing::debug!("ended {left} process(es) the agent left behind");
        }
        // The tree has ended: the guardian is released with the run (see `RunGuard`).
        held.ended = true;
        match status {
            Ok(_) if stopped.as_ref().is_some_and(|s| s.failed) => Exit::Wrapper,
            Ok(status) => {
                if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
                    // Killed, the agent left the terminal as it had set it (raw mode, say).
                    self.hold.restore_terminal();
                    let message = format!("the agent was killed by signal {sig}");
                    let payload = json!({"source": "agent", "message": message, "signal": sig});
                    self.gate.say(EventType::Error, payload).await;
                }
                Exit::of_status(status)
            }
            Err(e) => {
                eprintln!("ahp-wrap: lost track of the agent: {e}");
                Exit::Wrapper
            }
        }
    }

    /// The `session_start` payload.
    fn start_payload(&self, pid: i32) -> Value {
        let cfg = self.cfg;
        let command: Vec<String> = std::iter::once(&cfg.program)
            .chain(&cfg.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let cwd = std::env::current_dir().map(|d| d.display().to_string());
        let mut payload = json!({
            "framework": cfg.kind(),
            "command": command,
            "pid": pid,
            "cwd": cwd.unwrap_or_default(),
            "interactive": self.interactive,
        });
        if let Some(parent) = &cfg.parent_session {
            payload["parent_session_id"] = Value::String(parent.clone());
        }
        payload
    }

    /// Finish: each interceptor reports (notes for the person; an exit code that overrides
    /// the agent's), in the order they were prepared.
    async fn finish(&mut self, held: &mut RunGuard<'_>, mut exit: Exit) -> Exit {
        let unmerged = self.floor_after_end(held).await;
        // Taken while the caches merge (their merge writes nothing in the workspace).
        let last = self.start_last_checkpoint();
        self.merge_caches(unmerged).await;
        self.last_checkpoint(last).await;
        // The watches' descriptor to the guardian: its last close waits for the kernel.
        if let (Some(g), Some(c)) = (held.guardian.as_mut(), self.gate.checkpoints.get()) {
            if let Some(fd) = c.take_watch() {
                g.hold(fd);
            }
        }
        // After the last checkpoint, whose view of the workspace tells what the tree wrote.
        self.keep_run_files_aside(held).await;
        // The directories the floor made for the agent that it left empty: the user did not
        // have them before the run.
        for dir in crate::floor::plan::made::remove_empty() {
            tracing::debug!("floor: removed {}, made empty for the run", dir.display());
        }
        if let Some(control) = held.control.as_mut() {
            if control.finish(&self.gate).await {
                exit = Exit::Wrapper;
            }
        }
        let answered: Vec<u64> = held.interceptors.iter().map(|i| i.answered()).collect();
        let total: u64 = answered.iter().sum();
        let connections = held.net.as_ref().map_or(0, |net| net.egress.decided());
        for (interceptor, own) in held.interceptors.iter_mut().zip(answered) {
            let end = End {
                shown: &self.shown,
                exit,
                require_hooks: self.cfg.require_hooks,
                answered_elsewhere: total - own,
                connections,
            };
            let report = interceptor.finish(&end).await;
            self.notes.extend(report.notes);
            exit = report.exit.unwrap_or(exit);
        }
        exit
    }
}

/// The run's own files: its executables and its run directory.
fn own_files(self_exe: &Path, held: &RunGuard<'_>) -> Vec<PathBuf> {
    vec![
        self_exe.to_owned(),
        self_exe.with_file_name("ahp-wrap-hook"),
        held.run_dir.path().to_owned(),
    ]
}

/// The executable hooks call: the small `ahp-wrap-hook` installed next to us when there is
/// one (it starts in a fraction of the time, which every tool call pays), else ourselves.
/// Both take `hook <framework> <hook>`.
pub(crate) fn hook_executable(self_exe: &Path) -> PathBuf {
    small_executable(self_exe).unwrap_or_else(|| self_exe.to_owned())
}

/// The small executable (`ahp-wrap-hook`) beside `self_exe`, when it is there.
pub(super) fn small_executable(self_exe: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let sibling = self_exe.with_file_name("ahp-wrap-hook");
    match sibling.metadata() {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Some(sibling),
        _ => None,
    }
}

/// A warning the first time a run meets an agent installed at a version its shim is not
/// proven on (read from its package, not by running it); remembered per executable and
/// version in the state directory, so that it is said once.
fn unproven_version(
    framework: &'static dyn crate::frameworks::Framework,
    program: &std::ffi::OsStr,
) -> Option<String> {
    let proven = framework.proven()?;
    let path = which::which(program).ok()?;
    let version = crate::frameworks::installed_version(framework, &path)?;
    if proven.contains(&version) {
        return None;
    }
    let key = format!("{} {version}", path.display());
    if let Some(dir) = crate::termlog::state_dir() {
        let seen = dir.join("unproven-agents");
        let known = std::fs::read_to_string(&seen).unwrap_or_default();
        if known.lines().any(|l| l == key) {
            return None;
        }
        let remembered = std::fs::create_dir_all(&dir).and_then(|()| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&seen)?;
            std::io::Write::write_all(&mut f, format!("{key}\n").as_bytes())
        });
        if let Err(e) = remembered {
            tracing::debug!("cannot remember {key} in {}: {e}", seen.display());
        }
    }
    Some(format!(
        "{} {version} is not the version ahp-wrap's {} shim is proven on ({proven}); it may \
         work (`ahp-wrap doctor` says more; said once for this version)",
        path.display(),
        framework.name()
    ))
}
