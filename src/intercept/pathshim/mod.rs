//! PATH shims: for agents without hooks (and in addition to hooks where asked), a private
//! directory placed first on the agent's `PATH` holds one entry per intercepted command, a
//! link to the small hook executable. Run by name (`rm -rf x`, from the agent, a nested
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
pub mod service;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Arc;

use super::{Interceptor, Router};
use crate::frameworks::{AgentCommand, RunContext};
use crate::gate::Gate;
pub use service::ExecService;

/// Set in the agent's environment: the shim directory (how an entry knows it is one).
pub const ENV_DIR: &str = "AHP_WRAP_PATHSHIM_DIR";
/// The scope of `exec` requests on the control socket.
pub const SCOPE: &str = "path";

/// Commands shimmed by default: the ones that destroy, move or send data. Shells and
/// interpreters invoked by name are not: their code is what the hooks and the policy read.
pub const DEFAULT_COMMANDS: &[&str] = &[
    "rm", "mv", "cp", "dd", "shred", "find", "rsync", "tar", "curl", "wget", "scp", "ssh", "git",
    "docker", "kubectl", "npm", "pip",
];

/// Environment variables whose change (from what the agent was started with) is worth the
/// harness's attention: they change what a program loads, where it writes, or whom it
/// talks to.
pub const WATCHED_ENV: &[&str] = &[
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
pub fn commands(extra: &[String], without: &[String]) -> BTreeSet<String> {
    DEFAULT_COMMANDS
        .iter()
        .map(|c| (*c).to_owned())
        .chain(extra.iter().cloned())
        .filter(|c| !without.contains(c))
        .collect()
}

/// The PATH-shims interceptor of one run.
pub struct PathShims {
    commands: BTreeSet<String>,
    service: Arc<ExecService>,
}

impl PathShims {
    pub fn new(commands: BTreeSet<String>, gate: Arc<Gate>) -> PathShims {
        PathShims {
            commands,
            service: Arc::new(ExecService::new(gate)),
        }
    }
}

impl Interceptor for PathShims {
    fn prepare(&mut self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), String> {
        let dir = run.run_dir.join("bin");
        make_dir(&dir, &run.self_exe, &self.commands)?;
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
        self.service.agent_is(agent.id.pid());
    }
}

/// Creates the shim directory: one link per command to the hook executable.
fn make_dir(
    dir: &std::path::Path,
    hook_exe: &std::path::Path,
    commands: &BTreeSet<String>,
) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            format!(
                "cannot create the PATH shim directory {}: {e}",
                dir.display()
            )
        })?;
    for name in commands {
        if !crate::control::wire::is_word(name) || name.contains('/') {
            return Err(format!("--intercept: {name:?} is not a command name"));
        }
        std::os::unix::fs::symlink(hook_exe, dir.join(name))
            .map_err(|e| format!("cannot create the PATH shim for {name}: {e}"))?;
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
