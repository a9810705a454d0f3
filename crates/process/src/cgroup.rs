//! A cgroup v2 sub-group for the agent, where the machine lets us make one: every process
//! the agent starts stays in it, whatever it does with sessions, process groups or forks,
//! so the tree can be ended from its member list (and `cgroup.kill`) rather than from
//! parent links alone. Where there is none (cgroup v1, no write access), the /proc walk
//! and the child subreaper (see [`super::tree`]) still do the work.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the cgroup v2 hierarchy is mounted.
const ROOT: &str = "/sys/fs/cgroup";
/// How long removing the emptied group may wait for the kernel to let go of it.
const REMOVE_WAIT: Duration = Duration::from_millis(500);

/// Why there is no sub-group for the agent.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// `/sys/fs/cgroup` has no `cgroup.controllers`: cgroup v1, or nothing mounted there.
    #[error("no cgroup v2 hierarchy at {ROOT}")]
    NotV2,
    /// `/proc/self/cgroup` is unreadable or has no `0::` line, or the path has a NUL byte.
    #[error("this process's cgroup v2 path is unknown")]
    NoPath,
    /// Making the sub-group's directory failed (typically no write access to our cgroup).
    #[error("cannot create {path}")]
    Create {
        /// The directory that could not be made, for display.
        path: String,
        /// The error from `mkdir`.
        #[source]
        source: io::Error,
    },
}

/// The agent's cgroup, removed (once empty) when dropped.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    /// `<dir>/cgroup.procs`, ready for the agent to join before it runs.
    procs: CString,
}

impl Cgroup {
    /// Creates a sub-group of this process's own cgroup.
    pub fn create() -> Result<Cgroup, CgroupError> {
        let root = Path::new(ROOT);
        if !root.join("cgroup.controllers").exists() {
            return Err(CgroupError::NotV2);
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|_| CgroupError::NoPath)?;
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or(CgroupError::NoPath)?;
        let dir = root
            .join(rel.trim_start_matches('/'))
            .join(format!("ahp-wrap-{}", ahp_wrap_floor::random_hex(8)));
        std::fs::create_dir(&dir).map_err(|source| CgroupError::Create {
            path: dir.display().to_string(),
            source,
        })?;
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| CgroupError::NoPath)?;
        Ok(Cgroup { dir, procs })
    }

    /// The group's directory under `/sys/fs/cgroup` (`ahp-wrap-<random>` beneath our own
    /// cgroup), as `members` and `kill_and_remove` take it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The member list's path, for `join` in the agent before it runs.
    pub fn procs_path(&self) -> &CStr {
        &self.procs
    }

    /// Whether process `pid` is in this group.
    pub fn contains(&self, pid: i32) -> bool {
        members(&self.dir).contains(&pid)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        remove(&self.dir);
    }
}

/// The pids in the group at `dir`.
pub fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Whether the group at `dir` has no process left (`false` when that cannot be read).
pub(crate) fn is_empty(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|t| t.trim().is_empty())
}

/// Kills every process in the group at `dir` (`cgroup.kill`, or SIGKILL one by one where
/// the kernel has no `cgroup.kill`), then removes the group once it is empty.
pub fn kill_and_remove(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
        for pid in members(dir) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    remove(dir);
}

/// Removes an emptied group; the kernel refuses while a member is still being torn down.
fn remove(dir: &Path) {
    let until = Instant::now() + REMOVE_WAIT;
    while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}
