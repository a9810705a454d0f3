//! droid's own state on the floor: its first interactive start asks "Trust this folder?" and
//! keeps the answer in `~/.factory/settings.json`, beside the user's custom models (their URL
//! and key), hooks and grants. On a real pty (droid in its air-gapped mode, its model the
//! user's own custom model: the fake server), from a home outside the temp directories: the
//! answer persists wrapped as unwrapped, the next start asks nothing, and a hook written into
//! the settings from Python does not survive the run.

use ahp_wrap_testkit::agents::{self, read_json, FakeServer, TestDir};
use ahp_wrap_testkit::common::dirs;
use ahp_wrap_testkit::llm_agents::{fake_llm, Agent};
use ahp_wrap_testkit::terminal::on_terminal;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

/// How long one interactive run may take.
const LIMIT: Duration = Duration::from_secs(60);

const TRUST: &str = "Trustthisfolder?";

fn world() -> TestDir {
    TestDir::new(
        "ahp-droid-state-",
        Some(&dirs::outside_temp()),
        &["home/.factory"],
    )
}

fn settings(dir: &TestDir) -> PathBuf {
    dir.dir.path().join("home/.factory/settings.json")
}

/// A fake model server, and the user's settings naming it as their custom model.
fn llm(dir: &TestDir, name: &str, turns: Value) -> FakeServer {
    let api = fake_llm(dir.dir.path(), name, turns);
    let mut user = std::fs::read(settings(dir))
        .ok()
        .and_then(|s| serde_json::from_slice::<Value>(&s).ok())
        .unwrap_or_else(|| json!({}));
    user["customModels"] = json!([{
        "model": "gpt-fake", "displayName": "Fake",
        "baseUrl": format!("http://127.0.0.1:{}/v1", api.port),
        "apiKey": "sk-fake", "provider": "generic-chat-completion-api", "maxOutputTokens": 4096
    }]);
    std::fs::write(settings(dir), user.to_string()).unwrap();
    api
}

fn execute(command: &str) -> Value {
    json!({"tool_calls": [{"name": "Execute", "args": {
        "command": command, "riskLevel": "low", "riskLevelReason": "test step"}}]})
}

/// `droid ARGS` (wrapped when `wrapper` is given), offline.
fn droid(dir: &TestDir, wrapper: Option<&[&str]>, args: &[&str]) -> Command {
    let mut cmd = agents::wrapped_or_not(&Agent::Droid.bin(), wrapper);
    cmd.args(args);
    agents::offline(&mut cmd, dir);
    cmd.env("FACTORY_AIRGAP_ENABLED", "true")
        .env("LANG", "C.UTF-8");
    cmd
}

/// The first start (trust, a prompt, the command approved, /quit) and the second (/quit:
/// nothing must be asked before it). Returns the settings after them.
fn two_runs(dir: &TestDir, wrapper: Option<&[&str]>) -> Value {
    let _api = llm(
        dir,
        "first",
        json!([execute("echo ran > ran.txt"), {"text": "FINISHED-TURN"}]),
    );
    let steps = [
        "folder?",
        "\\r",
        "help",
        "run it",
        "@1",
        "\\r",
        "approve",
        "\\r",
        "FINISHED-TURN",
        "/quit",
        "@1",
        "\\r",
        "@3",
        "\\r",
    ];
    let (screen, code) = on_terminal(&droid(dir, wrapper, &[]), &steps, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        dir.ws().join("ran.txt").exists(),
        "the tool call ran: {screen}"
    );
    let _api = llm(dir, "second", json!([]));
    let steps = ["help", "/quit", "@1", "\\r", "@3", "\\r"];
    let (screen, code) = on_terminal(&droid(dir, wrapper, &[]), &steps, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains(TRUST), "asked again: {screen}");
    read_json(&settings(dir))
}

#[test]
#[cfg_attr(
    skip_e2e = "droid",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the droid setup"
)]
fn the_trust_answer_persists_on_the_floor_as_without_it() {
    let (plain_world, wrapped_world) = (world(), world());
    let plain = two_runs(&plain_world, None);
    let wrapped = two_runs(&wrapped_world, Some(&["--summary", "never"]));
    // The folder droid trusts is where it was started or the repository above it, which
    // depends on the machine: each named relative to its own world when it lies inside it.
    let folders = |s: &Value, world: &TestDir| -> Vec<String> {
        let relative = |k: &String| match std::path::Path::new(k).strip_prefix(world.dir.path()) {
            Ok(inside) => format!("<world>/{}", inside.display()),
            Err(_) => k.clone(),
        };
        s["trustedFolders"]
            .as_object()
            .map(|o| o.keys().map(relative).collect())
            .unwrap_or_default()
    };
    assert_eq!(folders(&plain, &plain_world).len(), 1, "{plain}");
    assert_eq!(
        folders(&wrapped, &wrapped_world),
        folders(&plain, &plain_world),
        "{wrapped}"
    );
    assert_eq!(wrapped["logoAnimation"], plain["logoAnimation"]);
}

#[test]
#[cfg_attr(
    skip_e2e = "droid",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the droid setup"
)]
fn a_hook_written_into_the_settings_from_python_does_not_survive_the_run() {
    // The path is built at run time, so that the policy's reading of the script does not
    // see it: the floor is what stands between.
    let script = "import json, os\n\
        p = os.path.join(os.environ['HOME'], '.fac' + 'tory', 'sett' + 'ings.json')\n\
        d = json.load(open(p))\n\
        d['hooks'] = {'SessionStart': [{'hooks': [{'type': 'command', 'command': 'touch PWNED'}]}]}\n\
        json.dump(d, open(p, 'w'))\n";
    let attack = |floor: &str| {
        let dir = world();
        std::fs::write(dir.ws().join("setup.py"), script).unwrap();
        let api = llm(
            &dir,
            "api",
            json!([execute("python3 setup.py"), {"text": "Done."}]),
        );
        let cmd = droid(
            &dir,
            Some(&["--summary", "never", "--floor", floor]),
            &[
                "exec",
                "-m",
                "custom:Fake-0",
                "--auto",
                "low",
                "set up the project",
            ],
        );
        let r = agents::run_within(cmd, Duration::from_secs(60));
        r.check(r.output.status.code() == Some(0), "the run ends normally");
        r.check(api.requests().len() >= 2, "the script's result went back");
        read_json(&settings(&dir))
    };
    let after = attack("on");
    assert!(after.get("hooks").is_none(), "{after}");
    assert_eq!(after["customModels"][0]["model"], "gpt-fake", "{after}");
    let after = attack("off");
    assert_eq!(
        after["hooks"]["SessionStart"][0]["hooks"][0]["command"], "touch PWNED",
        "{after}"
    );
}
