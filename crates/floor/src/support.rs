//! What this kernel offers the floor (asked by `crates/confine`), and what a run with a plan
//! gets from it: the report said before the agent starts, by `doctor` and by `policy floor`.

use super::{Plan, Report, Unavailable, ENV_FLOOR};

/// How the tree's writes outside its writable roots are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// By Landlock's rules (no mount of the tree's own is possible then).
    Landlock,
    /// By read-only mounts, the writable roots bound writable (Landlock then handles no file
    /// access, and scopes signals only).
    Mounts,
}

/// What this kernel offers the floor.
#[derive(Debug, Clone)]
pub struct Support {
    /// The Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Whether the agent can be given a user and mount namespace of its own; else why not.
    pub namespaces: Result<(), Unavailable>,
    /// Whether namespaces are allowed only by our AppArmor profile (Ubuntu's restriction is
    /// on, and this process runs under the profile `ahp-wrap setup apparmor` loaded).
    pub by_apparmor_profile: bool,
}

impl Support {
    /// Whether a run's network part is decided per connection without a network namespace
    /// of the tree's own: none is to be had here, the run is not inside another's floor
    /// (whose filter already stops each connection, and which a second listener could not
    /// join), and the floor is on (Landlock: a kernel with it has the seccomp notifications
    /// the wrapper answers, and their `ADDFD`).
    pub fn net_without_namespace(&self) -> bool {
        self.namespaces.is_err() && self.landlock_abi >= 1 && std::env::var_os(ENV_FLOOR).is_none()
    }

    /// How a run with `plan` refuses the writes outside its writable roots: by read-only
    /// mounts when the plan lets the tree start sandboxes of its own and this kernel gives a
    /// mount namespace and Landlock's signal scoping (ABI 6); else by Landlock.
    pub fn writes(&self, plan: &Plan) -> Writes {
        match plan.nested && self.namespaces.is_ok() && self.landlock_abi >= 6 {
            true => Writes::Mounts,
            false => Writes::Landlock,
        }
    }

