//! The run's floor: the policy's `[floor]` made concrete for this agent, what this kernel
//! enforces of it (said before the agent starts), and the step the agent's process applies
//! to itself before `exec`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::statefiles::Copies;
use super::{Run, RunGuard};
use crate::child::Confine;
use crate::config::Config;
use crate::exit::{Exit, Failure};
use crate::floor::hosts::HostRules;
use crate::floor::{self, Context, Plan, Report};
use crate::frameworks::AgentCommand;
use crate::intercept::egress::Egress;
use crate::protocol::EventType;

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
    pub _layers: Option<floor::caches::Layers>,
    /// The credentials taken out of the agent's environment (names).
    pub removed_env: Vec<String>,
}

/// The wrapper's side of the network part, before the agent runs.
pub(super) struct NetSide {
    #[cfg(target_os = "linux")]
    peer: floor::NetPeer,
    rules: HostRules,
    proxy_port: u16,
    /// Path sockets the tree may reach although it did not bind them.
    unix_allow: Vec<PathBuf>,
}

/// The network part while the agent runs: the egress proxy, the connect bridge's thread
/// and the task that audits what it refuses. Its tasks end when it is dropped.
pub(super) struct NetRunning {
    pub egress: Arc<Egress>,
    #[cfg(target_os = "linux")]
    pub counts: Arc<floor::bridge::Counts>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for NetRunning {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Why the run has no floor, or cannot start.
pub(super) enum NoFloor {
    /// `--floor off`, or `enabled = false` in the policy: said and audited.
    Off(&'static str),
    /// The floor cannot be set up: the run must not start.
    Failed(String),
}

/// Prepares the floor for `cmd` (after every interceptor amended it), or says why there is
/// none. `ahead` brings the namespaces made at start-up; `protected` are the wrapper's own
/// files; `control` the control socket's address (an abstract one must exist in the agent's
/// network namespace too).
pub(super) fn prepare(
    cfg: &Config,
    cmd: &mut AgentCommand,
    run_dir: &Path,
    #[cfg(target_os = "linux")] ahead: Option<floor::Ahead>,
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
    let mut plan = Plan::new(&spec, &cx);
    // The caches' layers lie in the user's state directory, out of the tree's reach (bound
    // read-only where the state directory lies beneath a writable root). Made only when a
    // cache needs one.
    let layers = match plan.caches.is_empty() {
        true => None,
        false => caches_dir().filter(|d| make_private(d).is_ok()),
    };
    if let Some(dir) = &layers {
        if plan.writable.iter().any(|w| dir.starts_with(w)) {
            plan.read_only.push(dir.clone());
        }
    }
    let layers = layers.and_then(|d| Some(d.join(run_dir.file_name()?)));
    let owner = crate::frameworks::floor_owner(cfg.framework, Path::new(&cfg.program));
    if spec.env.removes() {
        let keep = owner.own_env(&cmd.args).into_iter();
        let keep = keep.chain(spec.env.keep.iter().flatten().cloned());
        let keep = keep.chain(cfg.keep_env.iter().cloned());
        cmd.remove_env = floor::secrets::of_this_environment(keep).1;
    }
    let rules = HostRules::new(&spec.net, owner.model_hosts())
        .map_err(|e| NoFloor::Failed(format!("the policy's [floor.net]: {e}")))?;
    // The run directory holds the wrapper's own sockets when it cannot use abstract ones.
    let home = home_dir();
    let mut unix_allow = spec.unix.allow(&home, &cfg.workspace);
    unix_allow.push(run_dir.to_owned());
    #[cfg(target_os = "linux")]
    let floor = kernel(
        cmd,
        plan,
        (run_dir, layers.as_deref()),
        ahead,
        (rules, unix_allow),
        control,
    );
    #[cfg(not(target_os = "linux"))]
    let floor = kernel(cmd, plan, run_dir, (rules, unix_allow), control);
    floor.map(|f| RunFloor {
        removed_env: cmd.remove_env.clone(),
        ..f
    })
}

#[cfg(target_os = "linux")]
fn kernel(
    cmd: &mut AgentCommand,
    mut plan: Plan,
    (run_dir, layers): (&Path, Option<&Path>),
    ahead: Option<floor::Ahead>,
    (rules, unix_allow): (HostRules, Vec<PathBuf>),
    control: &OsStr,
) -> Result<RunFloor, NoFloor> {
    use std::os::unix::ffi::OsStrExt;
    let support = floor::Support::probe();
    let reader = floor::denials::Reader::open(support.landlock_abi);
    let mut report = support.report(&plan, &reader);
    if support.landlock_abi < 1 {
        return Ok(RunFloor {
            plan,
            report,
            confine: None,
            net: None,
            denials: None,
            copies: Copies::default(),
            _layers: None,
            removed_env: Vec::new(),
        });
    }
    // A copy can be bound only in a mount namespace of the tree's own.
    let copies = match support.namespaces {
        Ok(()) if !plan.mixed.is_empty() => {
            let (copies, problems) =
                Copies::make(&plan.mixed, &plan.writable, &run_dir.join("state"));
            report.gaps.extend(problems);
            plan.copies = copies.binds();
            copies
        }
        _ => Copies::default(),
    };
    // A cache is an overlay only in a mount namespace of the tree's own.
    let mut layers_held = None;
    if support.namespaces.is_ok() && !plan.caches.is_empty() {
        let made = floor::caches::possible().and_then(|()| {
            let dir = layers.ok_or("no state directory for the caches' layers")?;
            floor::caches::make(&plan.caches, dir)
                .map_err(|e| format!("the caches' layers in {}: {e}", dir.display()))
        });
        match made {
            Ok((held, overlays, gaps)) => {
                layers_held = Some(held);
                report.gaps.extend(gaps);
                plan.overlays = overlays;
            }
            // Said by the report already when the kernel cannot.
            Err(why) if floor::caches::possible().is_err() => tracing::debug!("floor: {why}"),
            Err(why) => report.gaps.push(format!("caches: written in place: {why}")),
        }
    }
    let request = plan.net.as_ref().map(|_| floor::NetRequest {
        proxy_port: proxy_port(),
        control: control.as_bytes().strip_prefix(b"@").map(<[u8]>::to_vec),
    });
    let (mut prepared, peer) =
        floor::Prepared::new(&plan, &support, run_dir, request.as_ref(), ahead)
            .map_err(|e| NoFloor::Failed(crate::error_chain(&e)))?;
    if reader.is_ok() {
        prepared.log_denials();
    }
    cmd.env.push((floor::ENV_FLOOR.into(), "1".into()));
    let net = match (peer, request) {
        (Some(peer), Some(request)) => {
            cmd.env
                .extend(proxy_env(request.proxy_port, rules.loopback()));
            Some(NetSide {
                peer,
                rules,
                proxy_port: request.proxy_port,
                unix_allow,
            })
        }
        _ => None,
    };
    let prepared = Arc::new(prepared);
    Ok(RunFloor {
        plan,
        report,
        confine: Some(Arc::new(move || prepared.apply())),
        net,
        denials: reader.ok(),
        copies,
        _layers: layers_held,
        removed_env: Vec::new(),
    })
}

#[cfg(not(target_os = "linux"))]
fn kernel(
    _cmd: &mut AgentCommand,
    plan: Plan,
    _run_dir: &Path,
    _rules: (HostRules, Vec<PathBuf>),
    _control: &OsStr,
) -> Result<RunFloor, NoFloor> {
    let report = floor::report(&plan);
    Ok(RunFloor {
        plan,
        report,
        confine: None,
        net: None,
        copies: Copies::default(),
        removed_env: Vec::new(),
    })
}

/// A port for the proxy in the agent's own network namespace (nothing else listens there
/// yet; a high one, out of the way of the dev servers the agent may start).
fn proxy_port() -> u16 {
    let r = crate::random_hex(2);
    40000 + (u16::from_str_radix(&r, 16).unwrap_or(0) % 20000)
}

/// The variables that send the agent's tree's traffic through the proxy (both spellings, as
/// programs read one or the other); loopback goes direct when it may.
fn proxy_env(port: u16, loopback: bool) -> Vec<(OsString, OsString)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let direct = if loopback {
        "localhost,127.0.0.1,::1"
    } else {
        ""
    };
    let mut env = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", http.as_str()),
        ("HTTPS_PROXY", http.as_str()),
        ("ALL_PROXY", socks.as_str()),
        ("NO_PROXY", direct),
    ] {
        env.push((name.into(), value.into()));
        env.push((name.to_ascii_lowercase().into(), value.into()));
    }
    // Node's own fetch reads them only when told to (Node 24 and later).
    env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    env
}

impl NetSide {
    /// Once the agent runs: takes the sockets it made in its namespace, starts the proxy on
    /// one and the connect bridge on another; returns the control socket to serve there too.
    #[cfg(target_os = "linux")]
    pub(super) fn start(
        self,
        gate: Arc<crate::gate::Gate>,
        agent: i32,
    ) -> std::io::Result<(NetRunning, Option<std::os::unix::net::UnixListener>)> {
        let received = self.peer.receive()?;
        received.proxy.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(received.proxy)?;
        let askers = floor::bridge::Askers::default();
        let egress = Arc::new(Egress::new(gate, self.rules.clone(), askers.clone()));
        egress.agent_is(agent);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let counts = Arc::new(floor::bridge::Counts::default());
        let bridge = floor::bridge::Bridge {
            loopback: self.rules.loopback(),
            proxy_port: self.proxy_port,
            askers,
            counts: counts.clone(),
            unix_allow: self.unix_allow.clone(),
            // Called on the bridge's thread while the caller still waits in connect(2): its
            // command line is read now, before a caller that gives up at once has exited.
            report: Box::new(move |r| {
                let me = std::process::id() as i32;
                let chain = crate::child::procfs::ancestry(r.pid, agent, me);
                let _ = tx.send((r, chain));
            }),
        };
        bridge.spawn(received.notify)?;
        let audit = {
            let egress = egress.clone();
            tokio::spawn(async move {
                while let Some((r, chain)) = rx.recv().await {
                    egress.direct_refused(r, chain).await;
                }
            })
        };
        let serve = tokio::spawn(egress.clone().serve(listener));
        Ok((
            NetRunning {
                egress,
                counts,
                tasks: vec![serve, audit],
            },
            received.control,
        ))
    }
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
            self.say_removed_env(&floor.removed_env).await;
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
            Some(Ok(floor)) if floor.report.complete() => {
                tracing::debug!("floor: {}", floor.report.enforced.join("; "));
                return Ok(());
            }
            Some(Ok(floor)) => {
                let gaps = floor.report.gaps.join("; ");
                if self.cfg.require_floor {
                    let m = format!("refusing to start (--require-floor): the floor is not complete here: {gaps}");
                    let payload = json!({"source": "floor", "message": m});
                    self.gate.say(EventType::Error, payload).await;
                    return Err(Failure::new(Exit::Wrapper, m));
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

    /// The kernel's refusals, counted (each kind was audited as it came); the network's
    /// count; and protected paths that did not exist when the agent started (nothing could be
    /// bound over them) and exist now: said and audited.
    pub(super) async fn floor_after_end(&mut self, held: &mut RunGuard<'_>) {
        #[cfg(target_os = "linux")]
        if let Some(watching) = held.denials.take() {
            let refusals = watching.finish().await;
            if refusals.total > 0 {
                let shown: Vec<String> = refusals.kept.iter().take(5).map(|d| d.line()).collect();
                let more = refusals.total.saturating_sub(shown.len() as u64);
                let m = format!(
                    "floor: the kernel refused {} act(s) of the agent's tree: {}{} (each kind \
                     is in the audit log)",
                    refusals.total,
                    shown.join("; "),
                    if more > 0 {
                        format!("; and {more} more")
                    } else {
                        String::new()
                    }
                );
                tracing::info!("{m}");
                self.notes.push(m);
            }
        }
        if let Some(net) = &held.net {
            let refused = net
                .egress
                .refused
                .load(std::sync::atomic::Ordering::Relaxed);
            let allowed = net
                .egress
                .allowed
                .load(std::sync::atomic::Ordering::Relaxed);
            #[cfg(target_os = "linux")]
            let bridged = net
                .counts
                .bridged
                .load(std::sync::atomic::Ordering::Relaxed);
            #[cfg(not(target_os = "linux"))]
            let bridged = 0;
            let m = format!(
                "network floor: {allowed} connection(s) through the proxy, {bridged} to this \
                 machine's loopback, {refused} refused (each refusal is in the audit log)"
            );
            tracing::info!("{m}");
            if refused > 0 {
                self.notes.push(m);
            }
        }
        let Some(Ok(floor)) = &held.floor else {
            return;
        };
        let workspace = floor.plan.writable.first().cloned().unwrap_or_default();
        let outcomes = floor.copies.finish(
            &super::statefiles::project_names(&workspace),
            super::statefiles::quarantine_dir().as_deref(),
        );
        for outcome in outcomes {
            self.say_state_file(outcome).await;
        }
        #[cfg(target_os = "linux")]
        for overlay in floor.plan.overlays.clone() {
            self.merge_cache(overlay).await;
        }
        let appeared = floor.plan.appeared();
        if appeared.is_empty() {
            return;
        }
        let quarantine = super::statefiles::quarantine_dir();
        for path in appeared {
            self.move_aside(path, quarantine.as_deref()).await;
        }
    }

    /// Moves a protected path the agent's tree created (absent at the start, so the floor
    /// could not bind it) into the quarantine, and says so at exit and in the audit log.
    async fn move_aside(&mut self, path: &Path, quarantine: Option<&Path>) {
        use crate::statefile::aside;
        let shown = path.display();
        let moved = quarantine
            .ok_or_else(|| "no state directory for a quarantine".to_owned())
            .and_then(|q| aside::move_aside(path, q).map_err(|e| e.to_string()));
        let (m, record) = match &moved {
            Ok(record) => (
                format!(
                    "floor: {shown} was created during the run, where a later session would \
                     obey it; moved aside (to put it back: ahp-wrap restore {})",
                    record.display()
                ),
                Some(record.display().to_string()),
            ),
            Err(why) => (
                format!(
                    "floor: {shown} was created during the run, where a later session would \
                     obey it, and is left in place: it could not be moved aside ({why})"
                ),
                None,
            ),
        };
        self.notes.push(format!("warning: {m}"));
        let payload = json!({
            "source": "floor",
            "message": m,
            "path": shown.to_string(),
            "record": record,
        });
        self.gate.say(EventType::Error, payload).await;
    }
}

impl Run<'_> {
    /// Adds what the tree added to a cache; keeps aside (said at exit, audited) what it
    /// changed there.
    #[cfg(target_os = "linux")]
    async fn merge_cache(&mut self, overlay: floor::plan::Overlay) {
        let quarantine = super::statefiles::quarantine_dir();
        let cache = overlay.cache.clone();
        let merged = tokio::task::spawn_blocking(move || {
            floor::caches::merge(&overlay, quarantine.as_deref())
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|r| r);
        let shown = cache.display();
        let merged = match merged {
            Ok(m) => m,
            Err(e) => {
                let m = format!("floor: what the tree added to the cache {shown} is lost: {e}");
                self.notes.push(format!("warning: {m}"));
                let payload = json!({"source": "floor", "message": m, "cache": shown.to_string()});
                self.gate.say(EventType::Error, payload).await;
                return;
            }
        };
        tracing::info!(
            "floor: {} new entries added to the cache {shown}",
            merged.added
        );
        if merged.kept.is_empty() && merged.lost.is_empty() {
            return;
        }
        let changed: Vec<String> = merged
            .kept
            .iter()
            .map(|c| {
                let how = if c.removed { "removed" } else { "changed" };
                format!("{} ({how})", c.path.display())
            })
            .collect();
        let shown_changes: Vec<&str> = changed.iter().take(3).map(String::as_str).collect();
        let more = changed.len().saturating_sub(shown_changes.len());
        let mut m = format!(
            "floor: the tree changed {} entr{} the cache {shown} had before the run: {}{}; \
             not applied",
            changed.len(),
            if changed.len() == 1 { "y" } else { "ies" },
            shown_changes.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
        );
        if let Some(record) = &merged.record {
            m.push_str(&format!(
                " (kept aside; to apply: ahp-wrap restore {})",
                record.display()
            ));
        }
        if !merged.lost.is_empty() {
            m.push_str(&format!("; lost: {}", merged.lost.join("; ")));
        }
        self.notes.push(m.clone());
        let payload = json!({
            "source": "floor",
            "message": m,
            "cache": shown.to_string(),
            "added": merged.added,
            "changed": changed,
            "record": merged.record,
        });
        self.gate.say(EventType::Error, payload).await;
    }

    /// Says which credentials were taken out of the agent's environment (names, never
    /// values): on stderr unless quiet, and in the audit log.
    async fn say_removed_env(&mut self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let m = format!(
            "floor: credentials removed from the agent's environment: {} (--keep-env NAME, or \
             [floor.env] keep in the policy, leaves one in place)",
            names.join(", ")
        );
        if !self.cfg.quiet {
            eprintln!("ahp-wrap: {m}");
        }
        tracing::info!("{m}");
        let payload = json!({"source": "floor", "message": m, "removed_env": names});
        self.gate.say(EventType::Error, payload).await;
    }

    /// Says what became of the agent's changes to one mixed state file: in the log when all
    /// were merged; at exit and in the audit log when some were kept aside or could not be
    /// merged (the person's choices must not vanish without a word).
    async fn say_state_file(&mut self, o: super::statefiles::Outcome) {
        let file = o.file.display().to_string();
        if !o.merged.is_empty() {
            tracing::info!(
                "floor: merged the agent's changes to its own keys in {file}: {}",
                o.merged.join(", ")
            );
        }
        let restore = |q: &Path| format!("ahp-wrap restore {}", q.display());
        let m = match (&o.failed, o.kept.is_empty()) {
            (Some(why), _) => format!(
                "floor: the agent's changes to {file} could not be merged ({why}); {}",
                match &o.quarantine {
                    Some(q) => format!("its copy is kept at {}", q.display()),
                    None => "its copy is lost (no state directory for a quarantine)".to_owned(),
                }
            ),
            (None, true) => return,
            (None, false) => format!(
                "floor: {} change(s) the agent made to instructions in {file} {}: {}; {}",
                o.kept.len(),
                if o.in_place {
                    "were undone at the end of the run"
                } else {
                    "were not merged"
                },
                o.kept.join(", "),
                match &o.quarantine {
                    Some(q) => format!("kept at {} (to apply them: {})", q.display(), restore(q)),
                    None => "not kept (no state directory for a quarantine)".to_owned(),
                }
            ),
        };
        self.notes.push(format!("warning: {m}"));
        let payload = json!({
            "source": "floor",
            "message": m,
            "file": file,
            "merged": o.merged,
            "kept": o.kept,
            "quarantine": o.quarantine,
        });
        self.gate.say(EventType::Error, payload).await;
    }
}

/// What a run of `program` under `framework` in `workspace` starts its floor from: the home
/// directory, the agent's own files (from its shim), `$TMPDIR` and the caches the
/// environment names. Nothing is created (the caller sets `create_missing`).
/// Where the caches' layers lie: `caches/` in the user's state directory for ahp-wrap.
fn caches_dir() -> Option<PathBuf> {
    crate::termlog::state_dir().map(|d| d.join("caches"))
}

/// Makes `dir` (and its parents) when missing, private.
fn make_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

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
