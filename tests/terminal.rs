//! The terminal belongs to the agent: while it runs on a real pty, nothing of ours is
//! written there; the log goes to a file, and the warnings come after the agent has exited.

use ahp_wrap_testkit::common;

use std::process::Command;
use std::time::Duration;

use common::*;

/// A generic agent on a terminal whose harness dies at its first question: the wrapper
/// logs a warning mid-run. The agent marks the start and end of its own screen time.
fn agent_with_a_dying_harness(dir: &std::path::Path) -> Vec<String> {
    let script = format!(
        r#"cd '{dir}'
echo AGENT-START
printf '%s' '{{"payload":{{"tool_name":"bash","arguments":{{"command":"ls"}}}}}}' | "$AHP_WRAP_BIN" hook generic pre_action > decision.json 2> reason.txt
echo $? > hook_rc
sleep 0.5
echo AGENT-END"#,
        dir = dir.display()
    );
    vec!["sh".into(), "-c".into(), script]
}

fn harness(dir: &std::path::Path) -> String {
    let _ = dir;
    format!(
        "stdio:python3 '{}' die",
        support("fault_harness.py").display()
    )
}

#[test]
fn on_a_terminal_our_warnings_go_to_the_log_file_and_come_back_after_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = run(
        Command::new("python3")
            .arg(support("pty_run.py"))
            .args(["AGENT-END", "", "--"])
            .arg(wrap_bin())
            .args(["--harness", &harness(dir.path()), "--"])
            .args(agent_with_a_dying_harness(dir.path()))
            .env("XDG_STATE_HOME", &state)
            .env_remove("AHP_WRAP_LOG"),
        Duration::from_secs(60),
    );
    let screen = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        read(dir.path(), "hook_rc").trim(),
        "2",
        "failed closed: {screen}"
    );
    let (Some(start), Some(end)) = (screen.find("AGENT-START"), screen.find("AGENT-END")) else {
        panic!("the agent ran on the pty: {}", show(&out));
    };
    let during = &screen[start..end];
    for ours in ["ahp-wrap", "WARN", "harness unusable", "harness"] {
        assert!(
            !during.contains(ours),
            "{ours:?} reached the terminal while the agent had it:\n{during}"
        );
    }
    // Before the agent: no file named (none is made until a line comes). After it: the
    // warning, held back until now, and the file it was written to, which is there.
    let before = &screen[..start];
    let logs = default_logs(&state);
    let [log_file] = &logs[..] else {
        panic!("one log file in the state dir: {logs:?}\n{screen}");
    };
    assert!(
        !before.contains(".log"),
        "no file named before it is made: {screen}"
    );
    let log = std::fs::read_to_string(log_file).unwrap();
    assert!(log.contains("harness"), "the log has the warning: {log}");
    let after = &screen[end..];
    assert!(
        after.contains("warning(s) during the run") && after.contains("WARN"),
        "the warnings are repeated after the agent's screen: {after}"
    );
    assert!(
        after.contains(&format!("(the whole log: {})", log_file.display())),
        "the file named at exit: {after}"
    );
}

/// The log file a terminal run names is there: a run that logs nothing makes none and names
/// none; one whose filter logs more than warnings makes it at the start and names it there.
#[test]
fn on_a_terminal_the_log_file_is_named_only_where_it_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let quiet_run = |log: &str| {
        let out = run(
            Command::new("python3")
                .arg(support("pty_run.py"))
                .args(["AGENT-END", "", "--"])
                .arg(wrap_bin())
                .args(["--log", log, "--", "sh", "-c", "echo AGENT-END"])
                .current_dir(dir.path())
                .env("XDG_STATE_HOME", &state)
                .env_remove("AHP_WRAP_LOG"),
            Duration::from_secs(60),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let screen = quiet_run("warn");
    assert!(screen.contains("AGENT-END"), "{screen}");
    assert!(
        default_logs(&state).is_empty(),
        "nothing logged, no file: {screen}"
    );
    assert!(!screen.contains(".log"), "no file named: {screen}");
    let screen = quiet_run("info");
    let logs = default_logs(&state);
    let [log_file] = &logs[..] else {
        panic!("the file made at the start: {logs:?}\n{screen}");
    };
    let start = screen.find("AGENT-END").unwrap();
    assert!(
        screen[..start].contains(&format!("ahp-wrap's log goes to {}", log_file.display())),
        "named before the agent starts: {screen}"
    );
}

#[test]
fn with_log_file_on_a_terminal_the_log_goes_there_and_without_a_terminal_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("wrap.log");
    let out = run(
        Command::new("python3")
            .arg(support("pty_run.py"))
            .args(["AGENT-END", "", "--"])
            .arg(wrap_bin())
            .args(["--log-file", log_file.to_str().unwrap()])
            .args(["--harness", &harness(dir.path()), "--"])
            .args(agent_with_a_dying_harness(dir.path()))
            .env("XDG_STATE_HOME", dir.path().join("unused"))
            .env_remove("AHP_WRAP_LOG"),
        Duration::from_secs(60),
    );
    let screen = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = screen.find("AGENT-START").expect("agent ran");
    let end = screen.find("AGENT-END").expect("agent ended");
    assert!(!screen[start..end].contains("ahp-wrap"), "{screen}");
    assert!(std::fs::read_to_string(&log_file)
        .unwrap()
        .contains("harness"));
    assert!(
        default_logs(&dir.path().join("unused")).is_empty(),
        "no default log file"
    );

    // CI: no terminal, the log stays on stderr as before.
    let out = run(
        Command::new(wrap_bin())
            .args(["--harness", &harness(dir.path()), "--"])
            .args(agent_with_a_dying_harness(dir.path()))
            .env("XDG_STATE_HOME", dir.path().join("unused"))
            .env_remove("AHP_WRAP_LOG"),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("WARN"), "{}", show(&out));
    assert!(
        default_logs(&dir.path().join("unused")).is_empty(),
        "no log file without a terminal"
    );
}

/// The wrapper's default log files in the state directory `state` (which may hold other
/// things: the caches' layers of a run on the floor).
fn default_logs(state: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(state.join("ahp-wrap"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect()
}
