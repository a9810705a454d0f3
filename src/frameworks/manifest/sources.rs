//! Where manifests come from besides the binary's own (`built_in`): the files
//! `AHP_WRAP_SHIM` names, and the user's directory.

use std::path::{Path, PathBuf};

use super::{parse, Manifest, ManifestError};

/// The variable that names extra manifest files (separated by `:`), for a run and its hooks.
pub(crate) const ENV_SHIM: &str = "AHP_WRAP_SHIM";

/// The user's own directory of manifests: `$XDG_CONFIG_HOME/ahp-wrap/shims`, else
/// `~/.config/ahp-wrap/shims`.
pub(crate) fn user_dir() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| Path::new(&h).join(".config"))
        })?;
    Some(config.join("ahp-wrap").join("shims"))
}

/// The manifest in `path`.
pub(crate) fn load(path: &Path) -> Result<Manifest, ManifestError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
        source_name: name.clone(),
        line: 0,
        field: "(file)".into(),
        why: format!("cannot read it: {e}"),
    })?;
    parse(&text, &name)
}

/// The manifest files to load beside the built-in ones: those `AHP_WRAP_SHIM` names, then
/// the `*.toml` files of the user's directory, sorted.
pub(crate) fn files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::env::var_os(ENV_SHIM)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Some(dir) = user_dir() {
        files.extend(files_in(&dir, "toml"));
    }
    files
}

/// The files of `dir` whose extension is `ext`, sorted; none when it cannot be read.
pub(crate) fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}
