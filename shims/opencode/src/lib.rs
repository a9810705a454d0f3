//! The `opencode` shim: OpenCode's plugin hooks, reached through a plugin of ours that is
//! written into the run directory and added for one run through `OPENCODE_CONFIG_CONTENT`.
//! It serves the OpenCode family: OpenCode, and Kilo Code (`kilo`), a fork that renamed
//! OpenCode's variables and directories and kept its plugin API ([`Flavor`]).
//!
//! Everything OpenCode-specific lives in this folder (`shims/opencode/`): injection and the
//! plugin (`config.rs`, `plugin.js`), payload mapping (`map.rs`), rendering (`render.rs`),
//! real payloads (`samples/`) and the README. Checked on the real CLI by
//! `tests/opencode_e2e.rs`.
//!
//! Must not touch: anything outside `ahp_wrap_adapter` (enforced by a test
//! there), the user's own config files and plugins (our plugin lives in the run directory and
//! reaches OpenCode through its environment only), and any decision: this shim speaks the
//! plugin's contract, the wrapper decides.

#![forbid(unsafe_code)]

mod config;
mod map;
mod render;

use ahp_wrap_adapter::{
    hook_events, AgentCommand, AgentFiles, CallerReply, Final, Framework, FrameworkError,
    HookContext, Mapped, Proven, RunContext, Shim, StateFile, StateFormat, Treatment,
};

/// The framework's name on the command line and in `ahp-wrap hook opencode <hook>`.
pub const NAME: &str = "opencode";

/// One agent of the OpenCode family: what differs between OpenCode and a fork of it.
#[derive(Debug)]
pub struct Flavor {
    /// Names the framework in errors and hook commands, and the agent in reasons.
    pub shim: Shim,
    /// Executable names that identify this agent ([`Framework::executables`]).
    pub executables: &'static [&'static str],
    /// The npm packages it is installed from, to read its version ([`Framework::packages`]).
    pub packages: &'static [&'static str],
    /// The versions its end-to-end suite has run ([`Framework::proven`]).
    pub proven: Proven,
    /// The hosts it talks to for its models and service, for the floor's egress proxy
    /// ([`Framework::model_hosts`]).
    pub model_hosts: &'static [&'static str],
    /// The variable with config content the agent layers over every config file.
    pub env_config_content: &'static str,
    /// The variables that may point it at its model API by URL (its config content).
    pub url_env: &'static [&'static str],
    /// The files of its global configuration directory that may name a provider's URL.
    pub config_files: &'static [&'static str],
    /// The variable with which the agent loads no external plugin (ours included).
    pub env_pure: &'static str,
    /// The agent's directory under the XDG data, state and cache directories.
    pub xdg_dir: &'static str,
    /// The files of its global configuration directory the agent itself rewrites at start
    /// (a migration of the user's settings): mixed state files whose every key is the user's,
    /// so what the agent changes in them is kept aside, and the agent does not fail on a
    /// configuration it cannot write.
    pub rewritten_config: &'static [&'static str],
    /// More directories of its own under the XDG state directory.
    pub more_state: &'static [&'static str],
    /// Its project configuration (relative to the workspace): never written from the tree.
    pub project: &'static [&'static str],
    /// Its instruction files at any depth of the workspace.
    pub instructions: &'static [&'static str],
}

/// OpenCode itself.
pub const OPENCODE: Flavor = Flavor {
    shim: Shim {
        framework: NAME,
        agent: "OpenCode",
    },
    executables: &["opencode"],
    packages: &["opencode-ai"],
    proven: Proven::pinned(include_str!("../../../tests/opencode/VERSION")),
    model_hosts: &[
        "opencode.ai",
        "models.dev",
        "api.anthropic.com",
        "api.openai.com",
    ],
    env_config_content: "OPENCODE_CONFIG_CONTENT",
    url_env: &["OPENCODE_CONFIG_CONTENT"],
    config_files: &["config.json", "opencode.json", "opencode.jsonc"],
    env_pure: "OPENCODE_PURE",
    xdg_dir: "opencode",
    rewritten_config: &[],
    more_state: &[],
    project: &[".opencode", "opencode.json", "opencode.jsonc"],
    // opencode.ai/docs/rules: `AGENTS.md` up to the repository's top; the project's config.
    instructions: &[
        ".opencode/**",
        "opencode.json",
        "opencode.jsonc",
        "AGENTS.md",
    ],
};

