//! The agent as our child, transparently: exit codes, signals, byte-exact pass-through,
//! no orphans, a missing agent.

use ahp_wrap_testkit::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn wrap() -> Command {
    let mut c = Command::new(wrap_bin());
    c.arg("--");
    c
}

/// The wrapper without the floor, for what it does itself to end an agent's tree (the child
/// subreaper, the guardian, the run's mark): what a run without a PID namespace of its own
/// relies on (a machine without user namespaces, `--floor off`). On the floor the tree's PID
/// namespace ends with it ([`nothing_of_the_tree_survives_on_the_floor`]).
fn wrap_without_pid_namespace() -> Command {
    let mut c = Command::new(wrap_bin());
    c.args(["--floor", "off", "--"]);
    c
}

#[test]
fn exit_code_is_the_agents() {
    for code in [0, 1, 3, 42, 255] {
        let out = run(
            wrap().args(["sh", "-c", &format!("exit {code}")]),
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(code), "{}", show(&out));
    }
}

#[test]
fn death_by_signal_n_is_128_plus_n() {
    for (sig, name) in [(9, "KILL"), (15, "TERM"), (6, "ABRT")] {
        let out = run(
            wrap().args(["sh", "-c", &format!("kill -{name} $$")]),
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(128 + sig), "{}", show(&out));
    }
}

