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

use std::path::Path;
use std::sync::OnceLock;

use crate::floor::{Plan, Report, Support};

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
        Readings {
            unshare_refused,
            apparmor,
            engine,
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
pub(crate) fn decide(r: &Readings) -> Result<(), String> {
    let whose = match r.engine {
        Some(engine) => format!("this {engine} container's"),
        None => "this process's".to_owned(),
    };
    if let Some(errno) = r.unshare_refused {
        return Err(format!(
            "{whose} seccomp profile refuses unshare(2) ({}): `ahp-wrap setup \
             container-profile` writes one that allows it (docs/floor.md, \"In a container\")",
            nix::errno::Errno::from_raw(errno).desc()
        ));
    }
    if let Some(label) = &r.apparmor {
        return Err(format!(
            "{whose} AppArmor profile {label} refuses mount(2): run it with \
             `--security-opt apparmor=unconfined` (docs/floor.md, \"In a container\")"
        ));
    }
    Ok(())
}

/// Takes the namespaces from `support` where this container refuses them (and the kernel's
/// reading did not already).
pub(crate) fn amend(support: &mut Support) {
    if support.namespaces.is_ok() {
        if let Err(why) = decide(here()) {
            support.namespaces = Err(why.into());
        }
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
    let mut support = Support::probe();
    amend(&mut support);
    let denials = crate::floor::denials::Reader::open(support.landlock_abi);
    let mut report = support.report(plan, &denials);
    name_secrets(plan, &support, &mut report);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_unshare_names_the_engine_and_the_profile_that_gives_it() {
        let docker = Readings {
            unshare_refused: Some(libc::EPERM),
            engine: Some("Docker"),
            ..Readings::default()
        };
        let why = decide(&docker).unwrap_err();
        assert!(why.starts_with("this Docker container's seccomp profile refuses unshare(2) (Operation not permitted)"), "{why}");
        assert!(why.contains("ahp-wrap setup container-profile"), "{why}");
        let unknown = Readings {
            unshare_refused: Some(libc::ENOSYS),
            ..Readings::default()
        };
        assert!(decide(&unknown).unwrap_err().starts_with(
            "this process's seccomp profile refuses unshare(2) (Function not implemented"
        ));
    }

    #[test]
    fn an_engines_apparmor_profile_is_named_and_a_plain_process_passes() {
        let ubuntu = Readings {
            apparmor: Some("docker-default (enforce)".into()),
            engine: Some("Docker"),
            ..Readings::default()
        };
        let why = decide(&ubuntu).unwrap_err();
        assert!(
            why.contains("AppArmor profile docker-default (enforce) refuses mount(2)"),
            "{why}"
        );
        assert!(why.contains("--security-opt apparmor=unconfined"), "{why}");
        assert_eq!(decide(&Readings::default()), Ok(()));
        // A container that refuses nothing the floor needs (Podman's default profile).
        let podman = Readings {
            engine: Some("Podman"),
            ..Readings::default()
        };
        assert_eq!(decide(&podman), Ok(()));
    }

    #[test]
    fn this_process_reads_as_unfiltered_outside_a_container() {
        // The unit tests run on the host, where unshare(0) changes nothing and succeeds.
        if std::fs::read_to_string("/proc/self/status")
            .is_ok_and(|s| s.lines().any(|l| l == "Seccomp:\t0"))
        {
            assert_eq!(Readings::read().unshare_refused, None);
        }
    }
}
