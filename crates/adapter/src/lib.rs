//! The contract between ahp-wrap's core and its framework shims: everything a shim may use.
//!
//! A *shim* is one agent framework's adapter: how to inject hook configuration for one run,
//! how a hook payload maps to an AHP event, how a decision is rendered back. Each lives in
//! `shims/<name>/`, a crate that depends on this one and on nothing else of ahp-wrap, so
//! that Cargo itself keeps a shim from reaching the client, the control socket, the gate or
//! the policy. The application's registry (`ahp-wrap`'s `frameworks`) lists the shims; the
//! core only ever sees a `&dyn Framework`.
//!
//! Owns: the [`Framework`] trait and the types it speaks ([`RunContext`], [`AgentCommand`],
//! [`HookContext`], [`Mapped`], [`CallerReply`], [`FrameworkError`], [`Proven`]), reading
//! an installed agent's version ([`installed_version`]), the helpers more than one shim
//! needs ([`shared`], [`hook_events!`]), and the few services of the layers beneath a shim
//! may use, re-exported here by name where a reviewer sees them. Must not touch: deciding
//! (the core's job) or any one framework.
//!
//! With the `testing` feature, [`testing`] holds what the shims' own unit tests share.

#![forbid(unsafe_code)]

pub mod shared;
// Documented always, compiled for the shims' tests only.
#[cfg(any(feature = "testing", doc))]
pub mod testing;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use ahp_wrap_floor::agent::{AgentCommand, AgentFiles};
/// An agent's mixed state files: the declaration in [`AgentFiles::mixed`].
pub use ahp_wrap_floor::statefile::{Format as StateFormat, KeyRule, StateFile, Treatment};
/// What the hook process prints and how it exits: the control protocol's reply, rendered
/// by the shim.
pub use ahp_wrap_wire::control::CallerReply;
pub use ahp_wrap_wire::protocol::{
    unapplicable_modify, updated_input, EventType, Final, ModifyError, ToolCall,
};
pub use shared::system_file::{Installed, SystemFile};
pub use shared::Shim;

/// Whether a name is a plain word (what the control socket accepts as a scope or a name:
/// an MCP server's name, for `ahp-wrap mcp --name`).
pub use ahp_wrap_wire::control::is_word;

/// Whether `path` and every directory above it are owned by root and writable by no one
/// else: where some agents (Gemini) trust a system settings file.
pub use ahp_wrap_floor::rundir::only_root_can_write;

/// A fresh per-run nonce for hook commands and file names (16 hex digits).
pub fn run_nonce() -> String {
    ahp_wrap_floor::random_hex(8)
}

/// What a framework can rely on when it prepares the agent's command line.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The executable the hooks must call, as `<self_exe> hook <framework> <hook>`:
    /// `ahp-wrap-hook` when installed next to `ahp-wrap`, else `ahp-wrap` itself.
    pub self_exe: PathBuf,
    /// A private (0700) directory for this run, removed at exit: for generated settings.
    /// As root it lies, where the machine allows, under directories only root can write
    /// ([`only_root_can_write`]), never under a world-writable `/tmp`.
    pub run_dir: PathBuf,
    /// How long a hook may wait for the wrapper, in milliseconds. A framework registers a
    /// hook timeout longer than this, so that the wrapper always answers first.
    pub hook_budget_ms: u64,
    /// Whether a person can answer on a terminal (decides how `escalate` is rendered).
    pub interactive: bool,
}

/// Where a hook call came from, as far as the framework mapping cares.
#[derive(Debug, Clone)]
pub struct HookContext<'a> {
    /// The hook name given on the `ahp-wrap hook <framework> <hook>` command line.
    pub hook: &'a str,
    /// The hook process's working directory.
    pub cwd: &'a Path,
    /// Whether a person can answer on a terminal.
    pub interactive: bool,
}

/// A hook payload turned into an AHP event (without the envelope the wrapper adds).
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// The AHP event type the hook stands for; blocking types wait for a decision.
    pub event_type: EventType,
    /// The event's `payload` (for a tool call, [`ToolCall::into_payload`]'s shape).
    pub payload: Value,
    /// The framework's own session id, recorded next to ours.
    pub framework_session: Option<String>,
}

/// Why a framework could not prepare a run or map a payload.
#[derive(Debug, thiserror::Error)]
pub enum FrameworkError {
    /// The hook payload could not be parsed as JSON.
    #[error("the hook payload is not valid JSON: {0}")]
    Payload(#[from] serde_json::Error),
    /// The payload is JSON but not what the agent sends for this hook (not an object, a
    /// field missing or mistyped), or the hook is one the shim never registers.
    #[error("the hook payload is not what {framework} sends for {hook}: {why}")]
    Shape {
        /// The shim's name ([`Framework::name`]).
        framework: &'static str,
        /// The hook the payload came with.
        hook: String,
        /// What is wrong with it.
        why: String,
    },
    /// The run's hooks (or `--wrap-mcp`) could not be put into the agent's command line,
    /// environment or settings, or a system file for them could not be built.
    #[error("cannot prepare the {framework} command line: {why}")]
    Prepare {
        /// The shim's name ([`Framework::name`]).
        framework: &'static str,
        /// What stood in the way.
        why: String,
    },
}

/// One agent framework's shim: the whole of what the core knows about that framework.
pub trait Framework: Send + Sync + 'static {
    /// The name used on the command line (`--framework`, `ahp-wrap hook <name> …`).
    fn name(&self) -> &'static str;

