//! The floor inside a container: what a container engine's defaults refuse the floor's
//! namespaces, found before the agent starts (and by `doctor` and `policy floor`), said with
//! what gives them back (docs/floor.md, "In a container"). Without the namespaces the run keeps
//! what needs none of them (Landlock's file rules and its signal scope, `no_new_privs`), and
//! names the secrets no mount can hide.
//!
//! The kernel's own reading (`floor::Support`) judges the namespaces without trying, from the
//! settings a host restricts them with; an engine restricts them otherwise: its seccomp
//! profile refuses `unshare(2)` and `mount(2)` to a container without `CAP_SYS_ADMIN` (Docker's,
//! containerd's for Kubernetes; Podman's allows them), and on an Ubuntu host its AppArmor
//! profile refuses `mount(2)`. Without this the agent's process would fail at its first
//! `unshare` and the run would end before the agent starts.
//!
//! An engine also covers parts of `/proc` (its masked and read-only paths), over which the
//! kernel refuses the tree a `/proc` of its own: read here from the mounts, so that the run
//! says what the tree sees instead of claiming what it does not get.

use std::path::Path;
use std::sync::OnceLock;

use crate::floor::mountinfo::Mount;
use crate::floor::{Plan, Report, Support, Unavailable};

/// What this process was started with, as a container engine sets it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Readings {
    /// `unshare(2)` with no flags (which changes nothing) was refused, with this errno: a
    /// seccomp filter refuses the call outright, as the engines' default profiles do for a
    /// container without `CAP_SYS_ADMIN`.
    pub unshare_refused: Option<i32>,
    /// The AppArmor profile confining this process, when it is an engine's default
    /// (`docker-default (enforce)`), which refuses every `mount(2)`.
    pub apparmor: Option<String>,
    /// The engine, when the container says which (`/.dockerenv`, `/run/.containerenv`, a
    /// Kubernetes service variable).
    pub engine: Option<&'static str>,
    /// Where the kernel would refuse the tree a `/proc` of its own ([`proc_refused`]): the
    /// mount points that cover this process's (none when its flags alone refuse it).
    /// `None` where a new one is given.
    pub proc_refused: Option<Vec<String>>,
}

/// The engines' default AppArmor profiles (Docker's, Podman's, containerd's), each with
/// `deny mount,`.
const ENGINE_PROFILES: &[&str] = &["docker-default", "containers-default", "cri-containerd"];

impl Readings {
    /// Reads this process: one system call that changes nothing, a label and two names.
    pub(crate) fn read() -> Readings {
        let unshare_refused = nix::sched::unshare(nix::sched::CloneFlags::empty())
            .err()
            .map(|e| e as i32);
        let apparmor = [
            "/proc/self/attr/apparmor/current",
            "/proc/self/attr/current",
        ]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|l| l.trim_end_matches(['\n', '\0']).to_owned())
        .filter(|l| l.ends_with("(enforce)") && ENGINE_PROFILES.iter().any(|p| l.starts_with(p)));
        let engine = if Path::new("/.dockerenv").exists() {
            Some("Docker")
        } else if Path::new("/run/.containerenv").exists() {
            Some("Podman")
        } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            Some("Kubernetes")
        } else {
            None
        };
        // Unreadable, there is no /proc to judge: the tree's mount then says what it gets.
        let proc_refused = std::fs::read_to_string("/proc/self/mountinfo")
            .ok()
            .and_then(|m| proc_refused(&m));
        Readings {
            unshare_refused,
            apparmor,
            engine,
            proc_refused,
        }
    }
}

/// The one directory of procfs that is permanently empty (a sysctl mount point): a mount on
/// it does not keep the kernel from giving a new `/proc` (systemd's binfmt_misc on a host).
const PROC_EMPTY_DIR: &str = "sys/fs/binfmt_misc";

/// Whether the kernel would refuse a process in a user namespace of its own a new `/proc`,
/// from `mountinfo` (`/proc/self/mountinfo`'s text); when it would, the mount points that
/// cover the old one. `None` where it would give one.
///
/// The kernel's own test (`mount_too_revealing`, `mnt_already_visible` in fs/namespace.c):
/// a new procfs mount is given only when one already in the mount namespace is fully
/// visible: mounted from procfs's root, not read-only (the tree's is not), with the same
/// atime flags as the new one (`relatime`, the default: they are locked once the namespace
/// is copied into a user namespace), and with no mount directly on it but on a permanently
/// empty directory. Copied into the tree's user namespace every mount is locked, so each
/// mount on the old `/proc` counts, an engine's masked paths (a tmpfs, `/dev/null`) and
/// read-only binds (`/proc/sys`) alike.
pub(crate) fn proc_refused(mountinfo: &str) -> Option<Vec<String>> {
    let mounts: Vec<Mount> = crate::floor::mountinfo::parse(mountinfo).collect();
    let mut covered = Vec::new();
    for m in mounts
        .iter()
        .filter(|m| m.fstype == "proc" && m.root == "/")
    {
        let locked_out = m.options.contains(&"ro")
            || m.super_options.contains(&"ro")
            || !m.options.contains(&"relatime")
            || m.options.contains(&"noatime")
            || m.options.contains(&"nodiratime");
        let on: Vec<&Mount> = mounts
            .iter()
            .filter(|c| c.parent == m.id && c.id != m.id)
            .filter(|c| {
                Path::new(&c.point)
                    .strip_prefix(&m.point)
                    .map_or(true, |rest| rest != Path::new(PROC_EMPTY_DIR))
            })
            .collect();
        if !locked_out && on.is_empty() {
            return None;
        }
        covered.extend(on.iter().map(|c| c.point.clone()));
    }
    covered.sort();
    covered.dedup();
    Some(covered)
}

