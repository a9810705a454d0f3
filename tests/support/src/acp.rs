//! What tests/acp_proxy.rs, tests/acp_codex.rs and tests/acp_claude.rs run: a real ACP agent
//! ([`AcpAgent`]: Gemini CLI in `--acp` mode, Zed's codex-acp or claude-agent-acp, against a
//! scripted fake model server), a real
//! editor built on the official ACP client library (`acp_editor.mjs`), and the proxy between
//! them with a real gate: in-process, or as `ahp-wrap --framework acp`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use ahp_wrap::audit::{AuditLog, Auditor};
use ahp_wrap::client::{Client, ClientConfig};
use ahp_wrap::gate::{Decider, Embedded, FailMode, Gate, Harness, Mode};
use ahp_wrap::intercept::proxy::acp::Acp;
use ahp_wrap::intercept::proxy::{run, Ended, Options, Streams};
use ahp_wrap::policy::Policy;
use ahp_wrap::transport::{AuthScheme, HarnessSpec, LinkConfig};
use serde_json::{json, Value};
use tokio::process::Command;

use crate::agents::{self, FakeServer, TestDir};
use crate::llm_agents::Agent;

/// The rules both ACP suites run under: writes to files named secret* are blocked, by a
/// file tool, a patch or a shell command alike; a command that creates `explicit-marker` is
/// explicitly allowed.
pub const POLICY: &str = r#"
[[rule]]
id = "acp-no-secrets"
decision = "block"
reason = "files named secret* are off limits (rule acp-1)"
tools = ["acp__*"]
file.writes = ["**/secret*"]

[[rule]]
id = "acp-explicit"
decision = "allow"
tools = ["acp__execute"]
file.writes = ["**/explicit-marker"]
"#;
/// The time limit of one editor session (the machine may be busy).
const LIMIT: Duration = Duration::from_secs(120);

/// The directory holding `node_modules/@agentclientprotocol/sdk`, or a failure that says
/// how to install it.
fn sdk_dir() -> PathBuf {
    let dir = agents::root().join("tests/.cache/acp");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk/package.json")
            .exists(),
        "the ACP client library is not installed under {}: run tests/acp/setup.sh first (it \
         installs the pinned @agentclientprotocol/sdk from the npm registry), or set {}=acp \
         to skip these tests on purpose",
        dir.display(),
        agents::SKIP_ENV,
    );
    dir
}

/// What decides: the embedded policy (this rules file), or a harness nobody listens on.
pub enum Decides<'a> {
    Policy(&'a str),
    HarnessDown,
}

/// A run's gate for `world`: fail mode closed, no person at a terminal, an audit log.
fn gate(world: &TestDir, decides: Decides) -> Arc<Gate> {
    let harness = match decides {
        Decides::Policy(rules) => {
            let policy = Policy::from_toml_str(rules)
                .unwrap()
                .with_workspace(world.ws().canonicalize().unwrap());
            Harness::Embedded(Arc::new(Embedded::new(policy, Mode::Enforce)))
        }
        Decides::HarnessDown => Harness::Remote(Client::start(
            HarnessSpec::Unix(world.dir.path().join("nobody-listens.sock")),
            ClientConfig {
                link: LinkConfig {
                    token: None,
                    auth: AuthScheme::Bearer,
                    max_frame: 1 << 20,
                },
                session_id: "acp-test".into(),
                agent_id: "acp-editor".into(),
                framework: "acp".into(),
                framework_version: "0".into(),
                batch_window: Duration::from_millis(20),
            },
        )),
    };
    let log = AuditLog::open(&world.dir.path().join("audit.jsonl"), None).unwrap();
    let decider = Decider {
        harness,
        fail_mode: FailMode::Closed,
        timeout: Duration::from_secs(5),
        approver: None,
    };
    let gate = Gate::new(
        "acp-test".into(),
        "acp-editor".into(),
        0,
        decider,
        Auditor::new(log),
    );
    Arc::new(gate)
}

/// What one editor session left behind.
pub struct Session {
    /// Everything the editor saw, in order (see acp_editor.mjs).
    pub editor: Vec<Value>,
    pub ended: Ended,
}

impl Session {
    pub fn saw(&self, kind: &str) -> Vec<Value> {
        self.editor
            .iter()
            .filter(|e| e["kind"] == kind)
            .cloned()
            .collect()
    }