    /// What a run with `plan` gets from this kernel, and what it lacks; `denials` is the
    /// what the run says of counting the kernel's refusals.
    pub fn report(&self, plan: &Plan, refusals: String) -> Report {
        let mut r = Report {
            refusals,
            ..Report::default()
        };
        if self.landlock_abi < 1 {
            r.gaps.push(
                "files: not confined (the kernel offers no Landlock: Linux 5.13 or later with \
                 Landlock enabled is needed)"
                    .into(),
            );
        } else {
            let by_mounts = self.writes(plan) == Writes::Mounts;
            r.enforced.push(format!(
                "files: written only beneath {} directories (the workspace, the temp \
                 directories, the agent's own state, the package caches) ({})",
                plan.writable.len(),
                match by_mounts {
                    true =>
                        "read-only mounts everywhere else in the tree's mount namespace".to_owned(),
                    false => format!("Landlock ABI {}", self.landlock_abi),
                }
            ));
            match (plan.nested, by_mounts) {
                (_, true) => r.enforced.push(
                    "nested sandboxes: a process of the tree may make a user namespace of its \
                     own and mount there (bubblewrap, Codex's and Claude Code's sandboxes), \
                     beneath the floor's locked mounts; a write the floor refuses fails with \
                     `Read-only file system`"
                        .into(),
                ),
                (true, false) => r.gaps.push(
                    "nested sandboxes: none can start in the tree (bubblewrap, Codex's and \
                     Claude Code's sandboxes need a user and mount namespace of their own, \
                     which this floor allows with its namespaces and Landlock ABI 6)"
                        .into(),
                ),
                (false, false) => r.enforced.push(
                    "nested sandboxes: none in this run (the agent's shim says it starts none; \
                     `--nested-sandboxes on` lets one start)"
                        .into(),
                ),
            }
            if self.landlock_abi < 3 {
                r.gaps.push(
                    "files: truncate(2) is not confined (Landlock ABI 3, Linux 6.2, is needed)"
                        .into(),
                );
            }
            if self.landlock_abi >= 6 {
                r.enforced.push(
                    "signals: the agent's tree cannot signal the wrapper or anything outside \
                     the tree (ptrace neither)"
                        .into(),
                );
            } else {
                r.gaps.push(
                    "signals: the agent's tree can signal the wrapper (Landlock ABI 6, Linux \
                     6.12, is needed; ptrace is still refused)"
                        .into(),
                );
            }
        }
        match (&plan.net, &self.namespaces) {
            (None, _) => r.gaps.push(
                "network: not confined ([floor.net] enabled = false), nor path Unix sockets".into(),
            ),
            (Some(net), Ok(())) => r.enforced.push(format!(
                "network: a namespace of its own with only loopback; out only through the \
                 egress proxy or by name (its resolver answered inside, each connection \
                 decided by the gate); connections by address, datagrams and DNS to the \
                 outside refused; path Unix sockets the tree did not bind refused unless \
                 [floor.unix] allows them; its TCP listeners {}",
                match net.publish {
                    crate::spec::Publishing::Loopback => {
                        "published on this machine's loopback"
                    }
                    crate::spec::Publishing::All => "published as they listen",
                    crate::spec::Publishing::None => "kept inside",
                }
            )),
            (Some(_), Err(why)) if std::env::var_os(ENV_FLOOR).is_some() => {
                r.enforced.push(format!("network: {why}"))
            }
            (Some(_), Err(why)) if self.net_without_namespace() => {
                r.enforced.push(format!(
                    "network: decided per connection without a namespace of its own ({why}): \
                     out only through the egress proxy (on this machine's loopback, serving \
                     the tree alone), each connect(2) stopped by a seccomp filter for the \
                     wrapper, which makes what it allows on a socket of its own; connections \
                     by address, UDP, raw and packet sockets, TCP Fast Open and io_uring \
                     refused; path Unix sockets the tree did not bind refused unless \
                     [floor.unix] allows them{}",
                    match self.landlock_abi >= 4 {
                        true => "; the tree's own TCP connections refused by Landlock too",
                        false => "",
                    }
                ));
                r.gaps.push(
                    "network: without a namespace of its own the tree has no resolver (a name \
                     is reached through the proxy only), its listeners are on this machine's \
                     addresses as they listen, and it reaches the abstract Unix sockets of this \
                     machine's other processes"
                        .into(),
                );
            }
            (Some(_), Err(why)) => r.gaps.push(format!("network: not confined: {why}")),
        }
        if self.by_apparmor_profile && self.namespaces.is_ok() {
            r.enforced.push(format!(
                "user namespaces: allowed under Ubuntu's restriction by the AppArmor profile \
                 {} (ahp-wrap setup apparmor)",
                super::apparmor::profile_path().display()
            ));
        }
        match &self.namespaces {
            Ok(()) => r.enforced.push(format!(
                "protected paths: {} bound read-only, {} secret location(s) hidden (user and \
                 mount namespace)",
                plan.read_only.len(),
                plan.hidden.len()
            )),
            Err(why) => r.gaps.push(format!(
                "protected paths beneath writable directories ({}) and secrets ({}) are not \
                 enforced by the kernel: {why}",
                plan.read_only.len(),
                plan.hidden.len()
            )),
        }
        if !plan.mixed.is_empty() {
            match &self.namespaces {
                Ok(()) => r.enforced.push(format!(
                    "the agent's mixed state files ({}): its own keys merged at the end, \
                     instructions kept aside",
                    plan.mixed.len()
                )),
                Err(_) => r.gaps.push(format!(
                    "the agent cannot save its own state in {}: no private copy can be bound \
                     here (it gets EACCES)",
                    plan.mixed
                        .iter()
                        .map(|m| m.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
        if !plan.caches.is_empty() {
            match self
                .namespaces
                .clone()
                .and_then(|()| super::caches::possible())
            {
                Ok(()) => r.enforced.push(format!(
                    "caches ({}): new entries kept at the end, an entry that was there never \
                     changed or removed (an overlay each; changes kept aside)",
                    plan.caches.len()
                )),
                Err(why) => r.gaps.push(format!(
                    "caches ({}): written in place, an entry that was there can be changed: {why}",
                    plan.caches.len()
                )),
            }
        }
        r
    }
}
