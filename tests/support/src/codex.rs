//! Helpers for the end-to-end tests on the real Codex CLI: the pinned binary, the scripted
//! fake OpenAI Responses API, and one run's private world. The rest is in `agents.rs`,
//! which the test crate loads beside this file.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

pub use crate::agents::Run;
use crate::agents::{self, FakeServer, TestDir};

/// The pinned Codex version (installed by tests/codex/setup.sh).
pub const VERSION: &str = include_str!("../../codex/VERSION");
/// How long one wrapped or unwrapped run may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The installed `codex`, or a failure that says how to install it.
pub fn codex_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("AHP_WRAP_CODEX_BIN") {
        return p.into();
    }
    agents::installed_bin(
        "codex",
        VERSION.trim(),
        "codex",
        "Codex CLI",
        "@openai/codex from the npm registry",
    )
}

/// The scripted fake OpenAI Responses API on 127.0.0.1 (an ephemeral port).
pub struct FakeApi(FakeServer);

impl Deref for FakeApi {
    type Target = FakeServer;
    fn deref(&self) -> &FakeServer {
        &self.0
    }
}

impl FakeApi {
    /// Codex's arguments that make this server its model (`gpt-fake` of a `fake` provider
    /// whose key is in `FAKE_KEY`).
    pub fn model_args(&self) -> Vec<String> {
        let provider = format!(
            "model_providers.fake={{name=\"fake\",base_url=\"http://127.0.0.1:{}/v1\",wire_api=\"responses\",env_key=\"FAKE_KEY\"}}",
            self.port
        );
        [
            "-m",
            "gpt-fake",
            "-c",
            "model_provider=fake",
            "-c",
            &provider,
        ]
        .map(String::from)
        .to_vec()
    }

    pub fn start(dir: &Path, name: &str, turns: Value) -> FakeApi {
        FakeApi(FakeServer::start(
            "fake_responses.py",
            "fake Responses API",
            dir,
            name,
            turns,
        ))
    }

    /// What the model was told each tool call returned, in order (from the last request,
    /// which repeats the whole history).
    pub fn tool_outputs(&self) -> Vec<String> {
        let bodies = self.main_bodies();
        let Some(last) = bodies.last() else {
            return Vec::new();
        };
        last["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    }
}

/// A shell tool call (Codex's `exec_command`) for a scripted turn.
pub fn shell(command: &str) -> Value {
    json!({"tool_calls": [{"name": "exec_command", "args": {"cmd": command}}]})
}

/// One test's private world: HOME, CODEX_HOME, a workspace, the harness files. It lives
/// under the target directory: Codex will not put its helper links under /tmp.
pub struct World(TestDir);

impl Deref for World {
    type Target = TestDir;
    fn deref(&self) -> &TestDir {
        &self.0
    }
}

impl World {
    pub fn new() -> World {
        World(TestDir::new(
            "ahp-codex-e2e-",
            Some(crate::target_tmpdir().as_path()),
            &["home", "codex-home"],
        ))
    }

    pub fn codex_home(&self) -> PathBuf {
        self.dir.path().join("codex-home")
    }

    /// Events of one type that came from one of Codex's hooks (not from the wrapper).
    pub fn hook_saw(&self, event_type: &str, hook: &str) -> Vec<Value> {
        self.harness_saw(event_type)
            .into_iter()
            .filter(|e| e["metadata"]["hook"] == hook)
            .collect()
    }

    /// `codex exec … PROMPT` (with `wrapper` args before it when wrapped), in the
    /// workspace, offline: the model is the fake API, through a `model_providers` entry. In
    /// Codex's own sandbox, as a person runs it to let it work in the workspace
    /// (`--sandbox workspace-write`): it stacks beneath the floor (docs/floor.md).
    pub fn command(
        &self,
        api: &FakeApi,
        wrapper: Option<&[&str]>,
        extra: &[&str],
        prompt: &str,
    ) -> Command {
        self.command_in(Sandbox::WorkspaceWrite, api, wrapper, extra, prompt)
    }

    /// [`World::command`] with Codex's sandbox as `sandbox` says.
    pub fn command_in(
        &self,
        sandbox: Sandbox,
        api: &FakeApi,
        wrapper: Option<&[&str]>,
        extra: &[&str],
        prompt: &str,
    ) -> Command {
        let mut cmd = match wrapper {
            Some(args) => {
                let mut c = Command::new(crate::wrap_bin());
                c.args(args).arg("--").arg(codex_bin());
                c
            }
            None => Command::new(codex_bin()),
        };
        cmd.args(["exec", "--skip-git-repo-check", "--ephemeral"])
            .args(api.model_args())
            .args(["-c", "analytics.enabled=false"])
            .args(["-c", "check_for_update_on_startup=false"])
            .args(["--disable", "plugins"])
            .args(sandbox.args())
            .args(extra)
            .arg(prompt);
        // `codex exec` reads more prompt from stdin until EOF: `offline` closes it.
        agents::offline(&mut cmd, self);
        cmd.env("CODEX_HOME", self.codex_home())
            .env("FAKE_KEY", "dummy");
        cmd
    }
}

/// Codex's own sandbox for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sandbox {
    /// `--sandbox read-only`.
    ReadOnly,
    /// `--sandbox workspace-write`: writes in the workspace, no network.
    WorkspaceWrite,
    /// `--approve-for-me`: the workspace-write sandbox, approvals by Codex's automatic
    /// review (what became of `--full-auto`, which Codex 0.169 no longer takes).
    ApproveForMe,
    /// `--dangerously-bypass-approvals-and-sandbox`: no sandbox of Codex's own.
    Bypassed,
}

impl Sandbox {
    fn args(self) -> &'static [&'static str] {
        match self {
            Sandbox::ReadOnly => &["--sandbox", "read-only"],
            Sandbox::WorkspaceWrite => &["--sandbox", "workspace-write"],
            Sandbox::ApproveForMe => &["--approve-for-me"],
            Sandbox::Bypassed => &["--dangerously-bypass-approvals-and-sandbox"],
        }
    }
}

/// Runs `cmd` to the end within [`RUN_LIMIT`], killing it (and failing) past that.
pub fn run(cmd: Command) -> Run {
    agents::run_within(cmd, RUN_LIMIT)
}