    /// Executable names (file name only) that identify this framework's agent.
    fn executables(&self) -> &'static [&'static str];

    /// Injects this run's hook configuration into the agent's command line and
    /// environment, without touching the user's own configuration files.
    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError>;

    /// Maps one hook call to the AHP event to send; `None` when this hook needs no event.
    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError>;

    /// Renders the gate's final decision in the framework's own hook contract; it is a
    /// [`Final::Ask`] only when [`Framework::native_ask`] said yes.
    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply;

    /// Whether the framework has its own "ask the user" answer for this hook.
    fn native_ask(&self, cx: &HookContext<'_>) -> bool {
        let _ = cx;
        false
    }

    /// Whether the agent has a hook system the shim injects into. Without one (`generic`),
    /// only the events the agent sends itself are supervised: the run says so before the
    /// agent starts ([`Framework::start_notice`]) and when it never called a hook.
    fn injects_hooks(&self) -> bool {
        true
    }

    /// Whether commands the agent runs by name are intercepted through PATH shims by
    /// default (`--intercept` turns them on for any framework, `--no-intercept` off).
    fn path_shims(&self) -> bool {
        false
    }

    /// What the person must know before the agent starts, if anything (`shown` is the
    /// agent's command as typed).
    /// `path_shims` says whether commands run by name are checked through PATH shims in
    /// this run.
    fn start_notice(&self, shown: &str, path_shims: bool) -> Option<String> {
        let _ = (shown, path_shims);
        None
    }

    /// After an interactive run: how to resume the agent's session `framework_session`
    /// under the wrapper, when the agent's own exit hint would resume it unsupervised.
    fn resume_hint(&self, framework_session: &str) -> Option<String> {
        let _ = framework_session;
        None
    }

    /// Programs that run this agent without its hooks (its ACP adapter, say): a run of one
    /// of them (`--framework acp`) keeps the agent's own files on the floor
    /// ([`Framework::agent_files`], the registry's `floor_owner`).
    fn adapters(&self) -> &'static [&'static str] {
        &[]
    }

    /// What the agent keeps of its own, for the floor: the directories it writes its state
    /// to (sessions, logs, caches), and the files in them it must never write (its settings
    /// and hooks). `home` is the home directory; a shim reads the agent's own variables
    /// (e.g. a config-directory override) from the environment.
    fn agent_files(&self, home: &Path) -> AgentFiles {
        let _ = home;
        AgentFiles::default()
    }

    /// The hosts the agent talks to for its model (and its own service), for the floor's
    /// egress proxy: they pass the `[floor.net]` `unknown` treatment (the gate still decides).
    /// `host` or `*.domain`.
    fn model_hosts(&self) -> &'static [&'static str] {
        &[]
    }

    /// The environment variables that point the agent at its model API by URL (a base-URL
    /// override): a port of this machine's loopback one names (a local model server) is
    /// reached by the agent's tree without a decision of its own.
    fn model_url_env(&self) -> &'static [&'static str] {
        &[]
    }

    /// The files of a project, at any depth of the workspace, that the agent's later sessions
    /// obey (its settings, MCP lists, hooks, commands, skills, memory files): patterns as
    /// the floor's run files take them (relative to any directory, `/` for the workspace's
    /// top, `*` in a component, a last `**` for beneath). On the floor, one the tree creates
    /// or changes is kept aside at the end of the run, whichever agent ran.
    fn instruction_files(&self) -> &'static [&'static str] {
        &[]
    }

    /// The person's configuration files (`home` is the home directory) that may point the
    /// agent at its model API by URL (a provider's base URL): the loopback ports of the URLs
    /// in them, and in the variables they refer to (`{env:NAME}`, `${NAME}`), are reached by
    /// the agent's tree without a decision of their own.
    fn model_url_files(&self, home: &Path) -> Vec<std::path::PathBuf> {
        let _ = home;
        Vec::new()
    }

    /// The credentials in the wrapper's environment the agent itself needs (its model API
    /// key, its login token; names, `*` for any run of characters), given its arguments
    /// `args`: on the floor they are left in its environment while the others are removed.
    fn own_env(&self, args: &[std::ffi::OsString]) -> Vec<String> {
        let _ = args;
        Vec::new()
    }

    /// Whether the agent, started with `args` in `workspace` (`home` the home directory),
    /// runs its commands in a sandbox of its own that makes a user and mount namespace
    /// (bubblewrap): on the floor the tree may then make one (`[floor] nested_sandboxes`,
    /// `auto`). Read from its command line and settings; a shim that cannot tell says yes
    /// when the agent's default is a sandbox.
    fn own_sandbox(&self, args: &[std::ffi::OsString], home: &Path, workspace: &Path) -> bool {
        let _ = (args, home, workspace);
        false
    }

    /// The agent versions this shim is proven on: those its end-to-end suite has run the
    /// real CLI at (the suite pins one in `tests/<setup>/VERSION`). `ahp-wrap doctor`
    /// compares the installed agent's version with it. `None`: no agent of its own.
    fn proven(&self) -> Option<Proven> {
        None
    }

    /// The npm packages the agent is installed from (`@anthropic-ai/claude-code`): its
    /// version is read from the package's `package.json` above the executable, without
    /// running it ([`installed_version`]).
    fn packages(&self) -> &'static [&'static str] {
        &[]
    }

    /// Why a run started here and now could not inject the agent's hooks, if it could not
    /// (a run refuses then): what `ahp-wrap doctor` says before any run. Only what can be
    /// known without the agent's command line. `hook_exe` is what the hooks would run
    /// ([`RunContext::self_exe`]).
    fn injection_refused(&self, _hook_exe: &Path) -> Option<String> {
        None
    }

    /// The file root installs once (`ahp-wrap setup <framework>`) so that users who are not
    /// root can be supervised, with this build's content for hooks that run `hook_exe`;
    /// `None` when the agent needs no such file (see [`shared::system_file`]).
    fn system_file(&self, _hook_exe: &Path) -> Option<Result<SystemFile, FrameworkError>> {
        None
    }

    /// `--wrap-mcp`: makes the agent start each stdio MCP server it would start behind
    /// `<wrapper> mcp --via-run --name NAME -- <server>`, for this run only, without
    /// touching the user's files. By default: not supported.
    fn wrap_mcp(
        &self,
        run: &RunContext,
        cmd: &mut AgentCommand,
        wrapper: &std::path::Path,
    ) -> Result<(), FrameworkError> {
        let _ = (run, cmd, wrapper);
        Err(FrameworkError::Prepare {
            framework: self.name(),
            why: "--wrap-mcp is supported for Claude Code only".into(),
        })
    }
}

