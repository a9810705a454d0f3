//! The real Claude Code CLI on a real terminal (a pty), wrapped: the exit hint it prints
//! is a command that works, nothing of ours is drawn over its screen, and the warnings it
//! hid (its screen clears ours) come back after it exits.

use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::claude_code as support;
use ahp_wrap_testkit::terminal::plain;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::{FakeApi, World};

/// Interactive `ahp-wrap -- claude "say hi"` on a pty: waits for the model's answer, types
/// `/exit`, and returns the whole screen and the exit code.
fn interactive_run(world: &World, api: &FakeApi) -> (String, Option<i32>) {
    world.onboarded();
    let inner = world.command(api, Some(&[]), &["say hi"]);
    let mut cmd = Command::new("python3");
    cmd.arg(agents::root().join("tests/support/pty_steps.py"))
        .args(["--limit", "90", "FINISHED-TURN", "/exit", "", "\\r", "--"])
        .arg(inner.get_program())
        .args(inner.get_args());
    agents::offline(&mut cmd, world);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.env("TERM", "xterm-256color");
    let r = agents::run_within(cmd, Duration::from_secs(120));
    (plain(&r.output.stdout), r.output.status.code())
}

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn the_exit_hint_is_a_working_command_and_the_hidden_warning_comes_back() {
    let world = World::new();
    // The user's own settings switch hooks off: the wrapped run turns them back on and
    // says so, before Claude clears the screen and again after it exits.
    std::fs::write(
        world.config_dir().join("settings.json"),
        json!({"disableAllHooks": true}).to_string(),
    )
    .unwrap();
    let api = FakeApi::start(world.dir.path(), "api", json!([{"text": "FINISHED-TURN"}]));
    let (screen, code) = interactive_run(&world, &api);
    assert_eq!(code, Some(0), "{screen}");
    let hint_at = screen
        .find("Resume this session with:")
        .unwrap_or_else(|| panic!("Claude printed its resume hint:\n{screen}"));
    let hint = screen[hint_at..].lines().nth(1).unwrap_or_default().trim();
    let words: Vec<&str> = hint.split_whitespace().collect();
    assert_eq!(
        words.get(..2),
        Some(&["claude", "--resume"][..]),
        "the hint is plain `claude --resume <id>`, with no --settings file that is gone: {hint}"
    );
    assert!(
        words.get(2).is_some_and(|id| id.len() == 36),
        "the session id: {hint}"
    );
    assert_eq!(words.len(), 3, "{hint}");

    // Our start lines come before Claude's screen; while it runs, nothing of ours.
    let marker = "(warnings are repeated at exit)";
    let claude_at = screen.find(marker).expect("our last start line") + marker.len();
    assert!(
        !screen[claude_at..hint_at].contains("ahp-wrap:"),
        "our text reached Claude's screen:\n{}",
        &screen[claude_at..hint_at]
    );
    assert!(
        screen[..claude_at].contains("disableAllHooks"),
        "said before the agent starts: {screen}"
    );
    let after = &screen[hint_at..];
    assert!(
        after.contains("ahp-wrap: warning: your Claude Code settings say disableAllHooks"),
        "repeated after Claude's screen is gone:\n{after}"
    );
    // And how to resume it supervised.
    let id = words[2];
    assert!(
        after.contains(&format!(
            "to resume this session supervised: ahp-wrap -- claude --resume {id}"
        )),
        "{after}"
    );
    // Supervised all the same: the prompt went through our hook.
    assert!(!api.requests().is_empty());
    // And its record is in the default trail, as a headless run's is: the prompt's decision.
    let show = agents::run_captured(
        Command::new(ahp_wrap_testkit::wrap_bin())
            .args(["audit", "show"])
            .env_clear()
            .env("HOME", world.dir.path().join("home")),
        Duration::from_secs(30),
    );
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{shown}");
    assert!(
        shown.starts_with("run ")
            && shown.contains("claude-code: ")
            && shown
                .lines()
                .any(|l| l.contains("allow") && l.ends_with("say hi")),
        "audit show names the interactive run and its prompt:\n{shown}"
    );
}

/// The screen as the interactive suites read it: words drawn apart by cursor moves, a link
/// (an OSC ended by BEL) and a title (an OSC ended by ST) leave their text only. (The testkit
/// is no workspace member: its own unit tests would never run.)
#[test]
fn the_screen_is_read_as_its_words() {
    use ahp_wrap_testkit::terminal::squeezed;
    let screen = b"\x1b[5;3HTrust\x1b[5;9Hthis \x1b]8;id=x;https://a\x07folder?\r\n";
    assert_eq!(squeezed(screen), "Trustthisfolder?");
    let st = b"\x1b]0;title\x1b\\Ready \x1b]8;;\x1b\\now";
    assert_eq!(squeezed(st), "Readynow");
    assert_eq!(plain(b"a\r\n\x1b[1mb"), "a\nb");
}
