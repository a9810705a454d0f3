//! The policy's `[floor]` section, as written.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The `[floor]` section of a policy. A path is `~/…` (the home directory), absolute, or
/// relative (to the workspace). A field left out keeps the default policy's list, so that a
/// policy of one's own gets the same floor until it says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// `false`: no floor for runs under this policy (as `--floor off`).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Written besides the workspace, the temp directories and the agent's own state: the
    /// package caches builds need. Created when missing and their parent exists.
    pub writable: Option<Vec<String>>,
    /// Never written, even beneath a writable directory (bound read-only when they exist).
    pub read_only: Option<Vec<String>>,
    /// Never read (an empty, read-only file system or file is mounted over them).
    pub hidden: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

impl Spec {
    /// `self`, with each field left out taken from `default`.
    pub fn or(self, default: &Spec) -> Spec {
        Spec {
            enabled: self.enabled,
            writable: self.writable.or_else(|| default.writable.clone()),
            read_only: self.read_only.or_else(|| default.read_only.clone()),
            hidden: self.hidden.or_else(|| default.hidden.clone()),
        }
    }

    /// The `writable` list, resolved.
    pub fn writable(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.writable.as_deref(), home, workspace)
    }

    /// The `read_only` list, resolved.
    pub fn read_only(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.read_only.as_deref(), home, workspace)
    }

    /// The `hidden` list, resolved.
    pub fn hidden(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.hidden.as_deref(), home, workspace)
    }
}

/// `~/x` against `home`, `/x` as it is, `x` against `workspace`.
pub fn resolve(pattern: &str, home: &Path, workspace: &Path) -> PathBuf {
    if pattern == "~" {
        home.to_owned()
    } else if let Some(rest) = pattern.strip_prefix("~/") {
        home.join(rest)
    } else {
        workspace.join(pattern)
    }
}

fn expand(list: Option<&[String]>, home: &Path, workspace: &Path) -> Vec<PathBuf> {
    list.unwrap_or_default()
        .iter()
        .map(|p| resolve(p, home, workspace))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_against_home_or_the_workspace() {
        let (home, ws) = (Path::new("/h"), Path::new("/h/p"));
        assert_eq!(resolve("~/.ssh", home, ws), PathBuf::from("/h/.ssh"));
        assert_eq!(resolve("/etc/x", home, ws), PathBuf::from("/etc/x"));
        assert_eq!(
            resolve(".git/hooks", home, ws),
            PathBuf::from("/h/p/.git/hooks")
        );
        assert_eq!(resolve("~", home, ws), PathBuf::from("/h"));
    }

    #[test]
    fn a_field_left_out_keeps_the_default() {
        let default = Spec {
            enabled: true,
            writable: Some(vec!["~/.cache".into()]),
            read_only: Some(vec![".git/hooks".into()]),
            hidden: Some(vec!["~/.ssh".into()]),
        };
        let own: Spec = toml::from_str("hidden = [\"~/.secret\"]").unwrap();
        let merged = own.or(&default);
        assert_eq!(merged.hidden, Some(vec!["~/.secret".to_owned()]));
        assert_eq!(merged.writable, default.writable);
        assert!(merged.enabled);
        assert!(toml::from_str::<Spec>("nope = 1").is_err());
    }
}
