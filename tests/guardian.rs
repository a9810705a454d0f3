//! The guardian, and the small executable it is: a killed wrapper's agent and everything it
//! started are ended, with the guardian spawned as `ahp-wrap-hook guardian` or forked where
//! that is missing; one that ends at once is said; it runs where the wrapper may run; and
//! the small executable lives through a closed standard output.

use ahp_wrap_testkit::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn no_orphan_survives_a_killed_wrapper() {
    let guardians = no_orphan_survives_a_killed(Command::new(wrap_bin()));
    // The guardian is the small executable beside the wrapper, spawned.
    assert!(
        guardians
            .iter()
            .any(|g| g.starts_with("ahp-wrap-hook guardian")),
        "{guardians:?}"
    );
}

#[test]
fn no_orphan_survives_a_killed_wrapper_without_the_small_executable() {
    // The wrapper alone in its directory: it forks its guardian instead.
    let alone = tempfile::tempdir().unwrap();
    let guardians = no_orphan_survives_a_killed(Command::new(wrapper_copy(alone.path())));
    assert!(
        guardians.iter().all(|g| !g.contains("ahp-wrap-hook")),
        "{guardians:?}"
    );
}

#[test]
fn a_guardian_that_ends_at_once_is_said_and_the_agent_still_runs() {
    // An older small executable beside the wrapper, which knows no `guardian`: it exits at
    // once. The agent must run (its pre-exec step no longer writes to the dead guardian's
    // pipe), and the run says it has no guardian.
    let alone = tempfile::tempdir().unwrap();
    let bin = wrapper_copy(alone.path());
    std::os::unix::fs::symlink("/bin/false", alone.path().join("ahp-wrap-hook")).unwrap();
    let out = Command::new(&bin)
        .args(["--", "sh", "-c", "echo ran"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert!(
        stderr.contains("the guardian process ended at once"),
        "{stderr}"
    );
}

#[test]
fn the_guardian_runs_on_the_wrappers_processors_once_started() {
    // The wrapper starts its guardian off its own processor (for the namespaces it makes
    // first); the guardian must then take the wrapper's processors back, not stay pinned.
    let mut wrapper = Command::new(wrap_bin())
        .args(["--", "sleep", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let allowed = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .map(str::to_owned)
    };
    let g = spawned_guardian(wrapper.id());
    let theirs = allowed(wrapper.id());
    assert!(theirs.is_some());
    let same = eventually(|| allowed(g) == theirs, Duration::from_secs(5));
    let mine = allowed(g);
    wrapper.kill().unwrap();
    wrapper.wait().unwrap();
    assert!(same, "guardian {mine:?}, wrapper {theirs:?}");
}

/// The guardian the wrapper `pid` spawned (the small executable's `guardian`), waited for.
fn spawned_guardian(pid: u32) -> u32 {
    let find = || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .find(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("ahp-wrap-hook\0guardian"))
            })
    };
    let mut g = None;
    assert!(
        eventually(
            || {
                g = find();
                g.is_some()
            },
            Duration::from_secs(10)
        ),
        "the wrapper has no guardian"
    );
    g.unwrap()
}

#[test]
fn a_run_whose_guardian_died_removes_its_run_directory_itself() {
    // The guardian removes the run directory after a normal end only if it is there to take
    // the release; killed during the run, the wrapper must remove it, not leave it to nobody.
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo \"$AHP_WRAP_SOCKET\" > {d}/socket; while [ ! -e {d}/go ]; do sleep 0.05; done",
        d = dir.path().display()
    );
    let mut wrapper = agent_script(Command::new(wrap_bin()), &script)
        .spawn()
        .unwrap();
    let guardian = spawned_guardian(wrapper.id());
    assert!(eventually(
        || !read(dir.path(), "socket").is_empty(),
        Duration::from_secs(20)
    ));
    let guardian = nix::unistd::Pid::from_raw(guardian as i32);
    nix::sys::signal::kill(guardian, nix::sys::signal::Signal::SIGKILL).unwrap();
    // Dead (a zombie until the wrapper reaps it): its end of the orders' pipe is closed.
    let dead = || {
        std::fs::read_to_string(format!("/proc/{guardian}/stat"))
            .map_or(true, |s| s.contains(") Z "))
    };
    assert!(
        eventually(dead, Duration::from_secs(10)),
        "the guardian lives"
    );
    std::fs::write(dir.path().join("go"), "").unwrap();
    let status = wrapper.wait().unwrap();
    assert!(status.success(), "{status}");
    run_dir_goes(&read(dir.path(), "socket"), "without its guardian");
}

