//! Ubuntu's restriction of unprivileged user namespaces, and the AppArmor profile that lifts
//! it for the installed `ahp-wrap` alone.
//!
//! Ubuntu 24.04 and later set `kernel.apparmor_restrict_unprivileged_userns = 1`: a process
//! that is not root may make a user namespace only when an AppArmor profile with the
//! `userns` rule confines it. Ubuntu's own answer for programs that need one (browsers,
//! bubblewrap) is a profile for that one executable; `ahp-wrap setup apparmor` writes such
//! a profile for the installed `ahp-wrap` and `ahp-wrap-hook` ([`profile`]), generated from
//! their path, never edited by hand.
//!
//! Whether namespaces are tried is decided from readings of the machine (`Readings`),
//! taken in one place so that the decision (`decide`) can be checked on every case
//! without the machine: restricted and this process runs under our profile (tried);
//! restricted and a profile of ours is installed for another path (reinstalled elsewhere),
//! or installed but not loaded; restricted and none (the one command that fixes it).
//!
//! Owns: the profile's text, the readings and the decision. Must not touch: loading the
//! profile (the core's `setup` runs `apparmor_parser`).

use std::path::{Path, PathBuf};

use super::{ProfileFound, Sysctl, Unavailable, ENV_FLOOR};

/// The profile's name, and its file's under `/etc/apparmor.d`.
pub const PROFILE_NAME: &str = "ahp-wrap";
/// Where AppArmor's profiles are read from at boot.
pub(crate) const PROFILE_DIR: &str = "/etc/apparmor.d";
/// The sysctl of Ubuntu's restriction.
pub const RESTRICT_SYSCTL: &str = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";

/// Why no profile can be written for a wrapper's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The path is not UTF-8.
    #[error("{} is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    /// The path is relative.
    #[error("{0} is not an absolute path")]
    NotAbsolute(String),
    /// The path holds a character AppArmor reads as a pattern or cannot quote.
    #[error(
        "the path {0} holds {1:?}, which an AppArmor profile would read as a pattern or \
         cannot quote: install ahp-wrap under a plain path"
    )]
    Pattern(String, char),
}

/// The profile file's path.
pub fn profile_path() -> PathBuf {
    Path::new(PROFILE_DIR).join(PROFILE_NAME)
}

/// The profile that lets the `ahp-wrap` at `wrapper` (absolute), and the `ahp-wrap-hook`
/// beside it, make user namespaces, and changes nothing else; refused for a path AppArmor
/// would read as a pattern or could not quote.
pub fn profile(wrapper: &Path) -> Result<String, ProfileError> {
    let text = wrapper
        .to_str()
        .ok_or_else(|| ProfileError::NotUtf8(wrapper.to_owned()))?;
    if !wrapper.is_absolute() {
        return Err(ProfileError::NotAbsolute(text.to_owned()));
    }
    if let Some(c) = text
        .chars()
        .find(|c| "*?[]{}^\"\\,#@".contains(*c) || c.is_control())
    {
        return Err(ProfileError::Pattern(text.to_owned(), c));
    }
    Ok(format!(
        "# Lets the ahp-wrap installed at {text} (and the ahp-wrap-hook beside it) make user\n\
         # namespaces where Ubuntu restricts them (kernel.apparmor_restrict_unprivileged_userns = 1),\n\
         # and changes nothing else. Written by `ahp-wrap setup apparmor`: do not edit, run it again\n\
         # (docs/floor.md says why each line is here).\n\
         abi <abi/4.0>,\n\
         \n\
         include <tunables/global>\n\
         \n\
         profile {PROFILE_NAME} \"{text}{{,-hook}}\" flags=(unconfined) {{\n\
         \x20 userns,\n\
         }}\n"
    ))
}

/// The `ahp-wrap` path an installed profile of ours was written for, read from its text.
pub fn profiled_wrapper(text: &str) -> Option<PathBuf> {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("profile {PROFILE_NAME} \"")))?;
    let quoted = line.split('"').nth(1)?;
    quoted.strip_suffix("{,-hook}").map(PathBuf::from)
}

