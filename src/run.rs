//! One wrapped run, start to finish: harness, control socket, agent, events, exit code.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::ask::Asker;
use crate::audit::{load_key, AuditLog, KEY_ENV};
use crate::child::guardian::Guardian;
use crate::child::procfs::Sampler;
use crate::child::signals::Forwarder;
use crate::child::tree::Tracker;
use crate::child::{self, GroupPolicy};
use crate::client::{Client, ClientConfig};
use crate::config::{Config, ENV_DEPTH, ENV_SESSION, SECRET_ENV};
use crate::control::{ControlServer, RunDir, ENV_BUDGET, ENV_PARENT_PID, ENV_SOCKET, ENV_TOKEN};
use crate::decide::{Decider, Embedded, FailMode, Harness};
use crate::frameworks::{AgentCommand, RunContext};
use crate::policy::Policy;
use crate::policy::Protected;
use crate::protocol::EventType;
use crate::session::{Auditor, Session};

/// Exit code when the wrapper itself fails or refuses to run (as `env` and `timeout` do).
pub const EXIT_WRAPPER: u8 = 125;
/// Exit code of a `--require-hooks` run in which the agent never called a hook.
pub const EXIT_NO_HOOKS: u8 = 122;
/// Extra time a shim waits beyond the parent's own deadline, so the parent answers first.
const HOOK_MARGIN: Duration = Duration::from_secs(2);

/// Runs the agent under the harness; returns our exit code.
pub fn run(cfg: Config) -> u8 {
    // Fork the guardian while we are still single-threaded.
    let guardian = match Guardian::spawn() {
        Ok(g) => Some(g),
        Err(e) => {
            tracing::warn!("no guardian process ({e}): the agent may outlive a killed wrapper");
            None
        }
    };
    // Orphans of the agent's tree come back to us, so that none outlives the run.
    match child::tree::become_subreaper() {
        Ok(()) => tracing::debug!("the wrapper is a child subreaper"),
        Err(e) => tracing::debug!("the wrapper is no child subreaper ({e})"),
    }
    let policy = GroupPolicy::detect();
    let forwarder = match Forwarder::install(policy) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ahp-wrap: cannot install signal handlers: {e}");
            return EXIT_WRAPPER;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ahp-wrap: cannot start the runtime: {e}");
            return EXIT_WRAPPER;
        }
    };
    runtime.block_on(supervise(cfg, policy, forwarder, guardian))
}

