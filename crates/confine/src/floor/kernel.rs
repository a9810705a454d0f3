//! The floor on Linux: what this kernel offers, and the confinement the agent's process
//! applies to itself before its `exec`.
//!
//! Everything that allocates, opens paths or may fail for a reason worth a sentence is done
//! in the parent ([`Prepared::new`]); the child ([`Prepared::apply`]) only makes system
//! calls with what was prepared, as a pre-exec step must (async-signal-safe).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use landlock::{
    AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use super::namespaces::Namespaces;
use super::netns::{self, NetPeer, NetRequest};
use super::sys::fail;
use super::{Finished, FloorError, Plan, Support, Writes};

/// `landlock_restrict_self`: log denials after `exec` too (ABI 7; off by default).
const LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON: u32 = 1 << 1;

/// What this kernel offers the floor: asks it (one system call and a few sysctl reads; no process is started).
pub fn probe() -> Support {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
    // returns the ABI version (or an error).
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    let readings = super::apparmor::Readings::read();
    Support {
        landlock_abi: abi.max(0) as i32,
        namespaces: super::apparmor::decide(&readings),
        by_apparmor_profile: readings.runs_under_ours(),
    }
}

/// The confinement, ready to apply in the agent's process.
#[derive(Debug)]
pub struct Prepared {
    landlock: Option<OwnedFd>,
    /// The file-system access the ruleset handles (as the kernel counts it).
    handled: u64,
    /// `landlock_restrict_self`'s flags: whether denials after `exec` reach the audit log.
    restrict_flags: u32,
    namespaces: Option<Namespaces>,
    /// How writes outside the writable roots are refused.
    writes: Writes,
    /// A PID namespace (and `/proc`) of the tree's own, inside its user namespace, while its
    /// switch is on (the run turns it off when its helper turns out not to be this
    /// version's: a guardian that ended at once).
    pid_ns: Option<(
        super::pidns::PidNs,
        std::sync::Arc<std::sync::atomic::AtomicBool>,
    )>,
    net: Option<netns::NetChild>,
}

impl Prepared {
    /// Builds the Landlock ruleset for the `finished` plan (the one form a plan reaches the
    /// kernel in) and the namespace steps `support` allows. `scratch` is a private directory
    /// of the run's (for the empty file bound over secret files).
    /// With `net`, the tree also gets a network namespace of its own (where namespaces are
    /// possible); the wrapper's end of the channel comes back with it. `premade` brings the
    /// user and network namespaces made at start-up, which the agent then joins.
    pub fn new(
        finished: &Finished,
        support: &Support,
        scratch: &Path,
        net: Option<&NetRequest>,
        premade: Option<super::NamespaceReceiver>,
    ) -> Result<(Prepared, Option<NetPeer>), FloorError> {
        if support.landlock_abi < 1 {
            return Err(FloorError::Unsupported);
        }
        let plan = finished.plan();
        // When the tree may start sandboxes of its own (bubblewrap, Codex's, Claude Code's),
        // with a mount namespace and Landlock's signal scoping (ABI 6), the writes outside the
        // writable roots are refused by read-only mounts and Landlock handles no file access:
        // Landlock refuses every mount to a process whose files it confines. Not always: an
        // agent's own tools tell `EACCES` from `EROFS` (Claude Code falls back to writing its
        // state file in place on the first only), so Landlock stays the rule elsewhere.
        let writes = support.writes(plan);
        let host = net.is_some() && support.net_without_namespace();
        let (landlock, handled) = ruleset(plan, ABI::from(support.landlock_abi), writes, host)?;
        let landlock = Some(landlock);
        let mut namespaces = match support.namespaces {
            Ok(()) => Some(Namespaces::new(plan, scratch, writes)?),
            Err(_) => None,
        };
        let (net, peer) = match (net, &mut namespaces) {
            (Some(request), Some(ns)) => {
                let (child, peer) = netns::NetChild::new(request, false)?;
                ns.resolve_inside(scratch)?;
                let made = premade.and_then(|a| {
                    a.take()
                        .inspect(|_| {
                            tracing::debug!(
                                "floor: the agent joins the user and network namespaces made ahead"
                            )
                        })
                        .inspect_err(|e| {
                            tracing::debug!("floor: {e}; the agent's process makes its own")
                        })
                        .ok()
                });
                if let Some(made) = made {
                    ns.take_made(made, plan);
                }
                (Some(child), Some(peer))
            }
            (Some(request), None) if host => {
                let (child, peer) = netns::NetChild::new(request, true)?;
                (Some(child), Some(peer))
            }
            _ => (None, None),
        };
        Ok((
            Prepared {
                landlock,
                handled,
                restrict_flags: 0,
                namespaces,
                pid_ns: None,
                net,
                writes,
            },
            peer,
        ))
    }

    /// Gives the tree a PID namespace and a `/proc` of its own ([`super::pidns`]), with
    /// `helper` (the small executable) as its init and as the agent's process outside it.
    /// Only with the user and mount namespaces (`None` without them); the switch returned
    /// turns it off again until the agent starts.
    pub fn with_own_pids(
        &mut self,
        helper: &Path,
    ) -> Result<Option<std::sync::Arc<std::sync::atomic::AtomicBool>>, FloorError> {
        if self.namespaces.is_none() {
            return Ok(None);
        }
        let on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        self.pid_ns = Some((super::pidns::PidNs::new(helper)?, on.clone()));
        Ok(Some(on))
    }

