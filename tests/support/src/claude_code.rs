//! Helpers for the end-to-end tests on the real Claude Code CLI: the pinned binary, the
//! scripted fake Anthropic API, and one run's world. The rest is in `agents.rs`, which
//! the test crate loads beside this file.

use std::ops::Deref;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

pub use crate::agents::Run;
use crate::agents::{self, FakeServer, TestDir};

/// The pinned Claude Code version (installed by tests/claude-code/setup.sh).
pub const VERSION: &str = include_str!("../../claude-code/VERSION");
/// How long one wrapped or unwrapped run may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The installed `claude`, or a failure that says how to install it.
pub fn claude_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("AHP_WRAP_CLAUDE_BIN") {
        return p.into();
    }
    agents::installed_bin(
        "claude-code",
        VERSION.trim(),
        "claude",
        "Claude Code CLI",
        "@anthropic-ai/claude-code from the npm registry",
    )
}

/// The scripted fake Anthropic Messages API on 127.0.0.1 (an ephemeral port).
pub struct FakeApi(FakeServer);

impl Deref for FakeApi {
    type Target = FakeServer;
    fn deref(&self) -> &FakeServer {
        &self.0
    }
}

impl FakeApi {
    pub fn start(dir: &std::path::Path, name: &str, turns: Value) -> FakeApi {
        FakeApi(FakeServer::start(
            "fake_anthropic.py",
            "fake Anthropic API",
            dir,
            name,
            turns,
        ))
    }

    /// The tool results the model received, in order: those of each request's messages
    /// after the model's last turn (a hook's added context may follow the tool result in a
    /// message of its own).
    pub fn tool_results(&self) -> Vec<Value> {
        self.main_bodies()
            .iter()
            .filter_map(|b| {
                let messages = b["messages"].as_array()?;
                let after = messages
                    .iter()
                    .rposition(|m| m["role"] == "assistant")
                    .map_or(0, |i| i + 1);
                Some(messages[after..].to_vec())
            })
            .flatten()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["type"] == "tool_result")
            .collect()
    }
}

/// A Write tool call for a scripted turn: Claude writes `content` into the file `path`.
pub fn write(path: &std::path::Path, content: &str) -> Value {
    json!({"tool_use": {"name": "Write", "input": {
        "file_path": path.display().to_string(),
        "content": content,
    }}})
}

/// A bash tool call for a scripted turn.
pub fn bash(command: &str) -> Value {
    json!({"tool_use": {"name": "Bash", "input": {"command": command, "description": "test step"}}})
}

/// One test's private world: HOME and CLAUDE_CONFIG_DIR, a workspace, the harness files.
pub struct World(TestDir);

impl Deref for World {
    type Target = TestDir;
    fn deref(&self) -> &TestDir {
        &self.0
    }
}

impl World {
    pub fn new() -> World {
        World(TestDir::new("ahp-claude-e2e-", None, &["home/.claude"]))
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("home/.claude")
    }

    /// `claude` (with `wrapper` args before it when wrapped), in the workspace, offline.
    /// Makes this world's user one who has been through Claude's onboarding, approved the
    /// API key and trusts the workspace (an interactive start then asks nothing).
    pub fn onboarded(&self) {
        let ws = self.ws().canonicalize().unwrap();
        std::fs::write(
            self.config_dir().join(".claude.json"),
            json!({
                "hasCompletedOnboarding": true, "theme": "dark", "numStartups": 3,
                "projects": {ws.display().to_string(): {
                    "hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}},
                "customApiKeyResponses": {"approved": ["dummy"], "rejected": []}
            })
            .to_string(),
        )
        .unwrap();
    }

    /// `ahp-wrap ARGS` (`undo`, `changes`) in the workspace, after a run: its state
    /// directory the world's home, as the run's was (its environment was cleared).
    pub fn wrap(&self, args: &[&str]) -> std::process::Output {
        Command::new(crate::wrap_bin())
            .args(args)
            .current_dir(self.ws())
            .env_remove("XDG_STATE_HOME")
            .env("HOME", self.dir.path().join("home"))
            .output()
            .unwrap()
    }

    pub fn command(&self, api: &FakeApi, wrapper: Option<&[&str]>, claude: &[&str]) -> Command {
        let mut cmd = match wrapper {
            Some(args) => {
                let mut c = Command::new(crate::wrap_bin());
                c.args(args).arg("--").arg(claude_bin());
                c
            }
            None => Command::new(claude_bin()),
        };
        cmd.args(claude);
        agents::offline(&mut cmd, self);
        offline_env(&mut cmd, self.config_dir(), api.port);
        cmd
    }
}

/// Claude Code's environment for a run offline: its configuration in `config_dir`, its
/// model the fake Anthropic server on `port`, and no traffic to anything else.
pub fn offline_env(cmd: &mut Command, config_dir: PathBuf, port: u16) {
    cmd.env("CLAUDE_CONFIG_DIR", config_dir)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_BUG_COMMAND", "1")
        .env("CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1");
}

/// Runs `cmd` to the end within [`RUN_LIMIT`], killing it (and failing) past that.
pub fn run(cmd: Command) -> Run {
    agents::run_within(cmd, RUN_LIMIT)
}
