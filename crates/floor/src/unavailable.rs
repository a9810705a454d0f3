//! Why a mechanism of the floor is not available on this machine or for this run, by cause:
//! a kernel too old for it, a setting of the machine, a container engine's profile, a system
//! call that failed, the run's own circumstances.

use std::io;
use std::path::PathBuf;

use nix::errno::Errno;

/// Why a mechanism of the floor is not available on this machine or for this run (user
/// namespaces, the caches' overlays, the kernel's audit log, the namespaces made at
/// start-up), in words for the person: a gap of the run's [`Report`](crate::Report), a line
/// of `--log debug`.
///
/// Each sentence already says its cause (an error's text where one is its cause), so it is
/// printed with `{}`: the `source` is there for a caller that asks what failed, not to be
/// printed again.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    // This kernel.
    /// This kernel is too old for a mechanism: which, and what this one has.
    #[error("{0}")]
    KernelTooOld(Feature),

    // A setting of this machine.
    /// A sysctl turns user namespaces off.
    #[error("{} are disabled ({} = 0)", .0.what(), .0.name())]
    Sysctl(Sysctl),
    /// Ubuntu's restriction of unprivileged user namespaces
    /// (`kernel.apparmor_restrict_unprivileged_userns = 1`), with what of our profile is
    /// there and the command that lifts it for `wrapper`.
    #[error("{}", apparmor(.wrapper, .profile, .found))]
    AppArmorRestricts {
        /// This `ahp-wrap`.
        wrapper: PathBuf,
        /// Where `ahp-wrap setup apparmor` writes the profile.
        profile: PathBuf,
        /// What of our profile is there.
        found: ProfileFound,
    },

    // A container engine's profile.
    /// The seccomp profile of the container (or of this process, `engine` unknown) refuses
    /// `unshare(2)`, with this errno.
    #[error(
        "{} seccomp profile refuses unshare(2) ({}): `ahp-wrap setup container-profile` \
         writes one that allows it (docs/floor.md, \"In a container\")",
        whose(*.engine),
        .errno.desc()
    )]
    EngineSeccomp {
        /// The engine, when the container says which.
        engine: Option<&'static str>,
        /// The errno the profile answers `unshare(2)` with.
        errno: Errno,
    },
    /// An engine's default AppArmor profile (`label`, as this process reads it) confines
    /// this process: it refuses every `mount(2)`.
    #[error(
        "{} AppArmor profile {label} refuses mount(2): run it with `--security-opt \
         apparmor=unconfined` (docs/floor.md, \"In a container\")",
        whose(*.engine)
    )]
    EngineAppArmor {
        /// The engine, when the container says which.
        engine: Option<&'static str>,
        /// The profile's label (`docker-default (enforce)`).
        label: String,
    },

    // The run's own circumstances.
    /// This run is inside another run's floor: a new namespace would undo nothing of it,
    /// and mounts are refused inside its Landlock domain.
    #[error(
        "inherited: this run is inside another run's floor, whose namespace and binds hold \
         here too"
    )]
    InsideAnotherFloor,
    /// The agent must not run in a namespace of the floor's: its shim's reason.
    #[error("{0}")]
    ForTheAgent(String),
    /// The run has no state directory to hold the caches' layers.
    #[error("no state directory for the caches' layers")]
    NoStateDirectory,
    /// `dir` lies on a file system (`kind`) that cannot hold an overlay's upper layer.
    #[error("{} lies on {kind}, which cannot hold an overlay's upper layer", .dir.display())]
    UpperLayerOn {
        /// The directory of the upper layers.
        dir: PathBuf,
        /// Its file system, in words (`NFS`, `a FUSE file system`).
        kind: &'static str,
    },

    // A system call that failed.
    /// `statfs(2)` of the directory that would hold the caches' upper layers.
    #[error("{}: {errno}", .dir.display())]
    Statfs {
        /// The directory of the upper layers.
        dir: PathBuf,
        /// Why `statfs(2)` failed.
        #[source]
        errno: Errno,
    },
    /// The caches' layers could not be made in `dir`.
    #[error("the caches' layers in {}: {source}", .dir.display())]
    CacheLayers {
        /// The run's state directory for the layers.
        dir: PathBuf,
        /// Why they could not be made.
        source: io::Error,
    },
    /// The kernel's audit socket could not be opened.
    #[error("the kernel's audit socket cannot be opened ({source})")]
    AuditSocket {
        /// Why `socket(2)` failed.
        source: io::Error,
    },
    /// The audit log's read-only group could not be joined (without `CAP_AUDIT_READ`).
    #[error("the kernel's audit log cannot be read ({source}): it needs CAP_AUDIT_READ")]
    AuditRead {
        /// Why `bind(2)` failed.
        source: io::Error,
    },
    /// The kernel's audit subsystem is off.
    #[error("the kernel's audit subsystem is off (`auditctl -e 1` turns it on)")]
    AuditOff,
    /// Nothing came from the process that makes the namespaces at start-up.
    #[error("no namespaces made premade: {source}")]
    NotReceived {
        /// Why the socket to the maker gave nothing.
        source: io::Error,
    },
    /// The process that makes the namespaces at start-up ended before it sent them.
    #[error("the namespaces' maker ended without a word")]
    MakerSilent,
    /// The process that makes the namespaces at start-up failed at `step`.
    #[error("the namespaces' maker failed at {step}: {source}")]
    MakerFailed {
        /// The step, as the maker names it (`uid_map`).
        step: String,
        /// The errno the step failed with.
        source: io::Error,
    },
    /// No process could be started in the tree's network namespace (`program`, the porter
    /// that binds its published ports outside).
    #[error(
        "cannot start a process in the tree's network namespace ({}): {source}",
        .program.display()
    )]
    Porter {
        /// The porter's executable.
        program: PathBuf,
        /// Why it could not be started.
        source: io::Error,
    },
}