    /// The text of every agent message the editor showed.
    pub fn messages(&self) -> String {
        self.saw("update")
            .iter()
            .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["update"]["content"]["text"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The ACP agents these suites drive, each offline against a scripted fake model server
/// (`fake_llm.py`, which speaks Gemini's API and OpenAI's Responses API, or
/// `fake_anthropic.py` for Claude).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcpAgent {
    /// Gemini CLI in `--acp` mode (tests/gemini/setup.sh).
    Gemini,
    /// Zed's ACP adapter for Codex, `codex-acp` (tests/codex-acp/setup.sh).
    CodexAcp,
    /// Zed's ACP adapter for Claude Code, `claude-agent-acp` (tests/claude-acp/setup.sh).
    ClaudeAcp,
}

impl AcpAgent {
    /// Its name: the setup that installs it, and the agent the proxy names in its log.
    pub fn name(self) -> &'static str {
        match self {
            AcpAgent::Gemini => "gemini",
            AcpAgent::CodexAcp => "codex-acp",
            AcpAgent::ClaudeAcp => "claude-agent-acp",
        }
    }

    /// The agent's command, in the workspace, offline, against `llm`; its stderr goes to
    /// `agent.stderr` in the test's directory.
    fn command(self, world: &TestDir, llm: &FakeServer) -> Command {
        let mut cmd = match self {
            AcpAgent::Gemini => gemini(world, llm),
            AcpAgent::CodexAcp => codex_acp(world, llm),
            AcpAgent::ClaudeAcp => claude_acp(world, llm),
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(world.dir.path().join("agent.stderr")).unwrap(),
            ));
        let mut cmd = Command::from(cmd);
        cmd.kill_on_drop(true);
        cmd
    }
}

/// The pinned codex-acp version (installed by tests/codex-acp/setup.sh).
const CODEX_ACP_VERSION: &str = include_str!("../../codex-acp/VERSION");

/// Gemini CLI in ACP mode. File edits are approved by the agent itself (`auto_edit`), so
/// that they reach the editor as `fs/write_text_file`; shell commands still ask for
/// permission.
fn gemini(world: &TestDir, llm: &FakeServer) -> std::process::Command {
    let mut cmd = std::process::Command::new(Agent::Gemini.bin());
    agents::offline(&mut cmd, world);
    cmd.args(["--acp", "-m", "gemini-2.5-flash", "--skip-trust"])
        .args(["--approval-mode", "auto_edit"])
        .env("GEMINI_API_KEY", "dummy")
        .env(
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", llm.port),
        )
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_TELEMETRY_ENABLED", "false")
        .env("NO_PROXY", "*")
        .env("TERM", "dumb");
    cmd
}

/// codex-acp, its model the fake server through a `model_providers` entry (OpenAI's
/// Responses API), its state in the test's own `CODEX_HOME`. Codex's sandbox needs
/// bubblewrap, which a test machine may lack: commands run unsandboxed, and every patch and
/// every command not known to be read-only asks first (`approval_policy = "untrusted"`), as
/// a `session/request_permission` to the editor.
fn codex_acp(world: &TestDir, llm: &FakeServer) -> std::process::Command {
    let bin = agents::installed_bin(
        "codex-acp",
        CODEX_ACP_VERSION.trim(),
        "codex-acp",
        "ACP adapter for Codex",
        "@zed-industries/codex-acp",
    );
    let home = world.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    let provider = format!(
        "model_providers.fake={{name=\"fake\",base_url=\"http://127.0.0.1:{}/v1\",wire_api=\"responses\",env_key=\"FAKE_KEY\"}}",
        llm.port
    );
    let mut cmd = std::process::Command::new(bin);
    agents::offline(&mut cmd, world);
    for config in [
        "model_provider=\"fake\"",
        &provider,
        "model=\"gpt-fake\"",
        "sandbox_mode=\"danger-full-access\"",
        "approval_policy=\"untrusted\"",
        "analytics.enabled=false",
        "check_for_update_on_startup=false",
    ] {
        cmd.args(["-c", config]);
    }
    cmd.env("CODEX_HOME", home)
        .env("FAKE_KEY", "dummy")
        .env("NO_PROXY", "*");
    cmd
}

/// The pinned claude-agent-acp version (installed by tests/claude-acp/setup.sh).
const CLAUDE_ACP_VERSION: &str = include_str!("../../claude-acp/VERSION");