/// The paths the engines mask or bind read-only under `/proc` (moby's `oci/defaults.go`;
/// Podman's and containerd's hold the same): one among the mounts on `/proc` says whose
/// they are.
const ENGINE_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/timer_list",
    "/proc/timer_stats",
];

/// What the run says of the tree's processes where the kernel refuses it a `/proc` of its
/// own ([`Readings::proc_refused`]), and whether it still makes its PID namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcRefused {
    /// The line, as the report says it.
    pub line: String,
    /// An engine's masked `/proc`: what uncovers it gives the container's root the host
    /// kernel's settings under `/proc/sys`, a far larger cost than the tree's view of the
    /// container's own processes (the engine's PID namespace bounds them). So the line is
    /// said, but does not make `--require-floor` refuse the documented container. On a host
    /// the tree sees the person's processes: a gap like any other.
    pub container: bool,
}

impl ProcRefused {
    /// What `r` says, when the kernel refuses the tree's `/proc` here.
    pub(crate) fn of(r: &Readings) -> Option<ProcRefused> {
        let covered = r.proc_refused.as_ref()?;
        let container =
            r.engine.is_some() || covered.iter().any(|p| ENGINE_PATHS.contains(&p.as_str()));
        let why = if container {
            "over this container's partly covered one (Docker: --security-opt \
             systempaths=unconfined, Podman: --security-opt unmask=ALL, Kubernetes: procMount: \
             Unmasked)"
                .to_owned()
        } else if covered.is_empty() {
            "over this machine's, mounted read-only or with atime flags other than relatime"
                .to_owned()
        } else {
            format!(
                "over this machine's partly covered one (mounted on: {})",
                covered.join(", ")
            )
        };
        Some(ProcRefused {
            line: format!(
                "processes: the tree sees every process of this machine: the kernel refuses a \
                 /proc of its own {why}"
            ),
            container,
        })
    }

    /// Whether the tree still gets its PID namespace, with the old `/proc`: only where
    /// Landlock cannot keep its signals in (`landlock_abi` below 6), which the namespace
    /// still does. Elsewhere it would hide nothing and cost the tree its own processes: the
    /// old `/proc` numbers them as the container does, not as the namespace, so `pkill`,
    /// `kill $(pgrep …)` and `/proc/$$` would miss them.
    pub(crate) fn pid_namespace(landlock_abi: i32) -> bool {
        landlock_abi < 6
    }

    /// Says it in `report`: withheld in a container, a gap elsewhere.
    pub(crate) fn say(self, report: &mut Report) {
        match self.container {
            true => report.withheld.push(self.line),
            false => report.gaps.push(self.line),
        }
    }
}

/// This process's readings, read once (a run asks at start-up, for the namespaces made
/// ahead, and again when it prepares the floor).
pub(crate) fn here() -> &'static Readings {
    static READ: OnceLock<Readings> = OnceLock::new();
    READ.get_or_init(Readings::read)
}

/// Whether the floor's namespaces can be made here, as far as a container's settings go;
/// else why not, with what gives them.
pub(crate) fn decide(r: &Readings) -> Result<(), Unavailable> {
    if let Some(errno) = r.unshare_refused {
        return Err(Unavailable::EngineSeccomp {
            engine: r.engine,
            errno: nix::errno::Errno::from_raw(errno),
        });
    }
    if let Some(label) = &r.apparmor {
        return Err(Unavailable::EngineAppArmor {
            engine: r.engine,
            label: label.clone(),
        });
    }
    Ok(())
}

/// Takes the namespaces from `support` where this container refuses them (and the kernel's
/// reading did not already).
pub(crate) fn amend(support: &mut Support) {
    if support.namespaces.is_ok() {
        support.namespaces = decide(here());
    }
}

/// Adds to `report`, when the run has no mount namespace of its own, the secrets the policy
/// hides that the tree can read here, by name (each a gap of its own, so that the warning
/// before the agent starts names them).
pub(crate) fn name_secrets(plan: &Plan, support: &Support, report: &mut Report) {
    if support.namespaces.is_ok() || std::env::var_os(crate::floor::ENV_FLOOR).is_some() {
        return;
    }
    let home = super::home_dir();
    let readable: Vec<String> = plan
        .hidden
        .iter()
        .filter(|p| p.exists())
        .map(|p| match p.strip_prefix(&home) {
            Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
            _ => p.display().to_string(),
        })
        .collect();
    if !readable.is_empty() {
        report.gaps.push(format!(
            "secrets: readable by the agent's tree, since no mount can hide them here: {}",
            readable.join(", ")
        ));
    }
}

/// What this machine enforces of `plan`, as a run here would say it: the kernel's reading,
/// the container's, and the secrets left readable (`policy floor`, `doctor`).
pub(crate) fn report(plan: &Plan) -> Report {
    let mut support = crate::floor::probe();
    amend(&mut support);
    let denials = crate::floor::denials::Reader::open(support.landlock_abi);
    let mut report = support.report(plan, crate::floor::denials::said(&denials));
    name_secrets(plan, &support, &mut report);
    report
}

#[cfg(test)]
mod tests;