/// A range of agent versions, both ends included (`major.minor.patch`, compared by number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proven {
    /// The oldest version proven (whitespace around it, such as a `VERSION` file's final
    /// newline, is ignored).
    pub from: &'static str,
    /// The newest version proven.
    pub to: &'static str,
}

impl Proven {
    /// The one version a suite pins, as its `VERSION` file holds it (a newline at the end
    /// is no part of it).
    pub const fn pinned(version: &'static str) -> Proven {
        Proven {
            from: version,
            to: version,
        }
    }

    /// Whether `version` lies in the range; a version that is not `N.N[.N]` does not.
    pub fn contains(&self, version: &str) -> bool {
        match (numbers(version), numbers(self.from), numbers(self.to)) {
            (Some(v), Some(from), Some(to)) => from <= v && v <= to,
            _ => false,
        }
    }
}

impl std::fmt::Display for Proven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (from, to) = (self.from.trim(), self.to.trim());
        if from == to {
            write!(f, "{from}")
        } else {
            write!(f, "{from} to {to}")
        }
    }
}

/// The version of `f`'s agent installed at `program` (an executable's path, symbolic links
/// followed), as the `package.json` of one of [`Framework::packages`] above it says; `None`
/// when the agent was not installed from one of them. No process is started: a run asks
/// this before its agent starts.
pub fn installed_version(f: &dyn Framework, program: &Path) -> Option<String> {
    if f.packages().is_empty() {
        return None;
    }
    let real = std::fs::canonicalize(program).ok()?;
    for dir in real.ancestors().skip(1).take(6) {
        let Ok(text) = std::fs::read(dir.join("package.json")) else {
            continue;
        };
        let manifest: serde_json::Value = serde_json::from_slice(&text).ok()?;
        let name = manifest.get("name").and_then(|n| n.as_str())?;
        if !f.packages().contains(&name) {
            return None;
        }
        return manifest
            .get("version")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
    }
    None
}

/// `major.minor.patch` as numbers (a missing patch is 0; anything after the third number,
/// such as `-beta`, is not looked at).
fn numbers(version: &str) -> Option<[u64; 3]> {
    let mut out = [0u64; 3];
    let mut parts = version.trim().split('.');
    for (i, slot) in out.iter_mut().enumerate() {
        let Some(part) = parts.next() else {
            return (i >= 2).then_some(out);
        };
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        *slot = digits.parse().ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_in_a_range_by_its_numbers() {
        let pinned = Proven::pinned("2.1.330\n");
        assert!(pinned.contains("2.1.330"));
        assert!(!pinned.contains("2.1.33"));
        assert!(!pinned.contains("2.1.331"));
        assert_eq!(pinned.to_string(), "2.1.330");
        let range = Proven {
            from: "0.9",
            to: "0.24.4",
        };
        assert!(range.contains("0.10.0") && range.contains("0.24.4") && range.contains("0.9"));
        assert!(!range.contains("0.24.5") && !range.contains("1.0.0"));
        assert!(range.contains("0.24.4-nightly"));
        assert!(!range.contains("unknown") && !range.contains("0"));
    }
}