/// claude-agent-acp, running the Claude Code its Agent SDK bundles against the fake
/// Anthropic server, its configuration in the test's HOME. Claude Code's own permission mode
/// is the default one: every edit and every command not known to be read-only asks first,
/// as a `session/request_permission` to the editor.
fn claude_acp(world: &TestDir, api: &FakeServer) -> std::process::Command {
    let bin = agents::installed_bin(
        "claude-acp",
        CLAUDE_ACP_VERSION.trim(),
        "claude-agent-acp",
        "ACP adapter for Claude Code",
        "@zed-industries/claude-agent-acp",
    );
    let mut cmd = std::process::Command::new(bin);
    agents::offline(&mut cmd, world);
    crate::claude_code::offline_env(&mut cmd, world.dir.path().join("home/.claude"), api.port);
    cmd
}

/// The editor, whose scripted person answers every permission request `person` ("allow"
/// or "reject"), sending `prompts` in one session; `more` is merged into its configuration
/// (e.g. `cancel_when`, see acp_editor.mjs).
fn editor(world: &TestDir, person: &str, prompts: &[&str], more: Value) -> Command {
    let config = world.dir.path().join("editor.json");
    let ws = world.ws().canonicalize().unwrap();
    let mut c = json!({"sdk": sdk_dir(), "cwd": ws, "log": world.dir.path().join("editor.jsonl"),
                   "prompts": prompts, "person": person});
    if let (Some(c), Value::Object(more)) = (c.as_object_mut(), more) {
        c.extend(more);
    }
    std::fs::write(&config, c.to_string()).unwrap();
    let script = agents::root().join("tests/support/acp_editor.mjs");
    let mut cmd = Command::new("node");
    cmd.arg(script)
        .arg(config)
        .current_dir(ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(world.dir.path().join("editor.stderr")).unwrap(),
        ))
        .kill_on_drop(true);
    cmd
}

/// One editor session with `agent` through the proxy in-process: the editor runs its
/// prompts to the end.
pub async fn session(
    world: &TestDir,
    agent_kind: AcpAgent,
    llm: &FakeServer,
    decides: Decides<'_>,
    person: &str,
    prompts: &[&str],
) -> Session {
    let gate = gate(world, decides);
    let mut agent = agent_kind
        .command(world, llm)
        .spawn()
        .expect("cannot start the agent");
    let mut ed = editor(world, person, prompts, Value::Null)
        .spawn()
        .expect("cannot start node");
    let streams = Streams {
        client_in: ed.stdout.take().unwrap(),
        client_out: ed.stdin.take().unwrap(),
        server_in: agent.stdin.take().unwrap(),
        server_out: agent.stdout.take().unwrap(),
    };
    let acp = Acp::new(agent_kind.name(), Some(world.ws().canonicalize().unwrap()));
    let proxy = tokio::spawn(async move {
        run(
            Arc::new(acp),
            gate,
            streams,
            Options::default(),
            std::future::pending(),
        )
        .await
    });
    let status = tokio::time::timeout(LIMIT, ed.wait()).await;
    let read =
        |name: &str| std::fs::read_to_string(world.dir.path().join(name)).unwrap_or_default();
    let status = status.unwrap_or_else(|_| {
        panic!(
            "the editor session did not end in time; editor stderr:\n{}\nagent stderr:\n{}",
            read("editor.stderr"),
            read("agent.stderr")
        )
    });
    assert!(
        status.as_ref().is_ok_and(|s| s.success()),
        "the editor failed ({status:?}); its stderr:\n{}",
        read("editor.stderr")
    );
    let ended = tokio::time::timeout(LIMIT, proxy).await.unwrap().unwrap();
    let _ = agent.kill().await;
    Session {
        editor: agents::read_jsonl(&world.dir.path().join("editor.jsonl")),
        ended,
    }
}

/// One editor session with `agent` run as `ahp-wrap --framework acp <wrapper> -- <agent> …`,
/// as an editor configured with that command would run it; returns what the editor saw.
pub async fn session_through_the_cli(
    world: &TestDir,
    agent: AcpAgent,
    llm: &FakeServer,
    wrapper: &[&str],
    person: &str,
    prompts: &[&str],
) -> Vec<Value> {
    let ed = editor(world, person, prompts, Value::Null);
    through_the_cli(world, agent, llm, wrapper, ed).await
}

/// [`session_through_the_cli`] under the rules both ACP suites share: `ahp-wrap --framework
/// acp --policy` [`POLICY`] `--audit-log <test dir>/audit.jsonl -- <agent>`.
pub async fn under_the_policy(
    world: &TestDir,
    agent: AcpAgent,
    llm: &FakeServer,
    person: &str,
    prompts: &[&str],
) -> Editor {
    let policy = world.dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let audit_log = world.dir.path().join("audit.jsonl");
    let wrapper = [
        "--policy",
        policy.to_str().unwrap(),
        "--audit-log",
        audit_log.to_str().unwrap(),
    ];
    Editor(session_through_the_cli(world, agent, llm, &wrapper, person, prompts).await)
}