/// What the decision reads from the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readings {
    /// Whether this process runs inside another run's floor.
    pub inherited: bool,
    /// Whether this process's effective uid is 0: root may make user namespaces whatever
    /// the unprivileged switches say.
    pub root: bool,
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<i64>,
    /// `kernel.unprivileged_userns_clone` (Debian's older switch).
    pub unprivileged_userns_clone: Option<i64>,
    /// `kernel.apparmor_restrict_unprivileged_userns`.
    pub apparmor_restrict: Option<i64>,
    /// This process's AppArmor label (`ahp-wrap (unconfined)`, `unconfined`); read only
    /// when restricted.
    pub label: Option<String>,
    /// The text of our profile file, if one is installed; read only when restricted.
    pub profile: Option<String>,
    /// This `ahp-wrap` (the wrapper beside this executable).
    pub wrapper: PathBuf,
}

impl Readings {
    /// Reads the machine: a few small files; the label and the profile only when the
    /// restriction is on for this user.
    pub fn read() -> Readings {
        let number = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
        };
        let mut r = Readings {
            inherited: std::env::var_os(ENV_FLOOR).is_some(),
            root: nix::unistd::geteuid().is_root(),
            max_user_namespaces: number("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: number("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict: number(RESTRICT_SYSCTL),
            ..Readings::default()
        };
        if !r.root && r.apparmor_restrict == Some(1) {
            r.label = [
                "/proc/self/attr/apparmor/current",
                "/proc/self/attr/current",
            ]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|s| s.trim_end_matches(['\0', '\n']).to_owned());
            r.profile = std::fs::read_to_string(profile_path()).ok();
            r.wrapper = std::env::current_exe()
                .map(|e| e.with_file_name("ahp-wrap"))
                .unwrap_or_default();
        }
        r
    }
}

impl Readings {
    /// Whether this process runs under our profile, restricted: its label is the profile's
    /// name with the mode after it (`ahp-wrap (unconfined)`).
    pub fn runs_under_ours(&self) -> bool {
        self.apparmor_restrict == Some(1)
            && self
                .label
                .as_deref()
                .and_then(|l| l.split(' ').next())
                .is_some_and(|name| name == PROFILE_NAME)
    }
}

/// Whether unshare(CLONE_NEWUSER | CLONE_NEWNS) can work here, judged without trying (see
/// the module's documentation for Ubuntu's restriction).
pub fn namespaces_possible() -> Result<(), Unavailable> {
    decide(&Readings::read())
}