/// A refusal kept for a run is said more than once (the bridge gives its porter's to each
/// listener): a clone's cause is the same errno, or else the same kind and text.
impl Clone for Unavailable {
    fn clone(&self) -> Unavailable {
        use Unavailable as U;
        match self {
            U::KernelTooOld(feature) => U::KernelTooOld(*feature),
            U::Sysctl(sysctl) => U::Sysctl(*sysctl),
            U::AppArmorRestricts {
                wrapper,
                profile,
                found,
            } => U::AppArmorRestricts {
                wrapper: wrapper.clone(),
                profile: profile.clone(),
                found: found.clone(),
            },
            U::EngineSeccomp { engine, errno } => U::EngineSeccomp {
                engine: *engine,
                errno: *errno,
            },
            U::EngineAppArmor { engine, label } => U::EngineAppArmor {
                engine: *engine,
                label: label.clone(),
            },
            U::InsideAnotherFloor => U::InsideAnotherFloor,
            U::ForTheAgent(why) => U::ForTheAgent(why.clone()),
            U::NoStateDirectory => U::NoStateDirectory,
            U::UpperLayerOn { dir, kind } => U::UpperLayerOn {
                dir: dir.clone(),
                kind,
            },
            U::Statfs { dir, errno } => U::Statfs {
                dir: dir.clone(),
                errno: *errno,
            },
            U::CacheLayers { dir, source } => U::CacheLayers {
                dir: dir.clone(),
                source: again(source),
            },
            U::AuditSocket { source } => U::AuditSocket {
                source: again(source),
            },
            U::AuditRead { source } => U::AuditRead {
                source: again(source),
            },
            U::AuditOff => U::AuditOff,
            U::NotReceived { source } => U::NotReceived {
                source: again(source),
            },
            U::MakerSilent => U::MakerSilent,
            U::MakerFailed { step, source } => U::MakerFailed {
                step: step.clone(),
                source: again(source),
            },
            U::Porter { program, source } => U::Porter {
                program: program.clone(),
                source: again(source),
            },
        }
    }
}

