//! The agent's command as the interceptors and the frameworks amend it before launch, and
//! the files an agent keeps of its own: what [`spawn`](super::spawn) starts. At the bottom of
//! the layers, so that the process code needs nothing above it.

use std::ffi::OsString;
use std::path::PathBuf;

/// What an agent keeps of its own ([`Framework::agent_files`](crate::frameworks::Framework::agent_files)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFiles {
    /// Directories the agent writes its state to.
    pub state: Vec<PathBuf>,
    /// Files (or directories) beneath them it must never write: settings, hooks.
    pub protected: Vec<PathBuf>,
    /// Files that mix the agent's own bookkeeping with instructions (`~/.claude.json`): on
    /// the floor it writes a private copy, whose changes are sorted key by key at the end.
    pub mixed: Vec<crate::statefile::StateFile>,
}

/// The agent command, as a framework may amend it before launch.
#[derive(Debug, Clone, Default)]
pub struct AgentCommand {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Extra environment for the agent (added to ours).
    pub env: Vec<(OsString, OsString)>,
    /// A hook the agent calls in every session once the injection works. If the agent
    /// exits without having called it, the wrapper warns loudly that the run was not
    /// supervised (the agent may have ignored the injected hooks).
    pub expect_hook: Option<String>,
    /// Warnings for the person (e.g. a setting of theirs that the run overrides): printed
    /// before the agent starts and repeated after it exits, when its screen is gone.
    pub warnings: Vec<String>,
    /// What this run's injection adds to [`Framework::agent_files`](crate::frameworks::Framework::agent_files) for the floor (e.g. an
    /// overlay directory in the run directory that the agent writes to).
    pub floor: AgentFiles,
}