#[test]
fn the_small_executable_survives_a_closed_standard_output() {
    // It starts without the Rust runtime's start-up and ignores SIGPIPE itself: a hook whose
    // reader has gone exits as it would have with one, not killed by the signal.
    let payload = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("shims/claude-code/samples/PreToolUse.json"),
    )
    .unwrap();
    let run = |reader_gone: bool| {
        use std::io::{Read, Write};
        let (reader, writer) = std::io::pipe().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ahp-wrap-hook"))
            .args(["hook", "claude-code", "PreToolUse"])
            .env_remove("AHP_WRAP_SOCKET")
            .stdin(Stdio::piped())
            .stdout(writer)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = Vec::new();
        let mut reader = (!reader_gone).then_some(reader);
        // It may refuse before it has read all of it.
        let _ = child.stdin.take().unwrap().write_all(&payload);
        if let Some(r) = reader.as_mut() {
            r.read_to_end(&mut out).unwrap();
        }
        (child.wait().unwrap(), out)
    };
    let (with_reader, out) = run(false);
    assert!(
        String::from_utf8_lossy(&out).contains("\"deny\""),
        "the hook refuses without a wrapper: {}",
        String::from_utf8_lossy(&out)
    );
    let (without, _) = run(true);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(without.signal(), None, "{without}");
    assert_eq!(without.code(), with_reader.code());
}

/// The wrapper in `dir`, without the small executable beside it: a hard link where it can
/// be (a copy just written can fail to start with "Text file busy" while another test's
/// process, forked meanwhile, still holds the descriptor it was written through).
fn wrapper_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let bin = dir.join("ahp-wrap");
    if std::fs::hard_link(wrap_bin(), &bin).is_err() {
        std::fs::copy(wrap_bin(), &bin).unwrap();
    }
    bin
}

