//! Helpers for the end-to-end tests on the real Codex CLI: the pinned binary, the scripted
//! fake OpenAI Responses API, the scripted harness, and one run's private world.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The pinned Codex version (installed by tests/codex/setup.sh).
pub const VERSION: &str = include_str!("../codex/VERSION");
/// How long one wrapped or unwrapped run may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The installed `codex`, or a failure that says how to install it.
pub fn codex_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("AHP_WRAP_CODEX_BIN") {
        return p.into();
    }
    let bin = root()
        .join("tests/.cache/agents")
        .join(format!("codex-{}", VERSION.trim()))
        .join("codex");
    assert!(
        bin.exists(),
        "the Codex CLI {} is not installed at {}: run tests/codex/setup.sh first \
         (it installs @openai/codex from the npm registry)",
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

/// The scripted fake OpenAI Responses API on 127.0.0.1 (an ephemeral port).
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
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        let proc = Command::new("python3")
            .arg(root().join("tests/support/fake_responses.py"))
            .arg("--script")
            .arg(&script)
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs the fake Responses API");
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

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A shell tool call (Codex's `exec_command`) for a scripted turn.
pub fn shell(command: &str) -> Value {
    json!({"tool_calls": [{"name": "exec_command", "args": {"cmd": command}}]})
}

/// One test's private world: HOME, CODEX_HOME, a workspace, the harness files. It lives
/// under the target directory: Codex will not put its helper links under /tmp.
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("ahp-codex-e2e-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        for d in ["home", "codex-home", "ws"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        World { dir }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    pub fn codex_home(&self) -> PathBuf {
        self.dir.path().join("codex-home")
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

    /// Events of one type that came from one of Codex's hooks (not from the wrapper).
    pub fn hook_saw(&self, event_type: &str, hook: &str) -> Vec<Value> {
        self.harness_saw(event_type)
            .into_iter()
            .filter(|e| e["metadata"]["hook"] == hook)
            .collect()
    }

    /// `codex exec … PROMPT` (with `wrapper` args before it when wrapped), in the
    /// workspace, offline: the model is the fake API, through a `model_providers` entry.
    pub fn command(
        &self,
        api: &FakeApi,
        wrapper: Option<&[&str]>,
        extra: &[&str],
        prompt: &str,
    ) -> Command {
        let mut cmd = match wrapper {
            Some(args) => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_ahp-wrap"));
                c.args(args).arg("--").arg(codex_bin());
                c
            }
            None => Command::new(codex_bin()),
        };
        let provider = format!(
            "model_providers.fake={{name=\"fake\",base_url=\"http://127.0.0.1:{}/v1\",wire_api=\"responses\",env_key=\"FAKE_KEY\"}}",
            api.port
        );
        cmd.args([
            "exec",
            "--skip-git-repo-check",
            "--ephemeral",
            "-m",
            "gpt-fake",
        ])
        .args(["-c", "model_provider=fake", "-c", &provider])
        .args(["-c", "analytics.enabled=false"])
        .args(["-c", "check_for_update_on_startup=false"])
        .args(["--disable", "plugins"])
        .arg("--dangerously-bypass-approvals-and-sandbox")
        .args(extra)
        .arg(prompt)
        .current_dir(self.ws())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", self.dir.path().join("home"))
        .env("CODEX_HOME", self.codex_home())
        .env("FAKE_KEY", "dummy")
        // `codex exec` reads more prompt from stdin until EOF.
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

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
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
            self.stdout(),
            self.stderr()
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