async fn supervise(
    cfg: Config,
    policy: GroupPolicy,
    forwarder: Forwarder,
    mut guardian: Option<Guardian>,
) -> u8 {
    let started = Instant::now();
    let session_id = uuid::Uuid::new_v4().to_string();
    let agent_id = format!("{}-{}", cfg.framework.name(), uuid::Uuid::new_v4().simple());
    let asker = match policy {
        GroupPolicy::Foreground => Asker::for_terminal(cfg.ask_timeout),
        GroupPolicy::OwnGroup => None,
    };
    let interactive = asker.is_some();

    // The harness, and what it negotiated.
    let (harness, negotiated) = match &cfg.harness {
        None => {
            let embedded = match &cfg.policy {
                Some(file) => match Policy::load(file) {
                    Ok(p) => {
                        let p = match std::env::current_dir() {
                            Ok(ws) => p.with_workspace(ws),
                            Err(_) => p,
                        };
                        Embedded::new(p, cfg.mode)
                    }
                    Err(e) => {
                        eprintln!("ahp-wrap: {}", crate::error_chain(&e));
                        return EXIT_WRAPPER;
                    }
                },
                None => Embedded::default_policy(std::env::current_dir().ok(), cfg.mode),
            };
            (Harness::Embedded(Arc::new(embedded)), None)
        }
        Some(spec) => {
            let client = Client::start(
                spec.clone(),
                ClientConfig {
                    link: cfg.link.clone(),
                    session_id: session_id.clone(),
                    agent_id: agent_id.clone(),
                    framework: cfg.framework.name().to_owned(),
                    framework_version: env!("CARGO_PKG_VERSION").to_owned(),
                    batch_window: Duration::from_millis(20),
                },
            );
            match client.wait_ready(cfg.timeout).await {
                Ok(n) => (Harness::Remote(client), Some(n)),
                Err(why) => {
                    eprintln!(
                        "ahp-wrap: warning: the harness {} is not ready ({why}); blocking events follow the fail mode ({}) until it is",
                        spec.describe(),
                        match cfg.fail_mode {
                            FailMode::Closed => "closed",
                            FailMode::Open => "open",
                        }
                    );
                    (Harness::Remote(client), None)
                }
            }
        }
    };
    let timeout = match negotiated.as_ref().and_then(|n| n.timeout_ms) {
        Some(ms) => cfg.timeout.min(Duration::from_millis(ms)),
        None => cfg.timeout,
    };
    let (max_depth, depth_source) = match negotiated.as_ref().and_then(|n| n.max_depth) {
        Some(d) => (d, "the harness's max_depth"),
        None => (cfg.max_depth, "--max-depth"),
    };

    let audit = match open_audit(cfg.audit_log.as_deref(), cfg.audit_key_file.as_deref()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ahp-wrap: {e}");
            return EXIT_WRAPPER;
        }
    };
    let session = Arc::new(Session {
        session_id: session_id.clone(),
        agent_id,
        depth: cfg.depth,
        parent_session: cfg.parent_session.clone(),
        decider: Decider {
            harness: harness.clone(),
            fail_mode: cfg.fail_mode,
            timeout,
            asker,
        },
        audit,
        interactive,
        events: Default::default(),
        hooks_called: Default::default(),
        framework_session: Default::default(),
    });
    // What the person must read after the agent's screen is gone (see `report`).
    let notes = std::cell::RefCell::new(Vec::<String>::new());
    let finish = |code: u8| {
        let session = session.clone();
        let harness = harness.clone();
        let cfg = &cfg;
        let notes = &notes;
        async move {
            if let Harness::Remote(client) = &harness {
                client.close(Duration::from_secs(2)).await;
            }
            let notes = notes.borrow().clone();
            crate::report::report(cfg, &session.audit, &notes).await;
            code
        }
    };

    let shown = cfg.program.to_string_lossy().into_owned();
    if cfg.depth > max_depth {
        let message = format!(
            "refusing to start {shown}: it would run at sub-agent depth {}, past {depth_source} {max_depth}",
            cfg.depth
        );
        eprintln!("ahp-wrap: {message}");
        let error = session.event(
            EventType::Error,
            json!({"source": "wrapper", "message": message}),
            Map::new(),
        );
        session.notify(error, None).await;
        return finish(EXIT_WRAPPER).await;
    }

    // The control socket and the agent's command line.
    let run_dir = match RunDir::create() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ahp-wrap: cannot create a private run directory: {e}");
            return finish(EXIT_WRAPPER).await;
        }
    };
    if let Some(g) = guardian.as_mut() {
        g.clean_up(run_dir.path());
        g.mark(&format!("{ENV_SESSION}={session_id}"));
    }
    let control = match ControlServer::bind(&run_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ahp-wrap: cannot listen on the control socket: {e}");
            return finish(EXIT_WRAPPER).await;
        }
    };
    let ask_budget = if interactive {
        cfg.ask_timeout
    } else {
        Duration::ZERO
    };
    let hook_budget = timeout + ask_budget + HOOK_MARGIN;
    let self_exe = std::env::current_exe().unwrap_or_else(|_| "ahp-wrap".into());
    let hook_exe = hook_executable(&self_exe);
    if let Harness::Embedded(e) = &harness {
        let pids =
            std::iter::once(std::process::id()).chain(guardian.as_ref().map(|g| g.pid() as u32));
        e.protect(Protected::new(
            [
                self_exe.clone(),
                self_exe.with_file_name("ahp-wrap-hook"),
                run_dir.path().to_owned(),
            ],
            pids,
        ));
    }
    let mut cmd = AgentCommand {
        program: cfg.program.clone(),
        args: cfg.args.clone(),
        env: Vec::new(),
        expect_hook: None,
        warnings: Vec::new(),
    };
    let run_cx = RunContext {
        self_exe: hook_exe.clone(),
        run_dir: run_dir.path().to_owned(),
        hook_budget_ms: hook_budget.as_millis() as u64,
        interactive,
    };
    if let Err(e) = cfg.framework.prepare(&run_cx, &mut cmd) {
        eprintln!("ahp-wrap: {e}");
        return finish(EXIT_WRAPPER).await;
    }
    // Said now, before the agent may take the screen, and again at exit.
    for w in &cmd.warnings {
        eprintln!("ahp-wrap: warning: {w}");
        notes.borrow_mut().push(format!("warning: {w}"));
    }
    if cfg.framework.name() == "generic" {
        eprintln!("ahp-wrap: {}", crate::report::generic_notice(&shown));
    }
    let log = crate::termlog::sink();
    if let (true, Some(path)) = (log.default_file, &log.path) {
        eprintln!(
            "ahp-wrap: the terminal is the agent's: ahp-wrap's log goes to {} (warnings are repeated at exit)",
            path.display()
        );
    }
    let env = |k: &str, v: &dyn AsRef<std::ffi::OsStr>| (OsString::from(k), v.as_ref().to_owned());
    let mut our_env = vec![
        env(ENV_SOCKET, &control.address),
        env(ENV_PARENT_PID, &std::process::id().to_string()),
        env(ENV_TOKEN, &control.token),
        env(ENV_BUDGET, &hook_budget.as_millis().to_string()),
        env(ENV_DEPTH, &cfg.depth.to_string()),
        env(ENV_SESSION, &session_id),
        env("AHP_WRAP_FRAMEWORK", &cfg.framework.name()),
        env("AHP_WRAP_BIN", &self_exe),
        env("AHP_WRAP_HOOK_BIN", &hook_exe),
    ];
    our_env.append(&mut cmd.env);
    cmd.env = our_env;

    let agent_slot = control.agent_slot();
    let watched = control.watched();
    let mut server = tokio::spawn(control.serve(session.clone()));

    let guardian_fd = guardian.as_ref().map(Guardian::fd);
    let cgroup = child::cgroup::Cgroup::create()
        .inspect_err(|e| tracing::debug!("no cgroup for the agent: {e}"))
        .ok();
    let procs = cgroup.as_ref().map(|c| c.procs_path());
    let agent = match child::spawn(&cmd, policy, &SECRET_ENV, guardian_fd, procs) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ahp-wrap: {e}");
            let code = e.exit_code();
            let error = session.event(
                EventType::Error,
                json!({"source": "agent", "message": e.to_string()}),
                Map::new(),
            );
            session.notify(error, None).await;
            let end = session.event(
                EventType::SessionEnd,
                json!({"exit_code": code, "reason": "spawn_failed"}),
                Map::new(),
            );
            session.notify(end, None).await;
            server.abort();
            if let Some(g) = guardian {
                g.release();
            }
            return finish(code).await;
        }
    };
    let child::Agent { mut child, pid, .. } = agent;
    let target = match policy {
        GroupPolicy::Foreground => pid,
        GroupPolicy::OwnGroup => -pid,
    };
    forwarder.set_target(target);
    agent_slot.set(pid);
    if let Some(g) = guardian.as_mut() {
        g.watch(target);
    }

    let mut start_payload = json!({
        "framework": cfg.framework.name(),
        "command": std::iter::once(&cfg.program).chain(&cfg.args).map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "pid": pid,
        "cwd": std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),
        "interactive": interactive,
    });
    if let Some(parent) = &cfg.parent_session {
        start_payload["parent_session_id"] = Value::String(parent.clone());
    }
    let start_event = session.event(EventType::SessionStart, start_payload, Map::new());
    session.notify(start_event, None).await;

    let mut tree = Tracker::new(pid, guardian.as_ref().and_then(Guardian::link), cgroup);
    let mut tree_tick = tokio::time::interval_at(
        tokio::time::Instant::now() + child::tree::TICK,
        child::tree::TICK,
    );
    let mut sampler = Sampler::new(pid);
    let beat = cfg
        .heartbeat
        .unwrap_or(Duration::from_secs(3600 * 24 * 365));
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    let (mut taken_over, mut server_done) = (false, false);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tree_tick.tick() => tree.tick(),
            // Only a path socket can be taken over (see control::endpoint).
            taken = &mut server, if !server_done => {
                server_done = true;
                if let Ok(taken) = taken {
                    taken_over = true;
                    control_taken_over(&session, &taken).await;
                    tree.end(child::tree::LEFTOVER_GRACE);
                }
            }
            _ = heartbeat.tick(), if cfg.heartbeat.is_some() => {
                let s = sampler.sample();
                let mut payload = json!({
                    "uptime_ms": s.uptime_ms,
                    "total_events_processed": session.events_seen(),
                    "current_state": "running",
                });
                if let Some(cpu) = s.cpu_percent {
                    payload["cpu_percent"] = json!(cpu);
                }
                if let Some(mem) = s.memory_bytes {
                    payload["memory_bytes"] = json!(mem);
                }
                let event = session.event(EventType::Heartbeat, payload, Map::new());
                session.notify(event, None).await;
            }
        }
    };
    forwarder.clear_target();
    if let Some(Err(taken)) = watched.filter(|_| !taken_over).map(|w| w.check()) {
        control_taken_over(&session, &taken).await;
        taken_over = true;
    }
    let left = tree.end(child::tree::LEFTOVER_GRACE);
    if left > 0 {
        tracing::debug!("ended {left} process(es) the agent left behind");
    }
    if let Some(g) = guardian {
        g.release();
    }
    server.abort();

    let code = match status {
        Ok(_) if taken_over => EXIT_WRAPPER,
        Ok(status) => {
            let code = child::exit_code(status);
            if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
                let error = session.event(
                    EventType::Error,
                    json!({"source": "agent", "message": format!("the agent was killed by signal {sig}"), "signal": sig}),
                    Map::new(),
                );
                session.notify(error, None).await;
            }
            code
        }
        Err(e) => {
            eprintln!("ahp-wrap: lost track of the agent: {e}");
            EXIT_WRAPPER
        }
    };
    if let Some(hook) = cmd.expect_hook.as_deref() {
        unsupervised_warning(&session, &shown, cfg.framework.name(), hook, code).await;
    }
    if let Some(note) = crate::report::resume_note(&session, &cfg) {
        notes.borrow_mut().push(note);
    }
    let code = match crate::report::no_hooks(&session, &cfg, &shown, code).await {
        Some(note) => {
            notes.borrow_mut().push(note);
            if cfg.require_hooks {
                EXIT_NO_HOOKS
            } else {
                code
            }
        }
        None => code,
    };
    let end = session.event(
        EventType::SessionEnd,
        json!({
            "exit_code": code,
            "duration_ms": started.elapsed().as_millis() as u64,
            "total_events_processed": session.events_seen(),
        }),
        Map::new(),
    );
    session.notify(end, None).await;
    drop(run_dir);
    finish(code).await
}