/// Starts `wrapper` over an agent with a grandchild, kills it (SIGKILL) and checks both are
/// ended, and the run directory removed; returns the command lines of the wrapper's children
/// that were not the agent (its guardian), as they ran.
fn no_orphan_survives_a_killed(mut wrapper: Command) -> Vec<String> {
    // Without the floor: the guardian's own work, which a run without a PID namespace of its
    // own relies on (on the floor the namespace ends with the tree too: tests/child.rs).
    wrapper.args(["--floor", "off"]);
    let dir = tempfile::tempdir().unwrap();
    // The agent starts a grandchild too; both must go.
    let script = format!(
        "sleep 300 & echo $! > {d}/grandchild; echo \"$AHP_WRAP_SOCKET\" > {d}/socket; echo $$ > {d}/agent; wait",
        d = dir.path().display()
    );
    let mut wrapper = agent_script(wrapper, &script).spawn().unwrap();
    let pid = |name: &str| -> i32 {
        std::fs::read_to_string(dir.path().join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert!(eventually(
        || !read(dir.path(), "grandchild").is_empty() && !read(dir.path(), "agent").is_empty(),
        Duration::from_secs(20)
    ));
    let (agent, grandchild) = (pid("agent"), pid("grandchild"));
    assert!(alive(agent) && alive(grandchild));
    let children = std::fs::read_to_string(format!(
        "/proc/{}/task/{}/children",
        wrapper.id(),
        wrapper.id()
    ))
    .unwrap();
    let guardians: Vec<String> = children
        .split_whitespace()
        .filter(|p| *p != agent.to_string())
        .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
        .map(|c| {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            let name = c.split(' ').next().unwrap_or_default();
            let base = name.rsplit('/').next().unwrap_or_default();
            format!("{base}{}", &c[name.len()..])
        })
        .collect();
    assert!(!guardians.is_empty(), "the wrapper has a guardian");
    wrapper.kill().unwrap(); // SIGKILL: the wrapper runs no code of its own.
    wrapper.wait().unwrap();
    assert!(
        eventually(
            || !alive(agent) && !alive(grandchild),
            Duration::from_secs(10)
        ),
        "agent alive: {}, grandchild alive: {}",
        alive(agent),
        alive(grandchild)
    );
    // The killed wrapper's private run directory does not stay behind either.
    run_dir_goes(&read(dir.path(), "socket"), "killed");
    guardians
}

/// `wrapper` running `sh -c script` as its agent, quietly, with a path control socket (the
/// run directory it lives in is then known from `$AHP_WRAP_SOCKET`).
fn agent_script(mut wrapper: Command, script: &str) -> Command {
    wrapper
        .arg("--")
        .env("AHP_WRAP_CONTROL", "path")
        .args(["sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    wrapper
}

/// The run directory of the path control socket `socket` (as the agent saw it in its
/// environment) is removed within a few seconds.
fn run_dir_goes(socket: &str, what: &str) {
    let run_dir = std::path::Path::new(socket.trim()).parent().unwrap();
    assert!(run_dir.components().count() > 2, "{what}: {run_dir:?}");
    assert!(
        eventually(|| !run_dir.exists(), Duration::from_secs(10)),
        "{what}: {} is left behind",
        run_dir.display()
    );
}

#[test]
fn a_run_that_ends_normally_leaves_no_run_directory_with_either_guardian() {
    let dir = tempfile::tempdir().unwrap();
    let copy = wrapper_copy(dir.path());
    for (wrapper, what) in [(wrap_bin(), "spawned"), (copy, "forked")] {
        let socket = dir.path().join(format!("socket-{what}"));
        let script = format!("echo \"$AHP_WRAP_SOCKET\" > {}", socket.display());
        let status = agent_script(Command::new(&wrapper), &script)
            .status()
            .unwrap();
        assert!(status.success(), "{what}: {status}");
        // The guardian removes it once the wrapper has exited.
        run_dir_goes(&std::fs::read_to_string(&socket).unwrap(), what);
    }
}

/// The system calls `strace -f -qq -e trace=<calls>` (and `flags`) saw in a run of
/// `ahp-wrap -q --summary never -- <agent>` in an empty workspace with a fresh home, after
/// the run succeeded.
fn traced(calls: &str, flags: &[&str], agent: &[&str]) -> String {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let trace = ws.path().join("..").join(format!(
        "trace-{}",
        ws.path().file_name().unwrap().to_string_lossy()
    ));
    let status = Command::new("strace")
        .args(["-f", "-qq"])
        .args(flags)
        .args(["-e", &format!("trace={calls}"), "-o"])
        .arg(&trace)
        .arg(wrap_bin())
        .args(["-q", "--summary", "never", "--"])
        .args(agent)
        .current_dir(ws.path())
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("strace runs (.ci/run installs it)");
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let _ = std::fs::remove_file(&trace);
    assert!(status.success(), "{status}\n{text}");
    text
}

#[test]
fn the_checkpoints_watches_are_given_to_the_guardian_not_closed_by_the_wrapper() {
    // Closing the last descriptor of an inotify instance with watches waits for the kernel
    // to retire them (15–22 ms at the end of most runs, BENCHMARKS.md): the wrapper sends
    // it to its guardian instead, with the order that carries it. Seen in the system calls.
    let text = traced("sendmsg", &["-y"], &["sh", "-c", "echo kept > f"]);
    assert!(
        text.lines()
            .any(|l| l.contains("SCM_RIGHTS") && l.contains("anon_inode:inotify")),
        "no inotify instance sent with an order:\n{text}"
    );
}

#[test]
fn the_guardian_removes_the_run_directory_only_once_the_wrapper_has_exited() {
    // Removing the run directory and the caches' layers is 1–2 ms of a disk journal's work:
    // done while the wrapper's last steps ran, it took their processor. Seen in the system
    // calls, in the order they were made.
    let text = traced("execve,unlinkat,exit_group", &[], &["true"]);
    let pid = |l: &str| l.split_whitespace().next().unwrap_or_default().to_owned();
    let lines: Vec<&str> = text.lines().collect();
    let wrapper = pid(lines.first().copied().unwrap_or_default());
    let guardian = lines
        .iter()
        .find(|l| l.contains("execve(") && l.contains("\"guardian\""))
        .map(|l| pid(l))
        .unwrap_or_else(|| panic!("no guardian started:\n{text}"));
    let exited = lines
        .iter()
        .position(|l| pid(l) == wrapper && l.contains("exit_group("))
        .unwrap_or_else(|| panic!("the wrapper's exit is not in the trace:\n{text}"));
    let removed = lines
        .iter()
        .position(|l| pid(l) == guardian && l.contains("AT_REMOVEDIR"))
        .unwrap_or_else(|| panic!("the guardian removed no directory:\n{text}"));
    assert!(
        removed > exited,
        "the guardian removed a directory before the wrapper exited:\n{text}"
    );
}
