//! A question at the terminal while a full-screen agent holds it (tmux as the person's
//! terminal, `raw_agent.py` as the agent: raw mode, every key read as typed): the agent is
//! held still while the question is asked, so the keys typed before and after it reach the
//! agent, the answer reaches the question, and the agent's screen is whole afterwards. A
//! question pending when the agent ends is withdrawn at once, and the wrapper reads nothing
//! more from the terminal.

use ahp_wrap_testkit::common;
use ahp_wrap_testkit::terminal::Tmux;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const WAIT: Duration = Duration::from_secs(20);

/// `ahp-wrap` with a harness that escalates every tool call, in front of `raw_agent.py`;
/// `then` runs in the same window once the wrapper has ended (with its exit code in `$rc`).
fn wrapped_agent(dir: &Path, alt: bool, then: &str) -> Command {
    let harness = format!(
        "stdio:python3 '{}' escalate",
        support("fault_harness.py").display()
    );
    let agent = format!(
        "python3 '{}' {} '{}'",
        support("raw_agent.py").display(),
        if alt { "--alt" } else { "" },
        dir.display()
    );
    let script = format!(
        "'{bin}' --audit-log '{log}' --harness \"$H\" -- {agent}; rc=$?; {then}",
        bin = wrap_bin().display(),
        log = dir.join("audit.jsonl").display(),
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script])
        .current_dir(dir)
        .env("H", harness)
        .env("HOME", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

/// Waits until the agent has read `keys` (its `keys` file ends with them).
fn agent_read(dir: &Path, keys: &str) -> bool {
    let until = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < until {
        if read(dir, "keys").ends_with(keys) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The agent's lines on `screen`, from its first to its last.
fn agents_lines(screen: &str) -> String {
    let start = screen.find("RAW-AGENT").unwrap_or(0);
    let end = screen
        .find("END-OF-SCREEN")
        .map_or(screen.len(), |i| i + "END-OF-SCREEN".len());
    screen[start..end.max(start)].to_owned()
}

fn keys_before_and_after_reach_the_agent_and_the_answer_the_question(alt: bool) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tmux = Tmux::start(d, &wrapped_agent(d, alt, "echo WRAPPER-EXIT $rc"), 100, 30);
    tmux.wait_for("END-OF-SCREEN", WAIT);
    tmux.type_keys("ab");
    assert!(agent_read(d, "ab"), "the agent read the keys typed for it");
    // The tool call, and more keys for the agent right behind it, in one write to the
    // terminal (two `tmux send-keys` on a loaded machine can be more than the pause's
    // 0.6 s of reading apart: keys still in flight then go to the question, docs/approvals.md).
    tmux.type_keys("!cd");
    let asked = tmux.wait_for("Allow it?", WAIT);
    assert!(
        asked.contains("a human must look") && !asked.contains("RAW-AGENT"),
        "the question is asked on a screen of its own:\n{asked}"
    );
    // The answer: none of it reaches the agent.
    tmux.type_keys("y");
    std::thread::sleep(Duration::from_millis(300));
    tmux.enter();
    let expected = format!(
        "RAW-AGENT {} screen\ntyped: ab!cd\nhook: exit 0\nEND-OF-SCREEN",
        if alt { "alternate" } else { "main" }
    );
    let after = tmux
        .wait_until(WAIT, |s| agents_lines(s) == expected)
        .unwrap_or_else(|s| panic!("the agent's screen after the question:\n{s}"));
    assert!(d.join("ran").exists(), "the allowed tool call ran");
    // The keys typed before the question reached the agent (read before it, or put back for
    // it when it had not read them yet), and no key of the answer did.
    assert_eq!(read(d, "keys"), "ab!cd", "the keys the agent read");
    // The agent's screen is whole: its own lines, nothing of the question left.
    assert!(!after.contains("Allow it?"), "{after}");
    // Keys typed after the question reach the agent.
    tmux.type_keys("ef");
    assert!(agent_read(d, "ab!cdef"), "{:?}", read(d, "keys"));
    tmux.type_keys("q");
    let end = tmux.wait_for("WRAPPER-EXIT", WAIT);
    assert!(end.contains("WRAPPER-EXIT 0"), "{end}");
    let records = json_lines(d, "audit.jsonl");
    assert!(
        records
            .iter()
            .any(|r| r.to_string().contains("a human must look")
                && r.to_string().contains("\"allow\"")),
        "the question and its answer are audited: {records:?}"
    );
}

#[test]
fn an_agent_on_the_main_screen_keeps_its_keys_and_its_screen() {
    keys_before_and_after_reach_the_agent_and_the_answer_the_question(false);
}

#[test]
fn an_agent_on_the_alternate_screen_keeps_its_keys_and_its_screen() {
    keys_before_and_after_reach_the_agent_and_the_answer_the_question(true);
}

#[test]
fn a_question_pending_when_the_agent_ends_is_withdrawn_and_the_shell_gets_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // After the wrapper, the window's shell reads a line, as the person's shell would.
    let then = format!(
        "echo WRAPPER-EXIT $rc; read line; echo \"$line\" > '{}'; echo SHELL-READ; sleep 2",
        d.join("shell").display()
    );
    let tmux = Tmux::start(d, &wrapped_agent(d, false, &then), 100, 30);
    tmux.wait_for("END-OF-SCREEN", WAIT);
    tmux.type_keys("!");
    tmux.wait_for("Allow it?", WAIT);
    // The agent ends while the question waits (killed from elsewhere: it is held still).
    let pid = agent_pid(d);
    let started = std::time::Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
    let end = tmux.wait_for("WRAPPER-EXIT", WAIT);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the wrapper ended {took:?} after the agent, with the question pending:\n{end}"
    );
    // What is typed now is the shell's.
    tmux.type_keys("echo typed for the shell");
    tmux.enter();
    // The shell's line is read from the file it wrote (the screen is only a witness: tmux
    // may not have drawn a pane's last line when the pane ends).
    let until = std::time::Instant::now() + WAIT;
    while !read(d, "shell").ends_with('\n') && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        read(d, "shell").trim(),
        "echo typed for the shell",
        "the screen:\n{}",
        tmux.screen()
    );
    assert!(!d.join("ran").exists(), "the tool call never ran");
    let records = json_lines(d, "audit.jsonl");
    assert!(
        records.iter().any(|r| r
            .to_string()
            .contains("the question pending, which was withdrawn")),
        "the withdrawn question is audited: {records:?}"
    );
}

/// The agent's pid as this test sees it (it writes its own, which may be a namespace's).
fn agent_pid(dir: &Path) -> i32 {
    let until = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < until {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            // python3 (or the interpreter it names) running the agent for this test's dir.
            if args.len() >= 3
                && args[0].contains("python")
                && args[1].ends_with("raw_agent.py")
                && args.last().is_some_and(|a| Path::new(a) == dir)
            {
                return pid;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the agent's process was not found")
}
