//! Helpers for the end-to-end tests on the real Gemini CLI and Qwen Code: the pinned
//! binaries, the scripted fake model server (`fake_llm.py`: Gemini `generateContent` /
//! `streamGenerateContent` and OpenAI Chat Completions), the scripted harness, and one
//! test's private world (HOME, settings, workspace).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one wrapped run may take before the test fails (the machine may be busy).
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The agent CLIs these helpers drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Gemini,
    Qwen,
}

impl Agent {
    fn dir(self) -> &'static str {
        match self {
            Agent::Gemini => "gemini",
            Agent::Qwen => "qwen",
        }
    }

    fn version(self) -> &'static str {
        match self {
            Agent::Gemini => include_str!("../gemini/VERSION").trim(),
            Agent::Qwen => include_str!("../qwen/VERSION").trim(),
        }
    }

    /// The installed CLI, or a failure that says how to install it.
    pub fn bin(self) -> PathBuf {
        let bin = root()
            .join("tests/.cache/agents")
            .join(format!("{}-{}", self.dir(), self.version()))
            .join(self.dir());
        assert!(
            bin.exists(),
            "the {} CLI {} is not installed at {}: run tests/{}/setup.sh first \
             (it installs it from the npm registry)",
            self.dir(),
            self.version(),
            bin.display(),
            self.dir()
        );
        bin
    }
}

/// A process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The scripted fake model server on 127.0.0.1 (an ephemeral port).
pub struct FakeLlm {
    _proc: Killed,
    pub port: u16,
    pub log: PathBuf,
}

impl FakeLlm {
    pub fn start(dir: &Path, turns: Value) -> FakeLlm {
        let script = dir.join("llm-script.json");
        let log = dir.join("llm-requests.jsonl");
        let port_file = dir.join("llm-port");
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        let proc = Command::new("python3")
            .arg(root().join("tests/support/fake_llm.py"))
            .arg("--script")
            .arg(&script)
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs the fake model server");
        let proc = Killed(proc);
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                break p;
            }
            assert!(
                Instant::now() < deadline,
                "the fake model server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeLlm {
            _proc: proc,
            port,
            log,
        }
    }

    /// The bodies of the agent-loop requests (the ones that consumed a scripted turn).
    pub fn main_bodies(&self) -> Vec<Value> {
        read_jsonl(&self.log)
            .into_iter()
            .filter(|r| r["kind"] == "main")
            .map(|r| r["body"].clone())
            .collect()
    }

    /// What the model got back for each tool call, in order: Gemini's
    /// `functionResponse.response` or Qwen's tool message content, as JSON.
    pub fn tool_results(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for body in self.main_bodies() {
            if let Some(contents) = body["contents"].as_array() {
                let last = contents.last().cloned().unwrap_or(Value::Null);
                for part in last["parts"].as_array().cloned().unwrap_or_default() {
                    if let Some(r) = part.get("functionResponse") {
                        out.push(r["response"].clone());
                    }
                }
            }
            if let Some(messages) = body["messages"].as_array() {
                if let Some(m) = messages.last().filter(|m| m["role"] == "tool") {
                    out.push(m["content"].clone());
                }
            }
        }
        out
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

/// A scripted turn in which the model runs one shell command (both CLIs call the tool
/// `run_shell_command`).
pub fn shell(command: &str) -> Value {
    json!({"tool_calls": [{"name": "run_shell_command",
        "args": {"command": command, "description": "test step"}}]})
}

/// One test's private world: HOME with the agent's user settings, a workspace, the harness.
pub struct World {
    pub dir: tempfile::TempDir,
    pub agent: Agent,
}

impl World {
    pub fn new(agent: Agent) -> World {
        let dir = tempfile::Builder::new()
            .prefix(&format!("ahp-{}-e2e-", agent.dir()))
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        let world = World { dir, agent };
        // Offline: telemetry, usage statistics and update checks off; API-key auth.
        world.user_settings(match agent {
            Agent::Gemini => json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
            }),
            Agent::Qwen => json!({
                "security": {"auth": {"selectedType": "openai"}},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                "general": {"disableAutoUpdate": true}
            }),
        });
        world
    }

    /// The agent's user settings file (`~/.gemini/settings.json`, `~/.qwen/settings.json`).
    pub fn user_settings_file(&self) -> PathBuf {
        let dir = match self.agent {
            Agent::Gemini => ".gemini",
            Agent::Qwen => ".qwen",
        };
        self.dir.path().join("home").join(dir).join("settings.json")
    }

    pub fn user_settings(&self, settings: Value) {
        let file = self.user_settings_file();
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, settings.to_string()).unwrap();
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn events_log(&self) -> PathBuf {
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

    /// Events of one type the harness received (`ahp/event` params and batched events).
    pub fn harness_saw(&self, event_type: &str) -> Vec<Value> {
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
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }

    /// `ahp-wrap WRAPPER -- <agent> <prompt> …` in the workspace, offline, with `env` added.
    pub fn wrapped(
        &self,
        llm: &FakeLlm,
        wrapper: &[&str],
        prompt: &str,
        env: &[(&str, &Path)],
    ) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ahp-wrap"));
        cmd.args(wrapper).arg("--").arg(self.agent.bin());
        let base = format!("http://127.0.0.1:{}", llm.port);
        cmd.current_dir(self.ws())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path().join("home"))
            .env("TERM", "dumb")
            .env("LANG", "C.UTF-8")
            .env("NO_PROXY", "*");
        match self.agent {
            Agent::Gemini => {
                cmd.args([
                    "-p",
                    prompt,
                    "-m",
                    "gemini-2.5-flash",
                    "--yolo",
                    "--skip-trust",
                ])
                .env("GEMINI_API_KEY", "dummy")
                .env("GOOGLE_GEMINI_BASE_URL", base)
                .env("GEMINI_CLI_NO_RELAUNCH", "true")
                .env("GEMINI_TELEMETRY_ENABLED", "false");
            }
            Agent::Qwen => {
                cmd.args([prompt, "-m", "gpt-fake", "--yolo"])
                    .env("OPENAI_API_KEY", "dummy")
                    .env("OPENAI_BASE_URL", format!("{base}/v1"))
                    .env("OPENAI_MODEL", "gpt-fake")
                    .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1");
            }
        }
        cmd.args(["--output-format", "json"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run(cmd)
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