/// `e` made again (an `io::Error` is not `Clone`): its errno, or its kind and text.
fn again(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(errno) => io::Error::from_raw_os_error(errno),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// A mechanism this kernel is too old for, with what it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// An overlay mounted in a user namespace (Linux 5.11): the caches' add-only layers.
    OverlayInUserNamespace {
        /// This kernel's release (major, minor).
        release: (u32, u32),
    },
    /// Landlock's denials in the kernel's audit log (ABI 7, Linux 6.15): the floor's
    /// refusals counted.
    LandlockDenials {
        /// This kernel's Landlock ABI.
        abi: i32,
    },
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Feature::OverlayInUserNamespace {
                release: (major, minor),
            } => write!(
                f,
                "Linux {major}.{minor} cannot mount an overlay in a user namespace (5.11 can): \
                 the caches are written in place"
            ),
            Feature::LandlockDenials { abi } => write!(
                f,
                "the kernel reports Landlock denials from ABI 7 (Linux 6.15) on; this one has \
                 ABI {abi}"
            ),
        }
    }
}

/// A sysctl that turns user namespaces off when it is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sysctl {
    /// `user.max_user_namespaces`: none at all.
    MaxUserNamespaces,
    /// `kernel.unprivileged_userns_clone` (Debian's older switch): none for a user who is
    /// not root.
    UnprivilegedUsernsClone,
}

impl Sysctl {
    /// Its name, as `sysctl` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Sysctl::MaxUserNamespaces => "user.max_user_namespaces",
            Sysctl::UnprivilegedUsernsClone => "kernel.unprivileged_userns_clone",
        }
    }

    /// What it turns off.
    fn what(self) -> &'static str {
        match self {
            Sysctl::MaxUserNamespaces => "user namespaces",
            Sysctl::UnprivilegedUsernsClone => "unprivileged user namespaces",
        }
    }
}

/// What of our AppArmor profile a restricted machine has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileFound {
    /// No profile file.
    None,
    /// Ours, for another `ahp-wrap` (installed elsewhere since?).
    ForOther(PathBuf),
    /// Ours, for this `ahp-wrap`, but this process does not run under it (not loaded?).
    NotLoaded,
    /// A file by that name that `ahp-wrap setup apparmor` did not write.
    NotOurs,
}

/// The sentence for Ubuntu's restriction, with the command that lifts it.
fn apparmor(wrapper: &std::path::Path, profile: &std::path::Path, found: &ProfileFound) -> String {
    let restricted = "AppArmor restricts unprivileged user namespaces \
                      (kernel.apparmor_restrict_unprivileged_userns = 1)";
    let setup = format!("sudo {} setup apparmor", wrapper.display());
    match found {
        ProfileFound::ForOther(other) => format!(
            "{restricted}, and the profile {} is for {}, not this ahp-wrap ({}): installed \
             elsewhere since? Run `{setup}`",
            profile.display(),
            other.display(),
            wrapper.display()
        ),
        ProfileFound::NotLoaded => format!(
            "{restricted}; the profile {} is installed for this ahp-wrap but does not confine \
             this process (not loaded?): run `{setup}`",
            profile.display()
        ),
        ProfileFound::NotOurs => format!(
            "{restricted}, and {} is not a profile `ahp-wrap setup apparmor` wrote: run `{setup}`",
            profile.display()
        ),
        ProfileFound::None => {
            format!("{restricted}, and no profile lets this ahp-wrap make them: run `{setup}` once")
        }
    }
}

