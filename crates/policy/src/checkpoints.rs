//! The policy's `[checkpoints]` section: what a run keeps of the workspace before each tool
//! call that may write, so that `ahp-wrap undo` can put it back (the application's
//! `checkpoint` module does the keeping).
//!
//! Read on its own at start-up, as `[floor]` is: only the section's text is parsed.

use std::path::Path;

use serde::Deserialize;

use crate::error::PolicyError;
use crate::sections::DEFAULT_CHECKPOINTS_JSON;

/// The `[checkpoints]` section as written; a field left out keeps the default policy's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSpec {
    /// `false`: no checkpoints (and nothing to undo) for runs under this policy.
    pub enabled: Option<bool>,
    /// Names (of a directory or file, anywhere in the workspace) or paths relative to the
    /// workspace that are not kept: what tools regenerate (`node_modules`, `target`).
    pub exclude: Option<Vec<String>>,
    /// Files git does not track (untracked and ignored ones) larger than this many MiB are
    /// not kept (listed at the end of the run instead).
    pub max_file_mb: Option<u64>,
    /// A workspace with more files than this is not checkpointed (said): a home directory
    /// or a whole disk is not a project.
    pub max_files: Option<u64>,
    /// Runs older than this many days are forgotten.
    pub keep_days: Option<u64>,
    /// The store is kept under this many MiB, the oldest runs forgotten first.
    pub max_store_mb: Option<u64>,
}

impl CheckpointSpec {
    /// `self`, with each field left out taken from `default`.
    pub fn or(self, default: &CheckpointSpec) -> CheckpointSpec {
        CheckpointSpec {
            enabled: self.enabled.or(default.enabled),
            exclude: self.exclude.or_else(|| default.exclude.clone()),
            max_file_mb: self.max_file_mb.or(default.max_file_mb),
            max_files: self.max_files.or(default.max_files),
            keep_days: self.keep_days.or(default.keep_days),
            max_store_mb: self.max_store_mb.or(default.max_store_mb),
        }
    }
}

/// The checkpoints a policy asks for: its `[checkpoints]`, each field it leaves out taken
/// from the default policy's; the default's for `None`.
#[allow(
    clippy::expect_used,
    reason = "the compiled-in default policy, whose [checkpoints] section the tests read"
)]
pub fn checkpoint_spec(file: Option<&Path>) -> Result<CheckpointSpec, PolicyError> {
    #[derive(Deserialize)]
    struct Only {
        checkpoints: Option<CheckpointSpec>,
    }
    // Read into JSON when the crate was built (build.rs).
    let default: Only = serde_json::from_str(DEFAULT_CHECKPOINTS_JSON)
        .expect("the default [checkpoints] section, read when the crate was built, reads");
    let default = default.checkpoints.unwrap_or_default();
    let Some(path) = file else {
        return Ok(default);
    };
    let own: Only = crate::sections::read_section(path)?;
    Ok(own.checkpoints.map_or(default.clone(), |c| c.or(&default)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_keeps_the_workspace_and_a_policy_overrides_a_field() {
        let d = checkpoint_spec(None).unwrap();
        assert_eq!(d.enabled, Some(true));
        assert!(d
            .exclude
            .as_ref()
            .unwrap()
            .contains(&"node_modules".to_owned()));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.toml");
        std::fs::write(&p, "version = 1\n[checkpoints]\nmax_file_mb = 1\n").unwrap();
        let own = checkpoint_spec(Some(&p)).unwrap();
        assert_eq!(own.max_file_mb, Some(1));
        assert_eq!(own.exclude, d.exclude);
    }
}
