//! PATH shims: for agents without hooks (and in addition to hooks where asked), a private
//! directory placed first on the agent's `PATH` holds one entry per intercepted command, a
//! link to the small hook executable (a directory kept between runs, checked at each start:
//! `shim_dir`). Run by name (`rm -rf x`, from the agent, a nested
//! shell, `xargs` or `env`), the entry asks the wrapper first ([`exec`], an `exec` request
//! on the control socket), then executes the real program found further down `PATH`, the
//! changed command, or refuses with the reason (exit 126). The parent side ([`service`])
//! turns each request into a `pre_action` with the argv, the working directory, the
//! environment variables that changed and the process ancestry.
//!
//! What it cannot see: a program run by absolute path (`/bin/rm`), shell builtins, a
//! program an interpreter starts with `exec*` and a path of its own, and an agent that
//! rewrites its `PATH`. It adds to hook shims; it never replaces them.
//!
//! Owns: the shim directory, the command set, both sides of an `exec` request. Must not
//! touch: the decision (the gate's) or any framework's hook contract.

pub mod exec;
pub(crate) mod service;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Interceptor, PrepareError, Router};
use crate::frameworks::{AgentCommand, RunContext};
use crate::gate::Gate;
pub(crate) use service::ExecService;

/// Set in the agent's environment: the shim directory (how an entry knows it is one).
pub(crate) const ENV_DIR: &str = "AHP_WRAP_PATHSHIM_DIR";
/// The scope of `exec` requests on the control socket.
pub const SCOPE: &str = "path";

/// Commands shimmed by default: the ones that destroy, move or send data. Shells and
/// interpreters invoked by name are not: their code is what the hooks and the policy read.
pub(crate) const DEFAULT_COMMANDS: &[&str] = &[
    "rm", "mv", "cp", "dd", "shred", "find", "rsync", "tar", "curl", "wget", "scp", "ssh", "git",
    "docker", "kubectl", "npm", "pip",
];

/// Environment variables whose change (from what the agent was started with) is worth the
/// harness's attention: they change what a program loads, where it writes, or whom it
/// talks to.
pub(crate) const WATCHED_ENV: &[&str] = &[
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "HOME",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_PARAMETERS",
    "RSYNC_RSH",
    "KUBECONFIG",
    "DOCKER_HOST",
    "HTTPS_PROXY",
    "https_proxy",
];

/// Which commands are shimmed: the default set, plus and minus what the command line says.
pub(crate) fn commands(extra: &[String], without: &[String]) -> BTreeSet<String> {
    DEFAULT_COMMANDS
        .iter()
        .map(|c| (*c).to_owned())
        .chain(extra.iter().cloned())
        .filter(|c| !without.contains(c))
        .collect()
}

/// The PATH-shims interceptor of one run.
pub(crate) struct PathShims {
    commands: BTreeSet<String>,
    service: Arc<ExecService>,
}

impl PathShims {
    /// Shims `commands` (the set the module's `commands()` makes); `gate` decides each call.
    pub(crate) fn new(commands: BTreeSet<String>, gate: Arc<Gate>) -> PathShims {
        PathShims {
            commands,
            service: Arc::new(ExecService::new(gate)),
        }
    }
}

impl Interceptor for PathShims {
    fn prepare(&mut self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), PrepareError> {
        let dir = shim_dir(&run.run_dir, &run.self_exe, &self.commands)?;
        // A kept directory lies outside the run's own: the floor protects it as well.
        cmd.floor.protected.push(dir.clone());
        let inherited = cmd
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        let mut path = dir.clone().into_os_string();
        if !inherited.is_empty() {
            path.push(":");
            path.push(&inherited);
        }
        let env = watched_env(&cmd.env, &path);
        self.service.started_with(env);
        cmd.env.push((OsString::from("PATH"), path));
        cmd.env
            .push((OsString::from(ENV_DIR), dir.into_os_string()));
        Ok(())
    }

    fn serve(&self, router: &mut Router) {
        router.exec = Some(self.service.clone());
    }

    fn answered(&self) -> u64 {
        self.service.answered()
    }

    fn start(&mut self, agent: &mut crate::child::Agent, _alarm: super::Alarm) {
        self.service.agent_is(agent.pid);
    }
}