/// Kilo Code's CLI, a fork of OpenCode: `KILO_*` for `OPENCODE_*`, `kilo` for `opencode`.
pub const KILO: Flavor = Flavor {
    shim: Shim {
        framework: "kilo",
        agent: "Kilo Code",
    },
    executables: &["kilo", "kilocode"],
    packages: &[
        "@kilocode/cli",
        "@kilocode/cli-linux-x64",
        "@kilocode/cli-linux-x64-baseline",
        "@kilocode/cli-linux-arm64",
    ],
    proven: Proven::pinned(include_str!("../../../tests/kilo/VERSION")),
    model_hosts: &[
        "api.kilo.ai",
        "app.kilo.ai",
        "models.dev",
        "api.anthropic.com",
        "api.openai.com",
    ],
    env_config_content: "KILO_CONFIG_CONTENT",
    url_env: &["KILO_CONFIG_CONTENT"],
    config_files: &[
        "config.json",
        "kilo.json",
        "kilo.jsonc",
        "opencode.json",
        "opencode.jsonc",
    ],
    env_pure: "KILO_PURE",
    xdg_dir: "kilo",
    // Kilo 7 adds `permission.bash = "allow"` to the last of these that exists, once, for a
    // user whose settings predate it (and stops with "Unexpected error" when it cannot).
    rewritten_config: &["config.json", "kilo.json", "opencode.json"],
    // Its own sandbox's settings per project, written at every session's start (Kilo's
    // sandbox is off unless the user turns it on).
    more_state: &["kilo-sandbox-policy"],
    project: &[".kilo", ".kilocode", "kilo.json", "kilo.jsonc"],
    instructions: &[
        ".kilo/**",
        ".kilocode/**",
        "kilo.json",
        "kilo.jsonc",
        "AGENTS.md",
    ],
};

hook_events! {
    /// What our plugin relays, by OpenCode's own names (in the order OpenCode fires them in
    /// a simple run): its plugin hooks and the bus events we pass on. The plugin hooks every
    /// tool, so none takes a matcher.
    pub enum OpenCodeEvent {
        /// A session (a sub-agent's too) was created; sent as `session_start`.
        SessionCreated = "session.created",
        /// A prompt, before it is stored or sent to the model; sent as `pre_prompt`
        /// (blocking).
        ChatMessage = "chat.message",
        /// Any tool call is about to run; sent as `pre_action` (blocking).
        ToolExecuteBefore = "tool.execute.before",
        /// A tool call ran; sent as `post_action`, which the plugin does not wait for.
        ToolExecuteAfter = "tool.execute.after",
        /// The session went idle after a response; sent as `post_response` with the last
        /// assistant text.
        SessionIdle = "session.idle",
        /// The session hit an error; sent as `error`.
        SessionError = "session.error",
        /// The session was deleted; sent as `session_end`.
        SessionDeleted = "session.deleted",
    }
}