    /// Asks Landlock to report each denial of the tree to the kernel's audit log (ABI 7), for
    /// a run that reads it ([`denials`](super::denials)).
    pub fn log_denials(&mut self) {
        self.restrict_flags |= LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON;
    }

    /// Applies the floor to the calling process. For a pre-exec step: only system calls on
    /// what [`Prepared::new`] made, and a short static line on stderr when one fails.
    pub fn apply(&self) -> std::io::Result<()> {
        if let Some(ns) = &self.namespaces {
            // Each overlay's root gets a Landlock rule, where Landlock handles files.
            let rules = self
                .landlock
                .as_ref()
                .filter(|_| self.writes == Writes::Landlock)
                .map(|fd| (fd.as_raw_fd(), self.handled));
            ns.enter(self.net.is_some(), rules)?;
        }
        // SAFETY: system calls only; in a user and mount namespace of the tree's, before
        // Landlock. Returns in the agent's process alone, which tells the one outside when a
        // later step fails.
        let entered = match &self.pid_ns {
            Some((pid, on)) if on.load(std::sync::atomic::Ordering::Relaxed) => {
                Some(unsafe { pid.enter()? })
            }
            _ => None,
        };
        let rest = self.restrict();
        if let (Some(entered), Err(e)) = (&entered, &rest) {
            // SAFETY: a write(2) on the pipe it holds.
            unsafe { entered.failed(e) };
        }
        rest
    }

    /// The steps after the namespaces: `no_new_privs`, Landlock, the connect filter, and the
    /// mounts sealed (where they refuse the writes).
    fn restrict(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on values we own.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return fail(b"ahp-wrap: floor: cannot set no_new_privs\n");
            }
            if let Some(fd) = &self.landlock {
                let r = libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    fd.as_raw_fd(),
                    self.restrict_flags,
                );
                if r != 0 {
                    return fail(b"ahp-wrap: floor: landlock_restrict_self failed\n");
                }
            }
        }
        if let Some(net) = &self.net {
            net.apply()?;
        }
        // Last: the resolver's socket is bound above in the floor's user namespace (port 53
        // asks a capability there, which the tree no longer has once sealed).
        if let (Writes::Mounts, Some(ns)) = (self.writes, &self.namespaces) {
            // SAFETY: system calls on what `Prepared::new` made.
            unsafe { ns.seal()? };
        }
        Ok(())
    }
}

/// The Landlock ruleset: write access only beneath the plan's writable directories (and to
/// its device files); no signals out of the domain from ABI 6. With `Writes::Mounts`, no
/// file access at all (the mounts refuse the writes), signals scoped: a domain all the same,
/// so that nothing of the tree traces or signals a process outside it. `host_net`: the tree
/// has no network namespace of its own, and its own TCP connections are refused (ABI 4; the
/// wrapper makes those it allows, on sockets of its own).
fn ruleset(
    plan: &Plan,
    abi: ABI,
    writes: Writes,
    host_net: bool,
) -> Result<(OwnedFd, u64), FloorError> {
    let lerr = |e: landlock::RulesetError| FloorError::Ruleset(e.to_string());
    if writes == Writes::Mounts {
        let created = Ruleset::default()
            .scope(Scope::Signal)
            .map_err(lerr)?
            .create()
            .map_err(lerr)?;
        let fd: Option<OwnedFd> = created.into();
        return Ok((fd.ok_or(FloorError::Unsupported)?, 0));
    }
    // Device ioctls are left alone: terminals need them, and they write no file.
    let handled = AccessFs::from_write(abi) & !AccessFs::IoctlDev & !AccessFs::ResolveUnix;
    let mut ruleset = Ruleset::default().handle_access(handled).map_err(lerr)?;
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::Signal).map_err(lerr)?;
    }
    if host_net && abi >= ABI::V4 {
        ruleset = ruleset.handle_access(AccessNet::ConnectTcp).map_err(lerr)?;
    }
    let mut created = ruleset.create().map_err(lerr)?;
    let rule = |path: &Path, access| {
        let fd = PathFd::new(path).map_err(|e| FloorError::Rule {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok::<_, FloorError>(PathBeneath::new(fd, access))
    };
    for dir in &plan.writable {
        created = created.add_rule(rule(dir, handled)?).map_err(lerr)?;
    }
    // The private copies of mixed state files, written in place through the binds over
    // their files (the rule holds on the copy's inode, which the bind shows there).
    let files = plan
        .devices
        .iter()
        .chain(plan.copies.iter().map(|c| &c.copy));
    for file in files {
        let access = handled & AccessFs::from_file(abi);
        created = created.add_rule(rule(file, access)?).map_err(lerr)?;
    }
    let fd: Option<OwnedFd> = created.into();
    Ok((fd.ok_or(FloorError::Unsupported)?, handled.bits()))
}

#[cfg(test)]
mod tests;
