//! Copilot CLI's own state on the floor: its first interactive run asks to trust the
//! folder, and "remember this folder" saves it in `~/.copilot/config.json`. Under the
//! wrapper Copilot's home is a run-private overlay whose entries link to the real one;
//! Copilot replaces `config.json` by a rename, so what it saved used to stay in the overlay
//! and vanish with the run. On a real pty, from a home outside the temp directories: the
//! answer persists wrapped as unwrapped, and the next start asks nothing. A folder trusted
//! from Python does not stay trusted.

use ahp_wrap_testkit::agents::{self, FakeServer, TestDir};
use ahp_wrap_testkit::common::dirs;
use ahp_wrap_testkit::llm_agents::{fake_llm, shell_tool, Agent};
use ahp_wrap_testkit::terminal::on_terminal;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

/// How long one interactive run may take.
const LIMIT: Duration = Duration::from_secs(60);

const TRUST: &str = "Doyoutrustthefilesinthisfolder?";

fn world() -> TestDir {
    let dir = TestDir::new(
        "ahp-copilot-state-",
        Some(&dirs::outside_temp()),
        &["home/.copilot"],
    );
    std::fs::write(
        config(&dir),
        json!({"trustedFolders": ["/srv/mine"], "firstLaunchAt": "2026-01-01T00:00:00.000Z"})
            .to_string(),
    )
    .unwrap();
    dir
}

fn config(dir: &TestDir) -> PathBuf {
    dir.dir.path().join("home/.copilot/config.json")
}

/// The file as Copilot writes it: JSON headed by `//` comment lines.
fn read_config(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let json: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&json).unwrap()
}

fn llm(dir: &TestDir, name: &str, turns: Value) -> FakeServer {
    fake_llm(dir.dir.path(), name, turns)
}

fn copilot(dir: &TestDir, llm: &FakeServer, wrapper: Option<&[&str]>, args: &[&str]) -> Command {
    let mut cmd = agents::wrapped_or_not(&Agent::Copilot.bin(), wrapper);
    cmd.arg("--no-auto-update").args(args);
    agents::offline(&mut cmd, dir);
    cmd.env("COPILOT_OFFLINE", "true")
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{}/v1", llm.port),
        )
        .env("COPILOT_PROVIDER_TYPE", "openai")
        .env("COPILOT_MODEL", "gpt-fake")
        .env("LANG", "C.UTF-8");
    cmd
}

/// The first start (trust, remembered) and the second (nothing asked). Returns
/// the configuration after them.
fn two_runs(dir: &TestDir, wrapper: Option<&[&str]>) -> Value {
    let api = llm(dir, "first", json!([]));
    // "Yes" is chosen; down to "Yes, and remember this folder". No prompt: Copilot draws
    // its answer between animation frames, so no wait can match it whole.
    let steps = [
        "folder?", "", "cancel", "\\x1b[B", "", "\\r", "commands", "/exit", "", "\\r", "@2", "\\r",
    ];
    let (screen, code) = on_terminal(&copilot(dir, &api, wrapper, &[]), &steps, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains(TRUST), "Copilot asks for trust: {screen}");
    let api = llm(dir, "second", json!([]));
    let steps = ["commands", "/exit", "", "\\r", "@2", "\\r"];
    let (screen, code) = on_terminal(&copilot(dir, &api, wrapper, &[]), &steps, LIMIT);
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains(TRUST), "asked again: {screen}");
    read_config(&config(dir))
}

#[test]
#[cfg_attr(
    skip_e2e = "copilot",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the copilot setup"
)]
fn the_remembered_folder_persists_on_the_floor_as_without_it() {
    let plain = world();
    let file_plain = two_runs(&plain, None);
    let wrapped = world();
    let file_wrapped = two_runs(&wrapped, Some(&["--summary", "never"]));
    let ws = |d: &TestDir| d.ws().canonicalize().unwrap().display().to_string();
    let trusted = |f: &Value| -> Vec<String> {
        f["trustedFolders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(trusted(&file_plain), ["/srv/mine".to_owned(), ws(&plain)]);
    assert_eq!(
        trusted(&file_wrapped),
        ["/srv/mine".to_owned(), ws(&wrapped)]
    );
    assert_eq!(file_wrapped["firstLaunchAt"], file_plain["firstLaunchAt"]);
}

#[test]
#[cfg_attr(
    skip_e2e = "copilot",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the copilot setup"
)]
fn a_folder_trusted_from_python_does_not_stay_trusted() {
    let attack = |floor: &str| {
        let dir = world();
        std::fs::write(
            dir.ws().join("setup.py"),
            "import json, os\n\
             p = os.path.join(os.environ['HOME'], '.cop' + 'ilot', 'con' + 'fig.json')\n\
             d = json.load(open(p))\n\
             d['trustedFolders'].append('/srv/elsewhere')\n\
             json.dump(d, open(p, 'w'))\n",
        )
        .unwrap();
        let api = llm(
            &dir,
            "api",
            json!([shell_tool("bash", "python3 setup.py"), {"text": "Done."}]),
        );
        let cmd = copilot(
            &dir,
            &api,
            Some(&["--summary", "never", "--floor", floor]),
            &["-p", "set up the project", "--allow-all-tools"],
        );
        let r = agents::run_within(cmd, Duration::from_secs(60));
        r.check(r.output.status.code() == Some(0), "the run ends normally");
        (read_config(&config(&dir)), r)
    };
    let (after, r) = attack("on");
    r.check(
        after["trustedFolders"] == json!(["/srv/mine"]),
        &format!("the trust was undone: {after}"),
    );
    r.check(
        r.stderr().contains("trustedFolders[\"/srv/elsewhere\"]"),
        "the run says what it undid",
    );
    let (after, _) = attack("off");
    assert_eq!(
        after["trustedFolders"],
        json!(["/srv/mine", "/srv/elsewhere"])
    );
}
