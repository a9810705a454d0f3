//! The agent's command as the interceptors and the frameworks amend it before launch, and
//! the files an agent keeps of its own: what `child::spawn` of `crates/confine` starts. At the bottom of
//! the layers, so that the process code needs nothing above it.

use std::ffi::OsString;
use std::path::PathBuf;

/// What an agent keeps of its own (the framework adapter's `Framework::agent_files`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFiles {
    /// Directories the agent writes its state to.
    pub state: Vec<PathBuf>,
    /// Files (or directories) beneath them it must never write: settings, hooks, and what
    /// its later sessions read as instructions or run as code (memory, commands, skills).
    pub protected: Vec<PathBuf>,
    /// Directories among `protected` that the run makes, empty, when they are missing: an
    /// empty directory means to the agent what an absent one does, and once there it is
    /// bound read-only, so nothing can be planted in it.
    pub protected_dirs: Vec<PathBuf>,
    /// Paths relative to the workspace that the agent's later sessions in this project obey
    /// (its project settings, commands, agents): never written either.
    pub project: Vec<PathBuf>,
    /// Files that mix the agent's own bookkeeping with instructions (`~/.claude.json`): on
    /// the floor it writes a private copy, whose changes are sorted key by key at the end.
    pub mixed: Vec<crate::statefile::StateFile>,
}

/// The agent command, as a framework may amend it before launch.
#[derive(Debug, Clone, Default)]
pub struct AgentCommand {
    /// The program as the person gave it: a path if it has a slash, else looked up on
    /// `PATH` (the `PATH` in `env` first); also the agent's `argv[0]`.
    pub program: OsString,
    /// Its arguments after `argv[0]`, with whatever the framework adds (e.g. flags put first).
    pub args: Vec<OsString>,
    /// Extra environment for the agent (added to ours).
    pub env: Vec<(OsString, OsString)>,
    /// Names of ours the agent must not inherit (credentials, on the floor); `env` is added
    /// after they are taken out.
    pub remove_env: Vec<String>,
    /// A hook the agent calls in every session once the injection works. If the agent
    /// exits without having called it, the wrapper warns loudly that the run was not
    /// supervised (the agent may have ignored the injected hooks).
    pub expect_hook: Option<String>,
    /// Warnings for the person (e.g. a setting of theirs that the run overrides): printed
    /// before the agent starts and repeated after it exits, when its screen is gone.
    pub warnings: Vec<String>,
    /// What this run's injection adds to the framework adapter's `Framework::agent_files` for the floor (e.g. an
    /// overlay directory in the run directory that the agent writes to).
    pub floor: AgentFiles,
    /// Why the agent must not run in a user namespace of the floor's, if it must not: the
    /// floor then confines it without one (Landlock alone) and says this reason.
    pub no_namespaces: Option<String>,
}