#[test]
fn the_agent_starts_with_the_signals_a_shell_would_give_it() {
    // The wrapper started with SIGALRM ignored (as `nohup` ignores SIGHUP): the agent keeps
    // that; SIGPIPE, which the wrapper ignores itself, is the default again; none is blocked.
    // A shell's `trap '' ALRM` ignores it, and `exec` keeps what is ignored.
    let mut c = Command::new("sh");
    c.args(["-c", "trap '' ALRM; exec \"$0\" \"$@\""])
        .arg(wrap_bin())
        .args(["--", "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]);
    let out = run(&mut c, Duration::from_secs(30));
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let mask = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let bit = |sig: i32| 1u64 << (sig - 1);
    assert_eq!(mask("SigBlk:"), 0, "{text}");
    assert_ne!(mask("SigIgn:") & bit(libc::SIGALRM), 0, "{text}");
    assert_eq!(mask("SigIgn:") & bit(libc::SIGPIPE), 0, "{text}");
}

#[test]
fn missing_agent_exits_127_with_a_message() {
    let out = run(
        wrap().arg("no-such-agent-anywhere"),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(127), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-agent-anywhere: command not found")
    );
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("agent.sh");
    std::fs::write(&not_executable, "echo hi\n").unwrap();
    let out = run(wrap().arg(&not_executable), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot execute"),
        "{}",
        show(&out)
    );
}

#[test]
fn large_piped_data_passes_through_byte_exact() {
    // 8 MiB of every byte value, through `cat`, both ways.
    let data: Vec<u8> = (0..8 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    // The helper writes stdin and drains stdout on threads: 8 MiB fills any pipe.
    let run = process::run_with_input(wrap().arg("cat"), &data, Duration::from_secs(60));
    let (status, got) = (run.output.status, run.output.stdout);
    assert!(status.success());
    assert_eq!(got.len(), data.len());
    assert!(got == data, "the bytes differ");
}

#[test]
fn stderr_and_stdout_stay_separate() {
    let out = run(
        wrap().args(["sh", "-c", "echo out; echo err >&2"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.stdout, b"out\n");
    // A generic agent gets our notice that it is not supervised (tests/unsupervised.rs),
    // on lines of its own; the agent's stderr is there, whole, between them.
    let ours = |l: &&str| l.starts_with("ahp-wrap: ");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let theirs: Vec<&str> = stderr.lines().filter(|l| !ours(l)).collect();
    assert_eq!(theirs, ["err"], "{}", show(&out));
}

/// Starts the wrapper around a shell that records the signals it gets in `dir/got`.
fn trapping_agent(dir: &std::path::Path) -> std::process::Child {
    let script = format!(
        r#"trap 'echo TERM >> {d}/got; exit 0' TERM
trap 'echo HUP >> {d}/got; exit 0' HUP
trap 'echo INT >> {d}/got; exit 0' INT
touch {d}/ready
while :; do sleep 0.05; done"#,
        d = dir.display()
    );
    wrap()
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn term_hup_and_int_sent_to_the_wrapper_reach_the_agent() {
    for sig in ["TERM", "HUP", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = trapping_agent(dir.path());
        assert!(eventually(
            || dir.path().join("ready").exists(),
            Duration::from_secs(20)
        ));
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        assert!(eventually(
            || child.try_wait().unwrap().is_some(),
            Duration::from_secs(20)
        ));
        let status = child.wait().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("got"))
                .unwrap()
                .trim(),
            sig,
            "the agent got {sig}"
        );
        assert_eq!(status.code(), Some(0), "the agent handled it and exited 0");
    }
}

/// An agent script that starts four processes trying to outlive it, each writing its pid
/// to a file in `dir`: `plain` (a background child), `setsid` (a background child in a
/// session of its own), `orphan` (double-forked: its parent exits at once, so it is
/// re-parented) and `bare` (the same, with an emptied environment). Then it runs `then`.
fn escaping_agent(dir: &std::path::Path, then: &str) -> Vec<String> {
    let d = dir.display();
    let script = format!(
        r#"sh -c 'echo $$ > {d}/plain; exec sleep 300' >/dev/null 2>&1 &
setsid sh -c 'echo $$ > {d}/setsid; exec sleep 300' >/dev/null 2>&1 &
( setsid sh -c 'echo $$ > {d}/orphan; exec sleep 300' >/dev/null 2>&1 & )
( env -i PATH="$PATH" setsid sh -c 'echo $$ > {d}/bare; exec sleep 300' >/dev/null 2>&1 & )
echo $$ > {d}/agent
while [ ! -s {d}/plain ] || [ ! -s {d}/setsid ] || [ ! -s {d}/orphan ] || [ ! -s {d}/bare ]; do sleep 0.01; done
{then}"#
    );
    vec!["sh".into(), "-c".into(), script]
}

/// The wrapper running [`escaping_agent`], once its descendants are all in place.
fn start_escaping(dir: &std::path::Path, then: &str) -> std::process::Child {
    let wrapper = wrap_without_pid_namespace()
        .args(escaping_agent(dir, then))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(
        || dir.join("ready").exists(),
        Duration::from_secs(20)
    ));
    wrapper
}

/// Leaves nothing behind whatever an assertion says (SIGKILL to each).
fn kill_all(pids: &[i32]) {
    for &p in pids {
        let _ = Command::new("kill")
            .args(["-9", &p.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// The pid (as this process sees it) of the process whose command line is `argv`.
fn pid_of(argv: &[&str]) -> Option<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        (std::fs::read(e.path().join("cmdline")).ok()? == want).then_some(pid)
    })
}

/// On the floor, the agent's tree lives in a PID namespace of its own: what it started,
/// detached or double-forked, ends with the agent, and with a killed wrapper. Its processes
/// are found from here by their command lines (their pids inside mean nothing here).
#[test]
fn nothing_of_the_tree_survives_on_the_floor() {
    for how in ["the agent exits", "the wrapper is killed"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let mark = format!(
            "300.{}",
            std::process::id() as u64 * 10 + u64::from(how.len() as u8 % 10)
        );
        let script = format!(
            r#"sh -c 'exec sleep {mark}1' >/dev/null 2>&1 &
setsid sh -c 'exec sleep {mark}2' >/dev/null 2>&1 &
( setsid sh -c 'exec sleep {mark}3' >/dev/null 2>&1 & )
( env -i PATH="$PATH" setsid sh -c 'exec sleep {mark}4' >/dev/null 2>&1 & )
touch {d}/ready
case "{how}" in "the agent exits") sleep 1; exit 7;; *) sleep 300;; esac"#
        );
        let mut wrapper = wrap()
            .args(["sh", "-c", &script])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(eventually(
            || dir.path().join("ready").exists(),
            Duration::from_secs(20)
        ));
        let marks: Vec<String> = (1..=4).map(|i| format!("{mark}{i}")).collect();
        let found = || {
            marks
                .iter()
                .filter_map(|m| pid_of(&["sleep", m]))
                .collect::<Vec<_>>()
        };
        assert!(
            eventually(|| found().len() == 4, Duration::from_secs(10)),
            "{how}: {:?}",
            found()
        );
        let pids = found();
        match how {
            "the agent exits" => {
                let status = wrapper.wait().unwrap();
                assert_eq!(status.code(), Some(7), "{how}: the agent's code, unchanged");
            }
            _ => {
                wrapper.kill().unwrap(); // SIGKILL: the wrapper runs no code of its own.
                wrapper.wait().unwrap();
            }
        }
        let gone = eventually(|| pids.iter().all(|&p| !alive(p)), Duration::from_secs(3));
        kill_all(&pids);
        assert!(gone, "{how}: still alive: {:?}", found());
    }
}

fn pid_in(dir: &std::path::Path, name: &str) -> Option<i32> {
    read(dir, name).trim().parse().ok()
}

fn ppid(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

#[test]
fn no_escaped_descendant_survives_a_killed_wrapper() {
    let dir = tempfile::tempdir().unwrap();
    let mut wrapper = start_escaping(dir.path(), "touch ready; wait; sleep 300");
    let names = ["agent", "plain", "setsid", "orphan", "bare"];
    let pids: Vec<i32> = names
        .iter()
        .map(|n| pid_in(dir.path(), n).unwrap())
        .collect();
    assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
    // The double-forked ones were adopted by the wrapper (a child subreaper), not by init...
    let orphan = pids[4];
    assert!(
        eventually(
            || ppid(orphan) == Some(wrapper.id() as i32),
            Duration::from_secs(10)
        ),
        "the orphan's parent is {:?}, not the wrapper {}",
        ppid(orphan),
        wrapper.id()
    );
    // ...and the wrapper tells the guardian about them at its next look (every 250 ms): the
    // one with an emptied environment has no other way to be found.
    std::thread::sleep(Duration::from_millis(1000));
    wrapper.kill().unwrap(); // SIGKILL: the wrapper runs no code of its own.
    wrapper.wait().unwrap();
    let killed = Instant::now();
    let gone = eventually(|| pids.iter().all(|&p| !alive(p)), Duration::from_secs(3));
    let left: Vec<_> = names.iter().zip(&pids).filter(|(_, &p)| alive(p)).collect();
    kill_all(&pids);
    assert!(
        gone,
        "still alive {:?} after the wrapper's SIGKILL: {left:?}",
        killed.elapsed()
    );
}

#[test]
fn an_orphan_adopted_just_before_the_wrapper_is_killed_is_ended_too() {
    // No time for the wrapper to report the orphan to the guardian: the guardian finds it
    // by the run's mark in its environment (or, where there is one, in the agent's cgroup).
    let dir = tempfile::tempdir().unwrap();
    let mut wrapper = start_escaping(dir.path(), "touch ready; sleep 300");
    wrapper.kill().unwrap();
    wrapper.wait().unwrap();
    let orphan = pid_in(dir.path(), "orphan").unwrap();
    let gone = eventually(|| !alive(orphan), Duration::from_secs(3));
    kill_all(&[orphan]);
    assert!(gone, "the orphan {orphan} survived the wrapper's SIGKILL");
}

#[test]
fn no_escaped_descendant_survives_the_agents_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        wrap_without_pid_namespace()
            .args(escaping_agent(dir.path(), "exit 7"))
            .current_dir(dir.path()),
        Duration::from_secs(30),
    );
    let exited = Instant::now();
    assert_eq!(
        out.status.code(),
        Some(7),
        "the agent's code, unchanged\n{}",
        show(&out)
    );
    let names = ["plain", "setsid", "orphan", "bare"];
    let pids: Vec<i32> = names
        .iter()
        .map(|n| pid_in(dir.path(), n).unwrap())
        .collect();
    let gone = eventually(|| pids.iter().all(|&p| !alive(p)), Duration::from_secs(3));
    let left: Vec<_> = names.iter().zip(&pids).filter(|(_, &p)| alive(p)).collect();
    kill_all(&pids);
    assert!(
        gone,
        "still alive {:?} after the agent's exit: {left:?}",
        exited.elapsed()
    );
}

#[test]
fn the_agent_finds_the_wrapper_in_its_environment() {
    // An abstract socket (no file to replace), and the wrapper's pid to check: its parent's
    // without the floor; on the floor, from the PID namespace whose init is its parent, the
    // wrapper is outside (the hook accepts a listener it cannot see, pid 0, as no process of
    // the tree can be one).
    for (wrapped, parent) in [
        (
            wrap_without_pid_namespace(),
            "test \"$AHP_WRAP_PARENT_PID\" = \"$PPID\"",
        ),
        (
            wrap(),
            "test \"$PPID\" = 1 && grep -q pid-init /proc/1/cmdline",
        ),
    ] {
        let mut wrapped = wrapped;
        let script = format!(
            "case $AHP_WRAP_SOCKET in @ahp-wrap-*) ;; *) exit 1;; esac; {parent} && \
             test \"$AHP_WRAP_PARENT_PID\" -gt 1 && \
             echo \"$AHP_WRAP_DEPTH ${{#AHP_WRAP_TOKEN}} ${{AHP_WRAP_HARNESS_TOKEN:-none}}\""
        );
        let out = run(wrapped.args(["sh", "-c", &script]), Duration::from_secs(30));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "0 64 none",
            "{}",
            show(&out)
        );
    }
}