/// The records of the audit log [`under_the_policy`] keeps.
pub fn audit(world: &TestDir) -> Vec<Value> {
    agents::read_jsonl(&world.dir.path().join("audit.jsonl"))
}

/// The tools whose `pre_action` the audit log says was blocked, in order.
pub fn blocked_tools(world: &TestDir) -> Vec<String> {
    audit(world)
        .iter()
        .filter(|r| r["event_type"] == "pre_action" && r["decision"] == "block")
        .filter_map(|r| r["payload"]["tool_name"].as_str().map(str::to_owned))
        .collect()
}

/// [`session_through_the_cli`] with an editor whose person says yes to what it is asked but
/// cancels the turn as soon as `file` holds `text`.
pub async fn cancelled_through_the_cli(
    world: &TestDir,
    agent: AcpAgent,
    llm: &FakeServer,
    wrapper: &[&str],
    prompts: &[&str],
    (file, text): (&Path, &str),
) -> Vec<Value> {
    let when = json!({"cancel_when": {"file": file, "contains": text}});
    let ed = editor(world, "allow", prompts, when);
    through_the_cli(world, agent, llm, wrapper, ed).await
}

async fn through_the_cli(
    world: &TestDir,
    agent: AcpAgent,
    llm: &FakeServer,
    wrapper: &[&str],
    mut editor: Command,
) -> Vec<Value> {
    let agent = agent.command(world, llm);
    let std = agent.as_std();
    let mut cmd = std::process::Command::new(crate::wrap_bin());
    cmd.args(["--framework", "acp"])
        .args(wrapper)
        .arg("--")
        .arg(std.get_program())
        .args(std.get_args())
        .current_dir(world.ws())
        // The agent's environment exactly as `agents::offline` made it (it starts empty).
        .env_clear();
    for (k, v) in std.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(world.dir.path().join("wrapper.stderr")).unwrap(),
        ));
    let mut wrapped = Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("ahp-wrap");
    let mut ed = editor.spawn().expect("node");
    let (mut e_out, mut e_in) = (ed.stdout.take().unwrap(), ed.stdin.take().unwrap());
    let (mut w_out, mut w_in) = (
        wrapped.stdout.take().unwrap(),
        wrapped.stdin.take().unwrap(),
    );
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut e_out, &mut w_in).await;
    });
    let down = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut w_out, &mut e_in).await;
    });
    let read =
        |name: &str| std::fs::read_to_string(world.dir.path().join(name)).unwrap_or_default();
    let status = tokio::time::timeout(LIMIT, ed.wait())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the editor did not end in time; ahp-wrap said:\n{}",
                read("wrapper.stderr")
            )
        });
    assert!(
        status.as_ref().is_ok_and(|s| s.success()),
        "the editor failed ({status:?}); its stderr:\n{}\nahp-wrap's:\n{}",
        read("editor.stderr"),
        read("wrapper.stderr")
    );
    let _ = up.await;
    let exit = tokio::time::timeout(LIMIT, wrapped.wait()).await;
    assert!(exit.is_ok(), "ahp-wrap did not end after the editor left");
    down.abort();
    agents::read_jsonl(&world.dir.path().join("editor.jsonl"))
}

/// Everything the editor saw, in order (see acp_editor.mjs).
pub struct Editor(pub Vec<Value>);

impl Editor {
    pub fn saw(&self, kind: &str) -> Vec<&Value> {
        self.0.iter().filter(|e| e["kind"] == kind).collect()
    }

