//! Qwen Code's own state on the floor: its first interactive run acknowledges the notice of
//! its auto mode in `~/.qwen/settings.json`, beside the user's own settings, MCP servers and
//! hooks. On a real pty, from a home outside the temp directories, with settings of the
//! user's (so the file exists and was read-only on the floor): the acknowledgement persists
//! wrapped as unwrapped, and the notice is not shown again. An MCP server written into the
//! settings from Python does not survive the run.

use ahp_wrap_testkit::agents::{self, read_json, FakeServer, TestDir};
use ahp_wrap_testkit::common::dirs;
use ahp_wrap_testkit::llm_agents::{
    add_mcp_server_script, check_mcp_server_undone, fake_llm, shell, Agent,
};

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ahp_wrap_testkit::terminal::on_terminal;

use serde_json::{json, Value};

/// How long one interactive run may take.
const LIMIT: Duration = Duration::from_secs(60);

/// The notice the first start shows and acknowledges.
const NOTICE: &str = "Automodeenabled.";

fn world(settings_json: Value) -> TestDir {
    let dir = TestDir::new(
        "ahp-qwen-state-",
        Some(&dirs::outside_temp()),
        &["home/.qwen"],
    );
    std::fs::write(settings(&dir), settings_json.to_string()).unwrap();
    dir
}

fn settings(dir: &TestDir) -> PathBuf {
    dir.dir.path().join("home/.qwen/settings.json")
}

fn llm(dir: &TestDir, name: &str, turns: Value) -> FakeServer {
    fake_llm(dir.dir.path(), name, turns)
}

/// `qwen ARGS` (wrapped when `wrapper` is given), offline, its model the fake server.
fn qwen(dir: &TestDir, llm: &FakeServer, wrapper: Option<&[&str]>, args: &[&str]) -> Command {
    let mut cmd = agents::wrapped_or_not(&Agent::Qwen.bin(), wrapper);
    cmd.args(["-m", "gpt-fake"]).args(args);
    agents::offline(&mut cmd, dir);
    cmd.env("OPENAI_API_KEY", "dummy")
        .env(
            "OPENAI_BASE_URL",
            format!("http://127.0.0.1:{}/v1", llm.port),
        )
        .env("OPENAI_MODEL", "gpt-fake")
        .env("LANG", "C.UTF-8");
    cmd
}

/// The first start (the notice, a prompt) and the second (no notice). Returns the settings
/// after them. No tool call: in Qwen's default auto mode each is judged by a model
/// classifier, which a scripted model cannot answer the same way every time
/// (`tests/qwen_e2e.rs` runs tool calls wrapped, with `--yolo`).
fn two_runs(dir: &TestDir, wrapper: Option<&[&str]>) -> Value {
    let api = llm(dir, "first", json!([{"text": "FINISHED-TURN"}]));
    let steps = [
        "message",
        "hello",
        "",
        "\\r",
        "FINISHED-TURN",
        "/quit",
        "",
        "\\r",
        "@2",
        "\\r",
    ];
    let (screen, code) = on_terminal(&qwen(dir, &api, wrapper, &[]), &steps, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains(NOTICE),
        "the first start's notice: {screen}"
    );
    let api = llm(dir, "second", json!([{"text": "FINISHED-TURN"}]));
    let steps = [
        "message",
        "hello",
        "",
        "\\r",
        "FINISHED-TURN",
        "/quit",
        "",
        "\\r",
        "@2",
        "\\r",
    ];
    let (screen, code) = on_terminal(&qwen(dir, &api, wrapper, &[]), &steps, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains(NOTICE), "shown again: {screen}");
    read_json(&settings(dir))
}

#[test]
#[cfg_attr(
    skip_e2e = "qwen",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the qwen setup"
)]
fn the_acknowledged_notice_persists_on_the_floor_as_without_it() {
    let user = json!({"general": {"vimMode": false}});
    let plain = two_runs(&world(user.clone()), None);
    let wrapped = two_runs(&world(user), Some(&["--summary", "never"]));
    assert_eq!(wrapped["ui"], plain["ui"], "{wrapped}");
    assert_eq!(wrapped["ui"]["autoModeAcknowledged"], json!(true));
    assert_eq!(wrapped["general"], plain["general"]);
}

#[test]
#[cfg_attr(
    skip_e2e = "qwen",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the qwen setup"
)]
fn an_mcp_server_written_from_python_does_not_survive_the_run() {
    let attack = |floor: &str| {
        let dir = world(json!({"mcpServers": {"mine": {"command": "my-server"}},
                               "security": {"auth": {"selectedType": "openai"}}}));
        std::fs::write(
            dir.ws().join("setup.py"),
            add_mcp_server_script(&[".qwen", "settings.json"]),
        )
        .unwrap();
        let api = llm(
            &dir,
            "api",
            json!([shell("python3 setup.py"), {"text": "Done."}]),
        );
        let cmd = qwen(
            &dir,
            &api,
            Some(&["--summary", "never", "--floor", floor]),
            &["set up the project", "--yolo"],
        );
        let r = agents::run_within(cmd, Duration::from_secs(60));
        r.check(r.output.status.code() == Some(0), "the run ends normally");
        (read_json(&settings(&dir)), r)
    };
    let (after, r) = attack("on");
    check_mcp_server_undone(&r, &after);
    let (after, _) = attack("off");
    assert_eq!(after["mcpServers"]["evil"]["command"], "sh", "{after}");
}
