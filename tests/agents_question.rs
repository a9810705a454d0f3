//! The real Claude Code and Codex TUIs in tmux, waiting for the person's input, when a
//! question with no dialog of theirs arises: an MCP server of theirs (a process of the tree
//! that is not the agent) connects to a port of the person's loopback that the run does not
//! name, so the wrapper asks at the terminal. Typed into the agent's input box before the
//! question and after it, the keys reach the agent; the answer typed to the question reaches
//! the question (the connection goes through) and none of it the agent's input; the agent's
//! screen afterwards is the one it had drawn.

use ahp_wrap_testkit::agents::{self, TestDir};
use ahp_wrap_testkit::terminal::Tmux;
use ahp_wrap_testkit::{claude_code, codex};

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// The person's loopback server, and the MCP server's command that fetches from it once the
/// test creates `go`.
struct LateFetch {
    server: Child,
    port: u16,
    go: PathBuf,
    out: PathBuf,
}

impl LateFetch {
    /// The server's port file in `dir`; the MCP server's files in the workspace `ws` (where
    /// the floor lets the tree write).
    fn start(dir: &Path, ws: &Path) -> LateFetch {
        let port_file = dir.join("port");
        let server = Command::new("python3")
            .arg(script())
            .arg("serve")
            .arg(&port_file)
            .spawn()
            .unwrap();
        let until = std::time::Instant::now() + WAIT;
        while !port_file.exists() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        let port = std::fs::read_to_string(&port_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        LateFetch {
            server,
            port,
            go: ws.join("go"),
            out: ws.join("fetched"),
        }
    }

    /// The MCP server's arguments (after `python3`).
    fn args(&self) -> Vec<String> {
        vec![
            script().display().to_string(),
            "mcp".into(),
            self.go.display().to_string(),
            format!("http://127.0.0.1:{}/late", self.port),
            self.out.display().to_string(),
        ]
    }

    /// What the MCP server fetched, once it has.
    fn fetched(&self) -> Option<String> {
        let until = std::time::Instant::now() + WAIT;
        while std::time::Instant::now() < until {
            if let Ok(s) = std::fs::read_to_string(&self.out) {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for LateFetch {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// What the wrapper logged in the runs from `home`.
fn wrapper_log(home: &Path) -> String {
    let dir = home.join(".local/state/ahp-wrap");
    let mut out = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().extension().is_some_and(|x| x == "log") {
            out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
        }
    }
    out
}

/// Interactive `ahp-wrap WRAPPER -- codex` offline, its model the fake API.
fn interactive_codex(dir: &TestDir, api: &codex::FakeApi, wrapper: &[&str]) -> Command {
    let mut cmd = agents::wrapped_or_not(&codex::codex_bin(), Some(wrapper));
    cmd.args(api.model_args());
    agents::offline(&mut cmd, dir);
    cmd.env("FAKE_KEY", "dummy");
    cmd
}

fn script() -> PathBuf {
    agents::root().join("tests/support/late_fetch.py")
}

/// The agent in tmux has drawn `ready`: types `abc` into its input, makes the question arise,
/// answers it, types `def`; checks keys, screen and connection.
fn ask_while_the_agent_waits(tmux: &Tmux, late: &LateFetch, ready: &str, home: &Path) {
    tmux.wait_for(ready, WAIT);
    std::thread::sleep(Duration::from_secs(1));
    tmux.type_keys("abc");
    let before = tmux.wait_for("abc", WAIT);
    std::thread::sleep(Duration::from_millis(500));
    let before = tmux
        .wait_until(WAIT, |s| s.contains("abc"))
        .unwrap_or(before);
    std::fs::write(&late.go, "").unwrap();
    let asked = tmux.wait_for("Allow it?", WAIT);
    assert!(
        asked.contains(&format!("127.0.0.1:{}", late.port)) && !asked.contains(ready),
        "the question names the port, on a screen of its own:\n{asked}"
    );
    tmux.type_keys("y");
    std::thread::sleep(Duration::from_millis(300));
    tmux.enter();
    let fetched = late.fetched();
    assert_eq!(
        fetched.as_deref(),
        Some("late-fetch-reply"),
        "the answer reached the question: the connection went through; the screen:\n{}\n{}",
        tmux.screen(),
        wrapper_log(home)
    );
    // The agent's screen as it was, its input box holding what was typed for it alone.
    let after = tmux.wait_until(WAIT, |s| s == before).unwrap_or_else(|s| {
        panic!("the agent's screen after the question:\n{s}\n--- before it:\n{before}")
    });
    assert!(!after.contains("Allow it?"));
    tmux.type_keys("def");
    tmux.wait_until(WAIT, |s| s.contains("abcdef") && !s.contains("abcydef"))
        .unwrap_or_else(|s| panic!("keys typed after the question reach the agent:\n{s}"));
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn claude_code_waiting_for_input_keeps_its_keys_and_its_screen_through_a_question() {
    let world = claude_code::World::new();
    let late = LateFetch::start(world.dir.path(), &world.ws());
    world.onboarded();
    let mcp = world.dir.path().join("mcp.json");
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"late": {"command": "python3", "args": late.args()}}}).to_string(),
    )
    .unwrap();
    let api =
        claude_code::FakeApi::start(world.dir.path(), "api", json!([{"text": "FINISHED-TURN"}]));
    let mcp = mcp.display().to_string();
    let cmd = world.command(&api, Some(&[]), &["say hi", "--mcp-config", &mcp]);
    let tmux = Tmux::start(world.dir.path(), &cmd, 100, 30);
    ask_while_the_agent_waits(
        &tmux,
        &late,
        "FINISHED-TURN",
        &world.dir.path().join("home"),
    );
}

#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn codex_waiting_for_input_keeps_its_keys_and_its_screen_through_a_question() {
    let dir = TestDir::new(
        "ahp-codex-question-",
        Some(&ahp_wrap_testkit::common::dirs::outside_temp()),
        &["home/.codex"],
    );
    let late = LateFetch::start(dir.dir.path(), &dir.ws());
    let ws = dir.ws().canonicalize().unwrap();
    let quoted = |a: &str| format!("{a:?}");
    let args: Vec<String> = late.args().iter().map(|a| quoted(a)).collect();
    // The person's configuration: the workspace trusted, an MCP server of theirs.
    std::fs::write(
        dir.dir.path().join("home/.codex/config.toml"),
        format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n\n[mcp_servers.late]\ncommand = \"python3\"\nargs = [{}]\n",
            ws.display().to_string(),
            args.join(", ")
        ),
    )
    .unwrap();
    let api = codex::FakeApi::start(dir.dir.path(), "api", json!([{"text": "FINISHED-TURN"}]));
    let mut cmd = interactive_codex(&dir, &api, &[]);
    // Quiet as the suites' Codex is elsewhere: no analytics, update check or plugins.
    cmd.args(["-c", "analytics.enabled=false"])
        .args(["-c", "check_for_update_on_startup=false"])
        .args(["--disable", "plugins"])
        .arg("say hi");
    let tmux = Tmux::start(dir.dir.path(), &cmd, 100, 30);
    ask_while_the_agent_waits(&tmux, &late, "FINISHED-TURN", &dir.dir.path().join("home"));
}

