//! The kernel's part of a run's floor: what this kernel offers (asked ahead, on a thread),
//! the plan completed (`Plan::complete` in `crates/floor`: the mixed state files' copies,
//! the caches' overlays), the Landlock ruleset, namespaces and network side prepared from it
//! for the agent's process to apply to itself, and the proxy's variables.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(target_os = "linux")]
use super::container::ProcRefused;
#[cfg(target_os = "linux")]
use super::{credentials::injection, NetSide};
use super::{NoFloor, RunFloor};
use crate::floor::finished::Copies;
use crate::floor::hosts::HostRules;
use crate::floor::{self, Plan};
use crate::frameworks::AgentCommand;

/// What the kernel offers the floor, and its audit socket for Landlock's denials (opened
/// now: it reads only what comes after).
#[cfg(target_os = "linux")]
type Probed = (
    floor::Support,
    Result<floor::denials::Reader, floor::Unavailable>,
);

/// The kernel being asked, on a thread of its own while the run prepares (0.25 ms, most of
/// it the audit socket, off the way to the agent's start).
#[cfg(target_os = "linux")]
pub(in crate::run) type Probing = std::thread::JoinHandle<Probed>;

#[cfg(target_os = "linux")]
fn probe() -> Probed {
    let support = floor::probe();
    let reader = floor::denials::Reader::open(support.landlock_abi);
    (support, reader)
}

/// Starts asking the kernel what it offers the floor, unless the floor is off.
#[cfg(target_os = "linux")]
pub(in crate::run) fn probe_ahead(mode: floor::Mode) -> Option<Probing> {
    if mode == floor::Mode::Off {
        return None;
    }
    std::thread::Builder::new()
        .name("floor-probe".into())
        .spawn(probe)
        .ok()
}

#[cfg(target_os = "linux")]
pub(super) fn kernel(
    cmd: &mut AgentCommand,
    plan: Plan,
    (run_dir, layers): (&Path, Option<&Path>),
    (mut premade, probing): (Option<floor::NamespaceReceiver>, Option<Probing>),
    (rules, unix_allow, credentials): (HostRules, Vec<PathBuf>, floor::credentials::Credentials),
    control: &OsStr,
) -> Result<RunFloor, NoFloor> {
    use std::os::unix::ffi::OsStrExt;
    let (mut support, reader) = probing.and_then(|p| p.join().ok()).unwrap_or_else(probe);
    // A container's seccomp or AppArmor profile refuses what the kernel's settings allow.
    super::container::amend(&mut support);
    if let (Ok(()), Some(why)) = (&support.namespaces, &cmd.no_namespaces) {
        support.namespaces = Err(floor::Unavailable::ForTheAgent(why.clone()));
    }
    let mut report = support.report(&plan, floor::denials::said(&reader));
    super::container::name_secrets(&plan, &support, &mut report);
    if support.landlock_abi < 1 {
        return Ok(RunFloor {
            plan,
            report,
            confine: None,
            net: None,
            denials: None,
            copies: Copies::default(),
            layers: None,
            removed_env: Vec::new(),
            placeholders: Vec::new(),
            credential_notes: Vec::new(),
            lock_at_start: None,
            own_pids: None,
            started: std::time::SystemTime::now(),
            run_files: Vec::new(),
        });
    }
    // The plan completed: the mixed state files' copies and the caches' overlays (those the
    // mount namespace made ahead holds, when the agent's process joins it).
    let finished = plan.complete(
        floor::finished::Completion {
            support: &support,
            state: &run_dir.join("state"),
            layers,
            ahead: &mut |caches| premade.as_mut()?.overlays_for(caches),
        },
        &mut report,
    );
    let mut placeholders = Vec::new();
    // Without a network namespace of the tree's own, the proxy listens on this machine's
    // loopback, on a port the kernel picks.
    let own_proxy = match finished.plan().net.is_some() && support.net_without_namespace() {
        true => Some(
            std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).map_err(|e| {
                NoFloor::Failed(format!("the egress proxy's socket on loopback: {e}"))
            })?,
        ),
        false => None,
    };
    let own_port = own_proxy
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| a.port());
    let request = finished.plan().net.as_ref().map(|_| floor::NetRequest {
        proxy_port: own_port.unwrap_or_else(proxy_port),
        control: control.as_bytes().strip_prefix(b"@").map(<[u8]>::to_vec),
    });
    let (mut prepared, peer) =
        floor::Prepared::new(&finished, &support, run_dir, request.as_ref(), premade)
            .map_err(|e| NoFloor::Failed(crate::error_chain(&e)))?;
    let (plan, copies, layers) = finished.into_parts();
    if reader.is_ok() {
        prepared.log_denials();
    }
    // A PID namespace and a /proc of the tree's own, the small executable its init; where
    // the kernel refuses the /proc, the namespace alone, and only where it still keeps the
    // tree's signals in (container.rs).
    let refused = ProcRefused::of(super::container::here());
    let exe = std::env::current_exe().ok();
    let helper = exe
        .as_deref()
        .filter(|_| refused.is_none() || ProcRefused::pid_namespace(support.landlock_abi))
        .and_then(super::super::phases::small_executable);
    let own_pids = match helper {
        Some(h) => prepared
            .with_own_pids(&h)
            .map_err(|e| NoFloor::Failed(crate::error_chain(&e)))?,
        None => None,
    };
    if let (Some(refused), Ok(())) = (refused, &support.namespaces) {
        refused.say(&mut report);
    } else if own_pids.is_some() {
        report.enforced.push(
            "processes: the tree sees only its own (a PID namespace and a /proc of its own)".into(),
        );
    } else if support.namespaces.is_ok() {
        report.gaps.push(
            "processes: the tree sees every process of this machine (ahp-wrap-hook, the small \
             executable its PID namespace needs, is not beside ahp-wrap)"
                .into(),
        );
    }
    cmd.env.push((floor::ENV_FLOOR.into(), "1".into()));
    let net = match (peer, request) {
        (Some(peer), Some(request)) => {
            cmd.env
                .extend(proxy_env(request.proxy_port, rules.loopback()));
            // (The workspace is the plan's first writable root.)
            let workspace = plan.writable.first().cloned().unwrap_or_default();
            let injection = injection(credentials, cmd, (run_dir, &workspace))?;
            placeholders = injection
                .iter()
                .flat_map(|i| i.credentials.iter())
                .map(|c| (c.name.clone(), c.hosts.shown()))
                .collect();
            Some(NetSide {
                peer,
                rules,
                proxy_port: request.proxy_port,
                own_proxy,
                kernel_refuses_tcp: support.landlock_abi >= 4,
                unix_allow,
                injection,
            })
        }
        _ => {
            for c in credentials.iter() {
                report.gaps.push(format!(
                    "credential {}: not given to the agent (no egress proxy on this run to put it on its requests)",
                    c.name
                ));
            }
            None
        }
    };
    let prepared = Arc::new(prepared);
    Ok(RunFloor {
        plan,
        report,
        confine: Some(Arc::new(move || prepared.apply())),
        net,
        denials: reader.ok(),
        copies,
        layers,
        removed_env: Vec::new(),
        placeholders,
        credential_notes: Vec::new(),
        lock_at_start: None,
        own_pids,
        started: std::time::SystemTime::now(),
        run_files: Vec::new(),
    })
}

#[cfg(not(target_os = "linux"))]
pub(super) fn kernel(
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
        placeholders: Vec::new(),
        credential_notes: Vec::new(),
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