/// Whose profile refuses: the container's, by its engine where it says which.
fn whose(engine: Option<&'static str>) -> String {
    match engine {
        Some(engine) => format!("this {engine} container's"),
        None => "this process's".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn each_cause_says_the_sentence_people_read() {
        let said = |u: Unavailable| u.to_string();
        assert_eq!(
            said(Unavailable::KernelTooOld(Feature::OverlayInUserNamespace {
                release: (5, 10)
            })),
            "Linux 5.10 cannot mount an overlay in a user namespace (5.11 can): the caches are \
             written in place"
        );
        assert_eq!(
            said(Unavailable::KernelTooOld(Feature::LandlockDenials {
                abi: 6
            })),
            "the kernel reports Landlock denials from ABI 7 (Linux 6.15) on; this one has ABI 6"
        );
        assert_eq!(
            said(Unavailable::Sysctl(Sysctl::MaxUserNamespaces)),
            "user namespaces are disabled (user.max_user_namespaces = 0)"
        );
        assert_eq!(
            said(Unavailable::EngineSeccomp {
                engine: Some("Docker"),
                errno: Errno::EPERM
            }),
            "this Docker container's seccomp profile refuses unshare(2) (Operation not \
             permitted): `ahp-wrap setup container-profile` writes one that allows it \
             (docs/floor.md, \"In a container\")"
        );
        assert_eq!(
            said(Unavailable::UpperLayerOn {
                dir: "/n/state".into(),
                kind: "NFS"
            }),
            "/n/state lies on NFS, which cannot hold an overlay's upper layer"
        );
        assert_eq!(
            said(Unavailable::MakerFailed {
                step: "uid_map".into(),
                source: io::Error::from_raw_os_error(libc::EPERM),
            }),
            "the namespaces' maker failed at uid_map: Operation not permitted (os error 1)"
        );
    }

    #[test]
    fn an_io_cause_is_the_source_and_is_shared_by_a_clone() {
        let audit = Unavailable::AuditRead {
            source: io::Error::from_raw_os_error(libc::EPERM),
        };
        assert_eq!(
            audit.to_string(),
            "the kernel's audit log cannot be read (Operation not permitted (os error 1)): it \
             needs CAP_AUDIT_READ"
        );
        let kept = audit.clone();
        assert_eq!(kept.to_string(), audit.to_string());
        let cause = kept.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(cause.and_then(io::Error::raw_os_error), Some(libc::EPERM));
        // A cause with no errno keeps its kind and text.
        let layers = Unavailable::CacheLayers {
            dir: "/s".into(),
            source: io::Error::new(io::ErrorKind::InvalidData, "a layer is not a directory"),
        };
        let kept = layers.clone();
        let cause = kept.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(cause.map(io::Error::kind), Some(io::ErrorKind::InvalidData));
        assert_eq!(
            kept.to_string(),
            "the caches' layers in /s: a layer is not a directory"
        );
        let statfs = Unavailable::Statfs {
            dir: "/x".into(),
            errno: Errno::ENOENT,
        };
        assert_eq!(
            statfs.source().and_then(|s| s.downcast_ref::<Errno>()),
            Some(&Errno::ENOENT)
        );
        assert!(Unavailable::AuditOff.source().is_none());
    }
}

/// A floor that cannot be set up for this run.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    /// No Landlock ABI on this kernel, or no ruleset descriptor came of the rules.
    #[error("the kernel offers no Landlock (needs Linux 5.13 or later with Landlock enabled)")]
    Unsupported,
    /// A path the plan grants could not be opened for its Landlock rule.
    #[error("landlock ruleset for {path}")]
    Rule {
        /// The path, for display.
        path: String,
        /// Why it could not be opened.
        #[source]
        source: std::io::Error,
    },
    /// Building the Landlock ruleset failed; the `landlock` crate's error, as text.
    #[error("landlock ruleset: {0}")]
    Ruleset(String),
    /// A step before confinement failed: a staging directory, a file to bind, a channel.
    #[error("prepare {what} {path}")]
    Prepare {
        /// What was being made, worded to precede `path` in the message.
        what: &'static str,
        /// The path involved, for display (empty when there is none).
        path: String,
        /// The OS error (`InvalidInput` for a path with a NUL byte).
        #[source]
        source: std::io::Error,
    },
}