/// Interactive Codex as a person starts it the first time: a fresh home (Codex asks for
/// trust in its own dialog), its analytics, update check and plugins as they come. Nothing
/// Codex reaches for itself at start is a question of the wrapper's.
#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn interactive_codex_from_a_fresh_home_asks_nothing_at_start() {
    let dir = TestDir::new(
        "ahp-codex-fresh-",
        Some(&ahp_wrap_testkit::common::dirs::outside_temp()),
        &["home"],
    );
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.ws())
        .status()
        .unwrap();
    assert!(git.success());
    let api = codex::FakeApi::start(dir.dir.path(), "api", json!([{"text": "FINISHED-TURN"}]));
    let audit = dir.dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let cmd = interactive_codex(&dir, &api, &["--audit-log", &audit_arg]);
    let tmux = Tmux::start(dir.dir.path(), &cmd, 100, 30);
    let mut seen = String::new();
    let trust = tmux.wait_until(WAIT, |s| {
        s.contains("trust") || s.contains("Trust") || s.contains("Allow it?")
    });
    let trust = trust.unwrap_or_else(|s| panic!("Codex's first screen:\n{s}"));
    seen.push_str(&trust);
    assert!(!trust.contains("Allow it?"), "asked at start:\n{trust}");
    // Codex's composer, once it is ready for a prompt (a busy machine takes a while). A key
    // pressed while Codex still draws its first screen can be lost: pressed again, as a
    // person would, while the trust question is still what it shows.
    let mut ready = Err(String::new());
    for _ in 0..3 {
        tmux.enter();
        ready = tmux.wait_until(WAIT / 3, |s| {
            s.contains("Ask Codex") || s.contains("Allow it?")
        });
        if ready.is_ok()
            || ready
                .as_ref()
                .is_err_and(|s| !s.contains("Trust this folder"))
        {
            break;
        }
    }
    seen.push_str(&ready.unwrap_or_else(|s| panic!("Codex's composer:\n{s}")));
    tmux.type_keys("say hi");
    tmux.wait_until(WAIT, |s| s.contains("say hi"))
        .unwrap_or_else(|s| panic!("the prompt typed:\n{s}"));
    std::thread::sleep(Duration::from_secs(1));
    tmux.enter();
    let done = tmux.wait_until(WAIT, |s| {
        s.contains("FINISHED-TURN") || s.contains("Allow it?")
    });
    let done = done.unwrap_or_else(|s| panic!("the turn:\n{s}"));
    seen.push_str(&done);
    // A few more seconds of an idle session: what Codex fetches in the background.
    std::thread::sleep(Duration::from_secs(5));
    seen.push_str(&tmux.screen());
    let records = ahp_wrap_testkit::common::read_jsonl(&audit);
    let net: Vec<String> = records
        .iter()
        .filter(|r| r["payload"]["tool_name"] == "net")
        .map(|r| {
            format!(
                "{} {} {}",
                r["decision"], r["payload"]["arguments"]["url"], r["reason"]
            )
        })
        .collect();
    assert!(
        !seen.contains("Allow it?"),
        "a question at start; Codex's connections: {net:#?}\n{seen}"
    );
    let asked: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r.to_string().contains("escalated to a person"))
        .collect();
    assert!(
        asked.is_empty(),
        "escalated: {asked:#?}; connections: {net:#?}"
    );
}

