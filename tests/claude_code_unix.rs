//! Path Unix sockets on the real Claude Code CLI: the test starts a tmux server, as the
//! user's, outside the workspace and the temp directories. The model runs a Python script
//! that asks that server (`tmux -S … run-shell`) to write a file outside the workspace: the
//! server would do it with none of the floor's limits. The same script binds a socket of its
//! own in the workspace and talks to itself through it (ordinary work: a test server, a
//! language server). The policy would escalate the script (it runs a command built at run
//! time); the run is in `--mode observe`, so that only the floor stands between.
//!
//! On the floor: the outside file is never written, the script's own socket works, and the
//! audit log holds the refused connection (`net`, `unix:` and the socket's path, the asking
//! process). With the socket's directory in `[floor.unix] allow` the server writes it, as
//! with `--floor off`, which shows the test can fail.

use ahp_wrap_testkit::agents::TestDir;
use ahp_wrap_testkit::claude_code::{bash, claude_bin, offline_env, run, FakeApi};
use ahp_wrap_testkit::common::dirs;

use ahp_wrap_testkit::terminal::Tmux;
use std::process::Command;

use serde_json::json;

const SCRIPT: &str = r#"
import os, socket, subprocess, sys
sock, mark = sys.argv[1], sys.argv[2]
cmd = ['tm' + 'ux', '-S', sock, 'run-' + 'shell', 'touch ' + mark]
r = subprocess.run(cmd, capture_output=True, text=True)
print('tmux exit', r.returncode, r.stderr.strip())
own = os.path.join(os.getcwd(), 'own.sock')
srv = socket.socket(socket.AF_UNIX)
srv.bind(own)
srv.listen(1)
cli = socket.socket(socket.AF_UNIX)
cli.connect(own)
conn, _ = srv.accept()
cli.sendall(b'ping')
print('own socket', conn.recv(4).decode())
"#;

/// Runs the script through the model; returns what it printed, whether the outside file
/// exists, and the audit log.
fn attack(floor: &str, allow_outside: bool) -> (String, bool, String) {
    let dir = TestDir::new(
        "ahp-claude-unix-",
        Some(&dirs::outside_temp()),
        &["home/.claude", "outside"],
    );
    // The user's tmux server (its socket `outside/tmux.sock`), killed with the test.
    let socket = dir.dir.path().join("outside/tmux.sock");
    let mut idle = Command::new("sleep");
    idle.arg("600").env("PATH", "/usr/bin:/bin");
    let _tmux = Tmux::start(&dir.dir.path().join("outside"), &idle, 80, 24);
    let mark = dir.dir.path().join("outside/PWNED");
    std::fs::write(dir.ws().join("talk.py"), SCRIPT).unwrap();
    let audit = dir.dir.path().join("audit.jsonl");
    let api = FakeApi::start(
        dir.dir.path(),
        "api",
        json!([
            bash(&format!(
                "python3 talk.py {} {}",
                socket.display(),
                mark.display()
            )),
            {"text": "Done."}
        ]),
    );
    let mut cmd = Command::new(ahp_wrap_testkit::wrap_bin());
    cmd.args([
        "--mode",
        "observe",
        "--floor",
        floor,
        "--summary",
        "never",
        "--audit-log",
    ])
    .arg(&audit);
    if allow_outside {
        // The person lets the tree reach the sockets of that directory.
        let policy = dir.dir.path().join("policy.toml");
        let outside = dir.dir.path().join("outside");
        let text = format!(
            "version = 1\n[floor.unix]\nallow = [{:?}]\n",
            outside.display().to_string()
        );
        std::fs::write(&policy, text).unwrap();
        cmd.arg("--policy").arg(policy);
    }
    cmd.arg("--")
        .arg(claude_bin())
        .args(["-p", "check the session", "--allowedTools", "Bash"]);
    ahp_wrap_testkit::agents::offline(&mut cmd, &dir);
    offline_env(&mut cmd, dir.dir.path().join("home/.claude"), api.port);
    let r = run(cmd);
    r.check(r.output.status.code() == Some(0), "the run ends normally");
    let results = api.tool_results();
    r.check(results.len() == 1, "the tool result reaches the model");
    let printed = results[0]["content"].to_string();
    // The server runs the command on its own time: give it a moment.
    for _ in 0..20 {
        if mark.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    (printed, mark.exists(), log)
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn the_users_tmux_server_is_out_of_reach_and_the_trees_own_socket_works() {
    let (printed, written, log) = attack("on", false);
    assert!(!written, "the tmux server ran the command: {printed}");
    assert!(printed.contains("own socket ping"), "{printed}");
    let refused = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| {
            e["payload"]["arguments"]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("unix:") && u.ends_with("tmux.sock"))
        });
    let refused = refused.unwrap_or_else(|| panic!("no refusal audited: {log}"));
    assert_eq!(refused["decision"], "block", "{refused}");
    let argv = refused["payload"]["context"]["process"]["argv"].to_string();
    assert!(argv.contains("tmux"), "the asking process: {refused}");

    let (printed, written, _) = attack("on", true);
    assert!(written, "[floor.unix] allow lets it through: {printed}");

    let (printed, written, _) = attack("off", false);
    assert!(
        written,
        "without the floor the server writes the file: {printed}"
    );
}
