//! What of the wrapper itself the policy protects ([`Protected`]): the rules with
//! `where = ["wrapper"]` and `wrapper_pid = true` read it.

use std::path::PathBuf;

/// What of the wrapper itself the policy protects: its files (executables, run directory,
/// control socket: rules with `where = ["wrapper"]`) and its processes (itself, its
/// guardian: rules with `wrapper_pid = true`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Protected {
    /// The wrapper's executables, run directory and control socket, as absolute paths.
    pub paths: Vec<PathBuf>,
    /// The wrapper's own process and its guardian's.
    pub pids: Vec<u32>,
}

impl Protected {
    /// `paths` (canonicalised where they exist) and `pids`.
    pub fn new(
        paths: impl IntoIterator<Item = PathBuf>,
        pids: impl IntoIterator<Item = u32>,
    ) -> Protected {
        Protected {
            paths: paths
                .into_iter()
                .map(|p| std::fs::canonicalize(&p).unwrap_or_else(|_| crate::paths::normalise(&p)))
                .collect(),
            pids: pids.into_iter().collect(),
        }
    }

    /// Both together.
    pub(crate) fn and(&self, other: &Protected) -> Protected {
        Protected {
            paths: self.paths.iter().chain(&other.paths).cloned().collect(),
            pids: self.pids.iter().chain(&other.pids).copied().collect(),
        }
    }
}