/// Whether `unshare(CLONE_NEWUSER | CLONE_NEWNS)` can work, judged from `r`; else why not,
/// with what fixes it.
pub fn decide(r: &Readings) -> Result<(), Unavailable> {
    if r.inherited {
        return Err(Unavailable::InsideAnotherFloor);
    }
    if r.max_user_namespaces == Some(0) {
        return Err(Unavailable::Sysctl(Sysctl::MaxUserNamespaces));
    }
    if r.root {
        return Ok(());
    }
    if r.unprivileged_userns_clone == Some(0) {
        return Err(Unavailable::Sysctl(Sysctl::UnprivilegedUsernsClone));
    }
    if r.apparmor_restrict != Some(1) {
        return Ok(());
    }
    if r.runs_under_ours() {
        return Ok(());
    }
    let found = match r.profile.as_deref().map(profiled_wrapper) {
        Some(Some(other)) if other != r.wrapper => ProfileFound::ForOther(other),
        Some(Some(_)) => ProfileFound::NotLoaded,
        Some(None) => ProfileFound::NotOurs,
        None => ProfileFound::None,
    };
    Err(Unavailable::AppArmorRestricts {
        wrapper: r.wrapper.clone(),
        profile: profile_path(),
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restricted() -> Readings {
        Readings {
            apparmor_restrict: Some(1),
            label: Some("unconfined".into()),
            wrapper: "/usr/local/bin/ahp-wrap".into(),
            ..Readings::default()
        }
    }

    #[test]
    fn the_profile_names_both_executables_and_grants_user_namespaces_alone() {
        let text = profile(Path::new("/opt/my tools/bin/ahp-wrap")).unwrap();
        assert!(
            text.contains("profile ahp-wrap \"/opt/my tools/bin/ahp-wrap{,-hook}\" flags=(unconfined) {\n  userns,\n}\n"),
            "{text}"
        );
        let rules: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
        assert_eq!(rules, ["  userns,"]);
        assert_eq!(
            profiled_wrapper(&text),
            Some(PathBuf::from("/opt/my tools/bin/ahp-wrap"))
        );
        for bad in [
            "/opt/*/ahp-wrap",
            "/opt/a\"b/ahp-wrap",
            "relative/ahp-wrap",
            "/opt/{x}/ahp-wrap",
        ] {
            assert!(profile(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_case_gives_its_decision_and_its_message() {
        // Root, or no restriction: tried.
        assert!(decide(&Readings {
            root: true,
            ..restricted()
        })
        .is_ok());
        assert!(decide(&Readings {
            apparmor_restrict: Some(0),
            ..restricted()
        })
        .is_ok());
        assert!(decide(&Readings {
            apparmor_restrict: None,
            ..restricted()
        })
        .is_ok());
        // Restricted, and this process runs under our profile: tried.
        let loaded = Readings {
            label: Some("ahp-wrap (unconfined)".into()),
            ..restricted()
        };
        assert!(decide(&loaded).is_ok());
        // Restricted, no profile: the one command.
        let none = decide(&restricted()).unwrap_err();
        assert!(
            none.to_string()
                .contains("no profile lets this ahp-wrap make them"),
            "{none}"
        );
        assert!(
            none.to_string()
                .contains("`sudo /usr/local/bin/ahp-wrap setup apparmor`"),
            "{none}"
        );
        // A profile for another path: reinstalled elsewhere.
        let elsewhere = Readings {
            profile: Some(profile(Path::new("/home/u/.local/bin/ahp-wrap")).unwrap()),
            ..restricted()
        };
        let why = decide(&elsewhere).unwrap_err();
        assert!(
            why.to_string()
                .contains("is for /home/u/.local/bin/ahp-wrap, not this ahp-wrap"),
            "{why}"
        );
        // Ours, for this path, but this process is not under it.
        let unloaded = Readings {
            profile: Some(profile(Path::new("/usr/local/bin/ahp-wrap")).unwrap()),
            ..restricted()
        };
        let why = decide(&unloaded).unwrap_err();
        assert!(why.to_string().contains("not loaded?"), "{why}");
        assert!(
            matches!(
                why,
                Unavailable::AppArmorRestricts {
                    found: ProfileFound::NotLoaded,
                    ..
                }
            ),
            "{why:?}"
        );
        // Someone else's file by that name.
        let foreign = Readings {
            profile: Some("profile other /x {}\n".into()),
            ..restricted()
        };
        assert!(decide(&foreign)
            .unwrap_err()
            .to_string()
            .contains("is not a profile"));
        // Another label (a profile of someone else's confines us): not ours.
        let theirs = Readings {
            label: Some("ahp-wrapper (enforce)".into()),
            ..restricted()
        };
        assert!(decide(&theirs).is_err());
        // The other reasons come first, as before.
        assert!(decide(&Readings {
            inherited: true,
            ..restricted()
        })
        .unwrap_err()
        .to_string()
        .starts_with("inherited"));
        assert!(decide(&Readings {
            max_user_namespaces: Some(0),
            ..restricted()
        })
        .unwrap_err()
        .to_string()
        .contains("max_user_namespaces"));
        assert_eq!(
            decide(&Readings {
                unprivileged_userns_clone: Some(0),
                ..restricted()
            })
            .unwrap_err()
            .to_string(),
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
        );
    }
}