/// The hosts Codex's shim names as Codex's own (`ab.chatgpt.com`, which Codex asks for its
/// experiments when signed in with ChatGPT: a sign-in this offline suite cannot make) pass
/// without a question from any process of its tree; a host nobody names does not. Headless,
/// so a question would be a refusal; Codex's sandbox bypassed so that its command reaches
/// the network at all.
#[test]
#[cfg_attr(
    skip_e2e = "codex",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex setup"
)]
fn codexs_own_hosts_pass_and_a_host_nobody_names_does_not() {
    let world = codex::World::new();
    let api = codex::FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            codex::shell("curl -s -o /dev/null https://ab.chatgpt.com/; curl -s -o /dev/null https://unknown.example/; echo fetched"),
            {"text": "done"}
        ]),
    );
    let audit = world.dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let cmd = world.command_in(
        codex::Sandbox::Bypassed,
        &api,
        Some(&["--audit-log", &audit_arg]),
        &[],
        "fetch",
    );
    let r = codex::run(cmd);
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let records = ahp_wrap_testkit::common::read_jsonl(&audit);
    let decided = |host: &str| {
        records
            .iter()
            .find(|r| {
                r["payload"]["arguments"]["url"]
                    .as_str()
                    .is_some_and(|u| u.contains(host))
            })
            .unwrap_or_else(|| panic!("no decision on {host}: {records:#?}"))
            .clone()
    };
    let own = decided("ab.chatgpt.com");
    assert_eq!(own["decision"], "allow", "{own:#}");
    let unknown = decided("unknown.example");
    assert_eq!(unknown["decision"], "block", "{unknown:#}");
}