/// An agent of the OpenCode family, as a framework.
pub struct OpenCode(pub &'static Flavor);

impl Framework for OpenCode {
    fn packages(&self) -> &'static [&'static str] {
        self.0.packages
    }

    fn proven(&self) -> Option<Proven> {
        Some(self.0.proven)
    }

    fn injection_refused(&self, _hook_exe: &std::path::Path) -> Option<String> {
        config::pure_refusal(self.0, std::env::var(self.0.env_pure).ok().as_deref())
    }

    fn own_env(&self, _args: &[std::ffi::OsString]) -> Vec<String> {
        // Any provider's key: the family reads each from its provider's variable.
        vec!["*_API_KEY".to_owned()]
    }

    fn model_hosts(&self) -> &'static [&'static str] {
        self.0.model_hosts
    }

    fn model_url_env(&self) -> &'static [&'static str] {
        self.0.url_env
    }

    fn instruction_files(&self) -> &'static [&'static str] {
        self.0.instructions
    }

    fn model_url_files(&self, home: &std::path::Path) -> Vec<std::path::PathBuf> {
        // Its global configuration, where a provider's `baseURL` is set (opencode.ai/docs/providers).
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map_or_else(|| home.join(".config"), std::path::PathBuf::from)
            .join(self.0.xdg_dir);
        self.0.config_files.iter().map(|f| config.join(f)).collect()
    }

    fn agent_files(&self, home: &std::path::Path) -> AgentFiles {
        // Its data, state and cache directories (XDG); its configuration stays unwritable, but
        // for the files it rewrites itself (written through a copy, every change kept aside).
        let base = |var: &str, default: &str| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map_or_else(|| home.join(default), std::path::PathBuf::from)
        };
        let xdg = |var: &str, default: &str| base(var, default).join(self.0.xdg_dir);
        let config = xdg("XDG_CONFIG_HOME", ".config");
        let mixed = self
            .0
            .rewritten_config
            .iter()
            .map(|name| config.join(name))
            .filter(|path| path.is_file())
            .map(|path| StateFile {
                path,
                format: StateFormat::Json,
                rules: Vec::new(),
                other: Treatment::Guarded,
                through: None,
                lock: None,
            })
            .collect();
        AgentFiles {
            mixed,
            state: [
                xdg("XDG_DATA_HOME", ".local/share"),
                xdg("XDG_STATE_HOME", ".local/state"),
                xdg("XDG_CACHE_HOME", ".cache"),
            ]
            .into_iter()
            .chain(
                self.0
                    .more_state
                    .iter()
                    .map(|d| base("XDG_STATE_HOME", ".local/state").join(d)),
            )
            .collect(),
            protected: Vec::new(),
            protected_dirs: Vec::new(),
            project: self.0.project.iter().map(Into::into).collect(),
        }
    }

    fn name(&self) -> &'static str {
        self.0.shim.framework
    }

    fn executables(&self) -> &'static [&'static str] {
        self.0.executables
    }

    fn prepare(&self, run: &RunContext, cmd: &mut AgentCommand) -> Result<(), FrameworkError> {
        config::prepare(self.0, run, cmd)
    }

    fn map(&self, cx: &HookContext<'_>, payload: &[u8]) -> Result<Option<Mapped>, FrameworkError> {
        map::map(self.0, cx, payload)
    }

    fn render(&self, cx: &HookContext<'_>, event: Option<&Mapped>, verdict: &Final) -> CallerReply {
        render::render(self.0, cx, event, verdict)
    }

    // `native_ask` stays false: a plugin hook can only let a call through, change it or
    // refuse it. OpenCode's own permission prompt comes later, inside the tool (see the
    // README), so escalate goes to the wrapper (terminal, else the fail mode).
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_round_trip_and_opencode_is_named_by_its_executables() {
        for event in OpenCodeEvent::ALL {
            assert!(ahp_wrap_adapter::is_word(event.name()));
            assert_eq!(OpenCodeEvent::parse(event.name()), Some(event));
            assert!(!event.is_tool_event());
        }
        assert_eq!(OpenCodeEvent::parse("permission.ask"), None);
        assert!(OpenCode(&OPENCODE).executables().contains(&"opencode"));
        assert!(OpenCode(&KILO).executables().contains(&"kilo"));
        assert_eq!(OpenCode(&KILO).name(), "kilo");
    }
}
