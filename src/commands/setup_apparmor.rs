//! `ahp-wrap setup apparmor [--remove]`: the AppArmor profile that lets this installed
//! `ahp-wrap` make user namespaces where Ubuntu restricts them (see `floor::apparmor` for
//! the profile and how a run detects it). Written to `/etc/apparmor.d/ahp-wrap` and loaded
//! with `apparmor_parser -r`; removed with `apparmor_parser -R`.

use std::path::Path;
use std::process::Command;

use crate::floor::apparmor::{self, RESTRICT_SYSCTL};

/// Installs (or with `remove`, unloads and removes) the profile for the `ahp-wrap` at
/// `wrapper`; what was done. `only_ours`: remove only a profile written for `wrapper`.
pub(super) fn apply(
    wrapper: &Path,
    remove: bool,
    only_ours: bool,
) -> Result<Option<String>, String> {
    let path = apparmor::profile_path();
    if remove {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok((!only_ours).then(|| format!("{} is not installed", path.display())));
        };
        if only_ours && apparmor::profiled_wrapper(&text).as_deref() != Some(wrapper) {
            return Ok(None);
        }
        // Unloaded first: a profile left loaded would still grant until the next boot.
        let unloaded = parser(&["-R"], &path);
        std::fs::remove_file(&path)
            .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
        return Ok(Some(match unloaded {
            Ok(()) => format!("unloaded and removed {}", path.display()),
            Err(why) => format!("removed {} (unloading it: {why})", path.display()),
        }));
    }
    let restricted = std::fs::read_to_string(RESTRICT_SYSCTL)
        .ok()
        .map(|s| s.trim() == "1");
    if restricted != Some(true) {
        return Ok(Some(format!(
            "not needed here: this kernel does not restrict unprivileged user namespaces ({} is {}); \
             nothing written",
            RESTRICT_SYSCTL,
            if restricted.is_some() { "0" } else { "absent" }
        )));
    }
    for exe in [wrapper.to_owned(), wrapper.with_file_name("ahp-wrap-hook")] {
        if exe.exists() {
            super::setup::roots_alone(&exe, "the profile would let it make user namespaces")?;
        }
    }
    let text = apparmor::profile(wrapper).map_err(|e| e.to_string())?;
    crate::statefile::merge::write_atomic_as(&path, text.as_bytes(), 0o644)
        .map_err(|e| crate::error_chain(&e))?;
    parser(&["-r"], &path).map_err(|why| {
        format!(
            "wrote {}, but loading it failed: {why} (AppArmor 4.0 or later is needed)",
            path.display()
        )
    })?;
    Ok(Some(format!(
        "installed and loaded {}: the ahp-wrap at {} may make user namespaces, and its runs get the \
         whole floor",
        path.display(),
        wrapper.display()
    )))
}

/// `apparmor_parser <flags> <path>`, its failure said in a line.
fn parser(flags: &[&str], path: &Path) -> Result<(), String> {
    let out = Command::new("apparmor_parser")
        .args(flags)
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run apparmor_parser (Ubuntu's apparmor package): {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    Err(said.lines().last().unwrap_or("it failed").trim().to_owned())
}