/// Says loudly (on stderr, to the harness and in the audit) that the control socket was
/// removed or replaced: the agent's hooks can no longer reach us, so the run must end.
async fn control_taken_over(session: &Session, taken: &crate::control::TakenOver) {
    eprintln!("ahp-wrap: ERROR: {taken}");
    let error = session.event(
        EventType::Error,
        json!({"source": "wrapper", "message": taken.to_string(), "control_socket": taken.path}),
        Map::new(),
    );
    session.notify(error, None).await;
}

/// Says loudly (on stderr, to the harness and in the audit) when the agent never called
/// the hook its framework expects in every session: then the injected hooks did not run
/// (the agent changed how it accepts them, say), and whatever it did was not supervised.
async fn unsupervised_warning(
    session: &Session,
    shown: &str,
    framework: &str,
    hook: &str,
    code: u8,
) {
    if session.hook_called(hook) {
        return;
    }
    let message = format!(
        "{shown} exited (code {code}) without ever calling ahp-wrap's {hook} hook: if it ran \
         a session, the injected hooks did not run and NOTHING it did was supervised \
         (see shims/{framework}/README.md)"
    );
    eprintln!("ahp-wrap: WARNING: {message}");
    let error = session.event(
        EventType::Error,
        json!({"source": "wrapper", "message": message, "expected_hook": hook}),
        Map::new(),
    );
    session.notify(error, None).await;
}

/// The executable hooks call: the small `ahp-wrap-hook` installed next to us when there is
/// one (it starts in a fraction of the time, which every tool call pays), else ourselves.
/// Both take `hook <framework> <hook>`.
fn hook_executable(self_exe: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let sibling = self_exe.with_file_name("ahp-wrap-hook");
    match sibling.metadata() {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => sibling,
        _ => self_exe.to_owned(),
    }
}

/// Opens the audit log (or a file-less one that only keeps the summary).
pub fn open_audit(
    path: Option<&std::path::Path>,
    key_file: Option<&std::path::Path>,
) -> Result<Auditor, String> {
    let Some(path) = path else {
        return Ok(Auditor::default());
    };
    let key =
        load_key(key_file, std::env::var(KEY_ENV).ok()).map_err(|e| crate::error_chain(&e))?;
    let heads = crate::audit::head::default_dir();
    let log = AuditLog::open_with_heads(path, key, heads.as_deref())
        .map_err(|e| crate::error_chain(&e))?;
    Ok(Auditor::new(log))
}
