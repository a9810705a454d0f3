//! What the end-to-end suites on real agent CLIs share: the installed CLI, a scripted fake
//! model server, the scripted harness in one test's private directory, and a time-limited
//! run that prints everything when a check fails.
//!
//! A test crate loads it as `crate::agents`, beside the agent's own support file
//! (`claude_code.rs`, `codex.rs`, `llm_agents.rs`), which adds the agent's command line
//! and what its model API receives.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub use crate::common::process::{run as run_captured, run_with_input, run_within, show, Run};

pub fn root() -> &'static Path {
    crate::root()
}

/// The variable that skips the end-to-end suites of agent CLIs whose setup was skipped on
/// purpose: setup names (`claude-code,codex`), or `all`. `tests/run-all.sh` then skips their
/// setup too, and `build.rs` turns each name into `--cfg skip_e2e="<setup>"`, which the
/// tests needing that setup turn into `ignore`: they show as ignored, never as passed. CI
/// never sets it: there every CLI is installed and every suite runs.
pub const SKIP_ENV: &str = "AHP_WRAP_SKIP_AGENT_E2E";

/// An agent CLI installed by `tests/<setup>/setup.sh` into
/// `tests/.cache/agents/<setup>-<version>/<exe>`, or a failure that says how to install it.
/// `what` names the CLI and `package` what the setup script installs and from where, for
/// that message.
pub fn installed_bin(setup: &str, version: &str, exe: &str, what: &str, package: &str) -> PathBuf {
    let bin = root()
        .join("tests/.cache/agents")
        .join(format!("{setup}-{version}"))
        .join(exe);
    assert!(
        bin.exists(),
        "the {what} {version} is not installed at {}: run tests/{setup}/setup.sh first \
         (it installs {package}), or set {SKIP_ENV}={setup} to skip \
         its tests on purpose",
        bin.display()
    );
    bin
}

/// A process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scripted fake model server (`tests/support/<server>`) on 127.0.0.1, an ephemeral
/// port, logging every request it gets.
pub struct FakeServer {
    _proc: Killed,
    pub port: u16,
    pub log: PathBuf,
}

impl FakeServer {
    /// Starts `server` with these scripted `turns`; its files in `dir` are named after
    /// `name`. `what` names the server in failures.
    pub fn start(server: &str, what: &str, dir: &Path, name: &str, turns: Value) -> FakeServer {
        FakeServer::start_script(server, what, dir, name, json!({ "turns": turns }))
    }

    /// [`FakeServer::start`] with a whole script: the turns and the server's other settings
    /// (`main_if`, `side_text`, … as the server's docstring lists them).
    pub fn start_script(
        server: &str,
        what: &str,
        dir: &Path,
        name: &str,
        script_json: Value,
    ) -> FakeServer {
        let script = dir.join(format!("{name}-script.json"));
        let log = dir.join(format!("{name}-requests.jsonl"));
        let port_file = dir.join(format!("{name}-port"));
        assert!(
            !log.exists(),
            "the {what} {name:?} was already started here"
        );
        std::fs::write(&script, script_json.to_string()).unwrap();
        let proc = Command::new("python3")
            .arg(root().join("tests/support").join(server))
            .arg("--script")
            .arg(&script)
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("python3 runs the {what}: {e}"));
        let proc = Killed(proc);
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the {what} did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeServer {
            _proc: proc,
            port,
            log,
        }
    }

    /// Every request the server got.
    pub fn requests(&self) -> Vec<Value> {
        read_jsonl(&self.log)
    }

    /// The bodies of the agent-loop requests (the ones that consumed a scripted turn).
    pub fn main_bodies(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["kind"] == "main")
            .map(|r| r["body"].clone())
            .collect()
    }
}

pub use crate::common::read_jsonl;

/// One test's private directory: a workspace (`ws/`) and the scripted harness's files.
pub struct TestDir {
    pub dir: tempfile::TempDir,
}

impl TestDir {
    /// A new directory named `<prefix>…` (in `parent`, else the system's temp dir) with
    /// `subdirs` (and `ws/`) created.
    pub fn new(prefix: &str, parent: Option<&Path>, subdirs: &[&str]) -> TestDir {
        let mut builder = tempfile::Builder::new();
        builder.prefix(prefix);
        let dir = match parent {
            Some(p) => builder.tempdir_in(p),
            None => builder.tempdir(),
        }
        .unwrap();
        for d in subdirs.iter().chain(&["ws"]) {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        TestDir { dir }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn events_log(&self) -> PathBuf {
        self.dir.path().join("harness-events.jsonl")
    }

    /// `--harness stdio:…` for the scripted harness with these rules.
    pub fn harness(&self, rules: Value) -> String {
        crate::common::script_harness_logging_to(self.dir.path(), &self.events_log(), rules)
    }

    /// The events the harness received (`ahp/event` params and the events of batches).
    pub fn harness_events(&self) -> Vec<Value> {
        crate::common::logged_events(&self.events_log())
    }

    /// Events of one type the harness received.
    pub fn harness_saw(&self, event_type: &str) -> Vec<Value> {
        self.harness_events()
            .into_iter()
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }
}

/// `bin`, wrapped by `ahp-wrap` with `wrapper`'s arguments when given.
pub fn wrapped_or_not(bin: &Path, wrapper: Option<&[&str]>) -> Command {
    match wrapper {
        Some(args) => {
            let mut c = Command::new(crate::wrap_bin());
            c.args(args).arg("--").arg(bin);
            c
        }
        None => Command::new(bin),
    }
}

/// The JSON document in `path`.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The environment every offline agent run starts from: ours cleared, `PATH` kept, `HOME`
/// in the test's directory, run in its workspace, stdin closed and the output captured.
pub fn offline(cmd: &mut Command, dir: &TestDir) {
    cmd.current_dir(dir.ws())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.dir.path().join("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
}
