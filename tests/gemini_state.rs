//! Gemini CLI's own state on the floor: its first interactive run asks to trust the folder
//! (saved in `~/.gemini/trustedFolders.json`, then it restarts) and how to authenticate
//! (saved in `~/.gemini/settings.json`, beside the user's own settings, MCP servers, hooks). On a real
//! pty, from a home outside the temp directories: the answers persist wrapped as unwrapped,
//! the next start asks nothing, and an MCP server written into the settings from Python does
//! not survive the run. Gemini runs wrapped as root only (shims/gemini/README.md).

use ahp_wrap_testkit::agents::{self, read_json, FakeServer, TestDir};
use ahp_wrap_testkit::common::dirs;
use ahp_wrap_testkit::llm_agents::{
    add_mcp_server_script, check_mcp_server_undone, fake_llm, shell, Agent,
};

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ahp_wrap_testkit::terminal::{on_terminal, on_terminal_again};

use serde_json::{json, Value};

fn world() -> TestDir {
    let dir = TestDir::new(
        "ahp-gemini-state-",
        Some(&dirs::outside_temp()),
        &["home/.gemini"],
    );
    std::fs::write(
        settings(&dir),
        json!({"general": {"vimMode": false}}).to_string(),
    )
    .unwrap();
    dir
}

fn settings(dir: &TestDir) -> PathBuf {
    dir.dir.path().join("home/.gemini/settings.json")
}

fn llm(dir: &TestDir, name: &str, turns: Value) -> FakeServer {
    fake_llm(dir.dir.path(), name, turns)
}

/// `gemini ARGS` (wrapped when `wrapper` is given), offline, with its state in `~/.gemini`.
fn gemini(dir: &TestDir, llm: &FakeServer, wrapper: Option<&[&str]>, args: &[&str]) -> Command {
    let mut cmd = agents::wrapped_or_not(&Agent::Gemini.bin(), wrapper);
    cmd.args(["-m", "gemini-2.5-flash", "--yolo"]).args(args);
    agents::offline(&mut cmd, dir);
    cmd.env("GEMINI_API_KEY", "dummy")
        .env(
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", llm.port),
        )
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_TELEMETRY_ENABLED", "false")
        .env("LANG", "C.UTF-8");
    cmd
}

/// How long one interactive run may take: a wrapped start beside a busy suite has taken
/// most of a minute.
const LIMIT: Duration = Duration::from_secs(120);

/// How many of a run's last steps (its quit) are typed again while Gemini still runs: keys
/// typed while it is busy (its slash commands not loaded yet, a turn's last hooks) may be
/// dropped or sent as a prompt, and a run that never quits would wait out the limit (exit
/// 99).
const QUIT_STEPS: usize = 4;

const TRUST: &str = "Doyoutrustthefilesinthisfolder?";
const AUTH: &str = "Howwouldyouliketoauthenticate";

/// The first start (trust, then Gemini restarts), the second (auth method, API key, a tool
/// call), the third (must ask nothing). Returns the settings and the trusted folders.
fn three_runs(dir: &TestDir, wrapper: Option<&[&str]>) -> (Value, Value) {
    let none = llm(dir, "none", json!([]));
    let (screen, code) = on_terminal(
        &gemini(dir, &none, wrapper, &[]),
        &["folder?", "", "Trust", "\\r"],
        LIMIT,
    );
    assert!(screen.contains(TRUST), "Gemini asks for trust: {screen}");
    assert_eq!(code, Some(199), "Gemini restarts to apply trust: {screen}");

    let api = llm(
        dir,
        "first",
        json!([shell("echo ran > ran.txt"), {"text": "FINISHED-TURN"}]),
    );
    let steps = [
        "select",
        "\\r",
        "submit",
        "\\r",
        "message",
        "run it",
        "",
        "\\r",
        // The turn's last hooks still run after its text shows: keys typed then may be
        // dropped (a "/quit" became "/clear" and a prompt once), so wait before typing.
        "FINISHED-TURN",
        "",
        "@3",
        "/quit",
        "@1",
        "\\r",
        // Enter may still be dropped: again.
        "@2",
        "\\r",
        "@2",
        "\\r",
    ];
    let (screen, code) =
        on_terminal_again(&gemini(dir, &api, wrapper, &[]), &steps, QUIT_STEPS, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains(AUTH),
        "Gemini asks how to authenticate: {screen}"
    );
    assert!(!screen.contains(TRUST), "asked for trust again: {screen}");
    assert!(
        dir.ws().join("ran.txt").exists(),
        "the tool call ran: {screen}"
    );

    // No prompt this time: what is checked is that nothing is asked before it.
    let api = llm(dir, "second", json!([]));
    // The input box shows before the slash commands are loaded (a "/quit" typed then was
    // sent to the model as a prompt once): wait for the banner that follows, and a little.
    let steps = [
        "Tips", "", "@2", "/quit", "@1", "\\r", "@2", "\\r", "@2", "\\r",
    ];
    let (screen, code) =
        on_terminal_again(&gemini(dir, &api, wrapper, &[]), &steps, QUIT_STEPS, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        !screen.contains(TRUST) && !screen.contains(AUTH),
        "asked again on the third start: {screen}"
    );
    let trusted = dir.dir.path().join("home/.gemini/trustedFolders.json");
    (read_json(&settings(dir)), read_json(&trusted))
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn first_run_answers_persist_on_the_floor_as_without_it() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: Gemini CLI runs wrapped as root only (shims/gemini/README.md)");
        return;
    }
    let plain = world();
    let (settings_plain, trusted_plain) = three_runs(&plain, None);
    let wrapped = world();
    let (settings_wrapped, trusted_wrapped) = three_runs(&wrapped, Some(&["--summary", "never"]));
    assert_eq!(
        settings_wrapped["security"], settings_plain["security"],
        "the auth method"
    );
    assert_eq!(settings_wrapped["general"], settings_plain["general"]);
    let ws = |d: &TestDir| d.ws().canonicalize().unwrap().display().to_string();
    assert_eq!(trusted_wrapped[ws(&wrapped)], trusted_plain[ws(&plain)]);
    assert_eq!(trusted_wrapped[ws(&wrapped)], "TRUST_FOLDER");
}

#[test]
#[cfg_attr(
    skip_e2e = "gemini",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the gemini setup"
)]
fn an_mcp_server_written_from_python_does_not_survive_the_run() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: Gemini CLI runs wrapped as root only (shims/gemini/README.md)");
        return;
    }
    let attack = |floor: &str| {
        let dir = world();
        std::fs::write(
            settings(&dir),
            json!({"mcpServers": {"mine": {"command": "my-server"}},
                   "security": {"auth": {"selectedType": "gemini-api-key"}}})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            dir.ws().join("setup.py"),
            add_mcp_server_script(&[".gemini", "settings.json"]),
        )
        .unwrap();
        let api = llm(
            &dir,
            "api",
            json!([shell("python3 setup.py"), {"text": "Done."}]),
        );
        let cmd = gemini(
            &dir,
            &api,
            Some(&["--summary", "never", "--floor", floor]),
            &["-p", "set up the project", "--skip-trust"],
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