/// The shim directory of a run: one kept beside the runs' directories and shared by every
/// run of this user with the same hook executable and commands (its name says which),
/// checked at each start and made again when it is not exactly one link per command to
/// `hook_exe`; else, where that cannot be, one in the run's own directory. Kept, it spares
/// every run making and removing a link per command, which on a journaled file system
/// (ext4) costs about 0.05 ms each.
fn shim_dir(
    run_dir: &Path,
    hook_exe: &Path,
    commands: &BTreeSet<String>,
) -> Result<PathBuf, PrepareError> {
    if let Some(name) = commands
        .iter()
        .find(|n| !crate::control::wire::is_word(n) || n.contains('/'))
    {
        return Err(PrepareError::NotACommand(name.clone()));
    }
    if let Some(base) = run_dir.parent() {
        let kept = base.join(kept_name(hook_exe, commands));
        if is_exactly(&kept, hook_exe, commands) || make_kept(&kept, hook_exe, commands) {
            return Ok(kept);
        }
    }
    let dir = run_dir.join("bin");
    make_dir(&dir, hook_exe, commands).map_err(|cause| PrepareError::ShimDir {
        dir: dir.clone(),
        cause,
    })?;
    Ok(dir)
}

/// `ahp-wrap-shims-<uid>-<digest of the hook's path and the commands>`.
fn kept_name(hook_exe: &Path, commands: &BTreeSet<String>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(hook_exe.as_os_str().as_bytes());
    for c in commands {
        h.update([0]);
        h.update(c.as_bytes());
    }
    let digest = hex::encode(&h.finalize()[..8]);
    format!("ahp-wrap-shims-{}-{digest}", nix::unistd::geteuid())
}

/// Whether `dir` is a directory of ours that no one else may write (0700), holding one link
/// to `hook_exe` per command and nothing else.
fn is_exactly(dir: &Path, hook_exe: &Path, commands: &BTreeSet<String>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o777 == 0o700
    });
    let Some(entries) = ours.then(|| std::fs::read_dir(dir).ok()).flatten() else {
        return false;
    };
    let mut seen = 0;
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let linked = entry
            .file_name()
            .to_str()
            .is_some_and(|n| commands.contains(n))
            && std::fs::read_link(entry.path()).is_ok_and(|t| t == hook_exe);
        if !linked {
            return false;
        }
        seen += 1;
    }
    seen == commands.len()
}

/// Makes the kept directory `dir` anew: made complete under a name of its own, then renamed
/// into place over what was there. Another run doing the same at the same time wins or
/// loses the rename; either way `dir` is then checked.
fn make_kept(dir: &Path, hook_exe: &Path, commands: &BTreeSet<String>) -> bool {
    let mut fresh = dir.as_os_str().to_owned();
    fresh.push(format!(".{}", std::process::id()));
    let fresh = PathBuf::from(fresh);
    if make_dir(&fresh, hook_exe, commands).is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
        return false;
    }
    if std::fs::symlink_metadata(dir).is_ok() {
        // Not as it must be (checked before): a directory left by an older build, or one
        // somebody changed. Only its owner can remove it from a sticky /tmp.
        let _ = std::fs::remove_dir_all(dir).or_else(|_| std::fs::remove_file(dir));
    }
    if std::fs::rename(&fresh, dir).is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
    }
    is_exactly(dir, hook_exe, commands)
}

/// Creates `dir` (0700) with one link per command to the hook executable.
fn make_dir(dir: &Path, hook_exe: &Path, commands: &BTreeSet<String>) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)?;
    for name in commands {
        std::os::unix::fs::symlink(hook_exe, dir.join(name))?;
    }
    Ok(())
}

/// The watched variables' values as the agent starts: ours, overridden by the run's
/// additions, with the PATH the agent gets.
fn watched_env(
    additions: &[(OsString, OsString)],
    path: &OsString,
) -> Vec<(String, Option<String>)> {
    WATCHED_ENV
        .iter()
        .map(|name| {
            let value = if *name == "PATH" {
                Some(path.clone())
            } else {
                additions
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var_os(name))
            };
            (
                (*name).to_owned(),
                value.map(|v| v.to_string_lossy().into_owned()),
            )
        })
        .collect()
}
