//! Helpers for the end-to-end tests on the real Claude Code CLI: the pinned binary, the
//! scripted fake Anthropic API, the scripted harness, and one run's workspace.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The pinned Claude Code version (installed by tests/claude-code/setup.sh).
pub const VERSION: &str = include_str!("../claude-code/VERSION");
/// How long one wrapped or unwrapped run may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The installed `claude`, or a failure that says how to install it.
pub fn claude_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("AHP_WRAP_CLAUDE_BIN") {
        return p.into();
    }
    let bin = root()
        .join("tests/.cache/agents")
        .join(format!("claude-code-{}", VERSION.trim()))
        .join("claude");
    assert!(
        bin.exists(),
        "the Claude Code CLI {} is not installed at {}: run tests/claude-code/setup.sh first \
         (it installs @anthropic-ai/claude-code from the npm registry)",
        VERSION.trim(),
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

/// The scripted fake Anthropic Messages API on 127.0.0.1 (an ephemeral port).
pub struct FakeApi {
    _proc: Killed,
    pub port: u16,
    pub log: PathBuf,
}

impl FakeApi {
    pub fn start(dir: &Path, name: &str, turns: Value) -> FakeApi {
        let script = dir.join(format!("{name}-script.json"));
        let log = dir.join(format!("{name}-requests.jsonl"));
        let port_file = dir.join(format!("{name}-port"));
        assert!(
            !log.exists(),
            "the fake API {name:?} was already started here"
        );
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        let proc = Command::new("python3")
            .arg(root().join("tests/support/fake_anthropic.py"))
            .arg("--script")
            .arg(&script)
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs the fake Anthropic API");
        let proc = Killed(proc);
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the fake API did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeApi {
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

    /// The tool results the model received, in order.
    pub fn tool_results(&self) -> Vec<Value> {
        self.main_bodies()
            .iter()
            .filter_map(|b| b["messages"].as_array()?.last().cloned())
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["type"] == "tool_result")
            .collect()
    }
}

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A bash tool call for a scripted turn.
pub fn bash(command: &str) -> Value {
    json!({"tool_use": {"name": "Bash", "input": {"command": command, "description": "test step"}}})
}

/// One test's private world: HOME and CLAUDE_CONFIG_DIR, a workspace, the harness files.
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("ahp-claude-e2e-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("home/.claude")).unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        World { dir }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("home/.claude")
    }

    pub fn events_log(&self) -> PathBuf {
        self.dir.path().join("harness-events.jsonl")
    }

    /// `--harness stdio:…` for the scripted harness with these rules.
    pub fn harness(&self, mut rules: Value) -> String {
        rules["log"] = self.events_log().display().to_string().into();
        let file = self.dir.path().join("rules.json");
        std::fs::write(&file, rules.to_string()).unwrap();
        format!(
            "stdio:python3 {} {}",
            root().join("tests/support/script_harness.py").display(),
            file.display()
        )
    }

    /// The events the harness received (`ahp/event` params and the events of batches).
    pub fn harness_events(&self) -> Vec<Value> {
        read_jsonl(&self.events_log())
            .into_iter()
            .flat_map(|m| match m["method"].as_str() {
                Some("ahp/event") => vec![m["params"].clone()],
                Some("ahp/batch") => m["params"]["events"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// Events of one type the harness received.
    pub fn harness_saw(&self, event_type: &str) -> Vec<Value> {
        self.harness_events()
            .into_iter()
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }

    /// `claude` (with `wrapper` args before it when wrapped), in the workspace, offline.
    pub fn command(&self, api: &FakeApi, wrapper: Option<&[&str]>, claude: &[&str]) -> Command {
        let mut cmd = match wrapper {
            Some(args) => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_ahp-wrap"));
                c.args(args).arg("--").arg(claude_bin());
                c
            }
            None => Command::new(claude_bin()),
        };
        cmd.args(claude)
            .current_dir(self.ws())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("CLAUDE_CONFIG_DIR", self.config_dir())
            .env(
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", api.port),
            )
            .env("ANTHROPIC_API_KEY", "dummy")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("DISABLE_BUG_COMMAND", "1")
            .env("CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

/// A finished run.
pub struct Run {
    pub output: Output,
    pub elapsed: Duration,
    pub shown: String,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Panics with everything about the run when `ok` is false.
    #[track_caller]
    pub fn check(&self, ok: bool, what: &str) {
        assert!(ok, "{what}\n{self}");
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "command: {}\nstatus: {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.shown,
            self.output.status,
            self.elapsed,
            String::from_utf8_lossy(&self.output.stdout),
            String::from_utf8_lossy(&self.output.stderr)
        )
    }
}

/// Runs `cmd` to the end within [`RUN_LIMIT`], killing it (and failing) past that.
pub fn run(mut cmd: Command) -> Run {
    let shown = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{shown}: {e}"));
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = pipe(child.stdout.take().map(|s| Box::new(s) as _));
    let err = pipe(child.stderr.take().map(|s| Box::new(s) as _));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{shown} did not finish within {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        output: Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        },
        elapsed: start.elapsed(),
        shown,
    }
}