    /// The titles of the permission requests the editor's person was asked.
    pub fn asked(&self) -> Vec<String> {
        self.saw("permission")
            .iter()
            .map(|p| p["toolCall"]["title"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// The text of every agent message the editor showed.
    pub fn messages(&self) -> String {
        self.saw("update")
            .iter()
            .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["update"]["content"]["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Each prompt's stop reason, in order.
    pub fn stops(&self) -> Vec<Value> {
        self.saw("stop")
            .iter()
            .map(|s| s["stopReason"].clone())
            .collect()
    }
}

/// The four prompts of the scenario the agents that act by themselves share (codex-acp,
/// claude-agent-acp): write the secret (blocked), write the notes (asked), touch the secret
/// marker (blocked), touch the allowed marker (asked); one scripted call for each.
pub const FOUR_PROMPTS: [&str; 4] = [
    "write the secret",
    "write the notes",
    "touch the secret marker",
    "touch the allowed marker",
];

impl Editor {
    /// The [`FOUR_PROMPTS`] scenario's person was asked about the write and the command the
    /// policy had no opinion on, in order, and never about the blocked ones.
    pub fn assert_asked_only_about_the_allowed(&self, log: &str) {
        let asked = self.asked();
        assert_eq!(asked.len(), 2, "{log}");
        assert!(asked[0].contains("notes.txt"), "{log}");
        assert!(asked[1].contains("allowed-marker"), "{log}");
    }

    /// The agent did it all itself: no file or terminal call reached the editor.
    pub fn assert_no_file_or_terminal_calls(&self, log: &str) {
        assert!(
            self.saw("write").is_empty() && self.saw("read").is_empty(),
            "{log}"
        );
        assert!(self.saw("terminal").is_empty(), "{log}");
    }
}

/// The explicit-allow scenario: the agent, scripted (by the caller's `server`) to make
/// `explicit-marker` and then `asked-marker` in the workspace, one prompt each, under
/// [`POLICY`], with a person who says no to everything. The policy's explicit allow answers
/// for the editor (the first marker is made, the person never asked); its silence leaves the
/// second to the person (asked, refused, not made). Returns what the editor saw.
pub async fn explicit_allow_then_a_person_who_says_no(
    world: &TestDir,
    agent: AcpAgent,
    server: &FakeServer,
) -> Editor {
    let ws = world.ws().canonicalize().unwrap();
    let e = under_the_policy(world, agent, server, "reject", &["one", "two"]).await;
    let log = format!("the editor saw: {:#?}", e.0);
    explicit_ran_and_the_refused_one_did_not(&ws, &e.asked(), &log);
    e
}

/// What an explicit allow beside a question the person refuses leaves in `ws`: the allowed
/// command ran (`explicit-marker`), the asked one did not (`asked-marker`), and the person
/// was asked once, about it (`asked`: the titles of the permission requests). `log` says
/// what the editor saw.
pub fn explicit_ran_and_the_refused_one_did_not(ws: &Path, asked: &[String], log: &str) {
    assert!(
        ws.join("explicit-marker").exists(),
        "the explicitly allowed command did not run; {log}"
    );
    assert!(
        !ws.join("asked-marker").exists(),
        "the person's no was overridden; {log}"
    );
    assert_eq!(asked.len(), 1, "{log}");
    assert!(asked[0].contains("asked-marker"), "{log}");
}

/// The harness-down scenario: the agent, scripted (by the caller's `server`) to make
/// `marker` in the workspace, through the proxy in-process with a harness nobody listens on.
/// The prompt itself is refused: the turn stops with `refusal`, the editor reads why, the
/// model is never asked and nothing is made.
pub async fn harness_down_refuses_the_prompt(
    world: &TestDir,
    agent: AcpAgent,
    server: &FakeServer,
) {
    let ws = world.ws().canonicalize().unwrap();
    let s = session(
        world,
        agent,
        server,
        Decides::HarnessDown,
        "allow",
        &["please do the task"],
    )
    .await;
    let log = format!("the editor saw: {:#?}", s.editor);
    assert_eq!(
        s.saw("stop"),
        [json!({"kind": "stop", "stopReason": "refusal"})],
        "{log}"
    );
    assert!(
        s.messages().contains("[ahp-wrap]"),
        "the editor was not told why; {log}"
    );
    assert!(
        server.main_bodies().is_empty(),
        "the prompt reached the model"
    );
    assert!(!ws.join("marker").exists());
}

/// What every ACP scenario checks on disk, in the workspace `ws`: the blocked write
/// (`secret.txt`) and the blocked command (`secret-marker`) did not happen; the allowed write
/// left `notes` in `notes.txt` and the allowed command made `allowed-marker`. `log` is what
/// the editor saw, shown on failure.
pub fn assert_blocked_and_allowed(ws: &std::path::Path, notes: &str, log: &str) {
    assert!(
        !ws.join("secret.txt").exists(),
        "the blocked write reached the disk; {log}"
    );
    let written = std::fs::read_to_string(ws.join("notes.txt")).ok();
    assert_eq!(
        written.as_deref(),
        Some(notes),
        "the allowed write did not; {log}"
    );
    assert!(
        !ws.join("secret-marker").exists(),
        "the blocked command ran; {log}"
    );
    assert!(
        ws.join("allowed-marker").exists(),
        "the allowed command did not run; {log}"
    );
}