#[test]
fn harness_token_does_not_leak_into_the_agent() {
    let out = run(
        Command::new(wrap_bin())
            .env("AHP_WRAP_HARNESS_TOKEN", "s3cret")
            .args([
                "--",
                "sh",
                "-c",
                "echo \"${AHP_WRAP_HARNESS_TOKEN:-unset}\"",
            ]),
        Duration::from_secs(30),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "unset",
        "{}",
        show(&out)
    );
}

#[test]
fn nested_wrappers_count_depth_and_stop_at_max_depth() {
    let bin = wrap_bin();
    let inner = format!(
        "'{b}' --max-depth 1 -- sh -c 'echo depth=$AHP_WRAP_DEPTH; \"{b}\" --max-depth 1 -- true'",
        b = bin.display()
    );
    let out = run(wrap().args(["sh", "-c", &inner]), Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("depth=1"), "{}", show(&out));
    assert!(stderr.contains("past --max-depth 1"), "{}", show(&out));
    assert_eq!(
        out.status.code(),
        Some(125),
        "the refusal is the innermost exit code\n{}",
        show(&out)
    );
}

#[test]
fn on_a_terminal_the_agent_keeps_it_and_gets_ctrl_c_once_from_it() {
    let agent = r#"test -t 0 && test -t 1 && echo TTY-OK
trap 'echo GOT-INT; exit 42' INT
echo READY
while :; do sleep 0.05; done"#;
    let out = run(
        Command::new("python3")
            .arg(support("pty_run.py"))
            .args(["READY", "\\x03", "--"])
            .arg(wrap_bin())
            .args(["--", "sh", "-c", agent]),
        Duration::from_secs(60),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("TTY-OK"),
        "the agent's stdin and stdout are the terminal\n{}",
        show(&out)
    );
    assert_eq!(text.matches("GOT-INT").count(), 1, "{}", show(&out));
    assert_eq!(
        out.status.code(),
        Some(42),
        "the wrapper survived Ctrl-C and returned the agent's code\n{}",
        show(&out)
    );
}
