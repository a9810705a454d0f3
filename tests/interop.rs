//! Interop with the reference AHP implementation (the a3s-ahp crate, as a harness behind
//! each of our transports): a generic hook round trip ending in allow and in block, and the
//! wrapper's own events arriving at the reference server.

use ahp_wrap_testkit::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const ALLOWED: &str = r#"{"event_type":"pre_action","payload":{"action_type":"tool_call","tool_name":"bash","arguments":{"command":"make test"}}}"#;
const BLOCKED: &str = r#"{"event_type":"pre_action","payload":{"action_type":"tool_call","tool_name":"bash","arguments":{"command":"BLOCK_ME"}}}"#;

/// A reference harness server process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(args: &[&str], log: &Path) -> Server {
    Server(
        Command::new(example("ref_harness"))
            .args(args)
            .env("REF_HARNESS_LOG", log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

fn wait_for(what: impl Fn() -> bool) {
    let start = Instant::now();
    while !what() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the reference server did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_tcp(port: u16) {
    wait_for(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
}

/// Runs one allowed and one blocked gated action through `harness`; checks what ran.
fn round_trip(harness: &str, log: &Path) {
    for (payload, allowed) in [(ALLOWED, true), (BLOCKED, false)] {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            Command::new(wrap_bin())
                .args(["--harness", harness, "--timeout", "5000", "--"])
                .args(gated_agent(dir.path(), payload, 0)),
            Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert_eq!(
            dir.path().join("ran").exists(),
            allowed,
            "ran? hook rc {} reason {}\n{}",
            read(dir.path(), "hook_rc"),
            read(dir.path(), "reason.txt"),
            show(&out)
        );
        if !allowed {
            assert!(
                read(dir.path(), "reason.txt").contains("payload mentions BLOCK_ME"),
                "the harness's reason reaches the agent: {}",
                read(dir.path(), "reason.txt")
            );
        }
    }
    let seen = std::fs::read_to_string(log).unwrap_or_default();
    let events: Vec<serde_json::Value> = seen
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds = |t: &str| {
        events
            .iter()
            .filter(|e| e["event"]["event_type"] == t)
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds("pre_action"), ["request", "request"], "{seen}");
    // Notifications may arrive one by one or batched (the reference server answers a batch
    // through its blocking handler); either way both sessions start and end.
    assert_eq!(kinds("session_start").len(), 2, "{seen}");
    assert_eq!(kinds("session_end").len(), 2, "{seen}");
}

#[test]
fn reference_harness_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let harness = format!(
        "stdio:env REF_HARNESS_LOG='{}' '{}' stdio",
        log.display(),
        example("ref_harness").display()
    );
    round_trip(&harness, &log);
}

#[test]
fn reference_harness_over_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let sock = dir.path().join("h.sock");
    let _server = start(&["unix", sock.to_str().unwrap()], &log);
    wait_for(|| sock.exists());
    round_trip(&format!("unix:{}", sock.display()), &log);
}

#[test]
fn reference_harness_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let port = free_port();
    let _server = start(&["http", &format!("127.0.0.1:{port}")], &log);
    wait_tcp(port);
    round_trip(&format!("http://127.0.0.1:{port}/ahp"), &log);
}

#[test]
fn reference_harness_over_websocket() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let port = free_port();
    let _server = start(&["ws", &format!("127.0.0.1:{port}")], &log);
    wait_tcp(port);
    round_trip(&format!("ws://127.0.0.1:{port}/ahp"), &log);
}

#[test]
fn the_minimal_example_harness_works_as_documented() {
    let harness = format!(
        "stdio:python3 '{}/examples/minimal_harness.py'",
        env!("CARGO_MANIFEST_DIR")
    );
    for (command, allowed) in [("rm -rf build", false), ("make test", true)] {
        let dir = tempfile::tempdir().unwrap();
        let payload = format!(
            r#"{{"event_type":"pre_action","payload":{{"tool_name":"bash","arguments":{{"command":"{command}"}}}}}}"#
        );
        let out = run(
            Command::new(wrap_bin())
                .args(["--harness", &harness, "--"])
                .args(gated_agent(dir.path(), &payload, 0)),
            Duration::from_secs(60),
        );
        assert_eq!(
            dir.path().join("ran").exists(),
            allowed,
            "{command}\n{}",
            show(&out)
        );
    }
}

/// The same example against a command run by name, which a PATH shim sends as an argv array:
/// a recursive forced delete in any spelling is refused and its directory stays on disk; a
/// delete the example has no opinion on goes ahead (so the shim path itself works).
#[test]
fn the_minimal_example_harness_blocks_rm_sent_as_an_argv() {
    let harness = format!(
        "stdio:python3 '{}/examples/minimal_harness.py'",
        env!("CARGO_MANIFEST_DIR")
    );
    for (script, blocked) in [
        ("rm -rf victim", true),
        ("rm -r -f victim", true),
        ("rm --recursive --force victim", true),
        ("rm -fR victim", true),
        ("rm -r victim", false),
    ] {
        let dir = tempfile::tempdir_in(outside_temp()).unwrap();
        std::fs::create_dir_all(dir.path().join("victim/sub")).unwrap();
        let out = run(
            Command::new(wrap_bin())
                .args([
                    "--harness",
                    &harness,
                    "--summary",
                    "never",
                    "--",
                    "sh",
                    "-c",
                    script,
                ])
                .current_dir(dir.path()),
            Duration::from_secs(60),
        );
        assert_eq!(
            dir.path().join("victim/sub").exists(),
            blocked,
            "{script}\n{}",
            show(&out)
        );
    }
}

#[test]
fn unix_link_dropped_mid_request_fails_closed_then_reconnects() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("flaky.sock");
    let _server = Server(
        Command::new("python3")
            .arg(support("flaky_unix_harness.py"))
            .arg(&sock)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(|| sock.exists());
    let mut script = format!("cd '{}'\n", dir.path().display());
    for n in 1..=3 {
        script.push_str(&format!(
            "printf '%s' '{ALLOWED}' | \"$AHP_WRAP_BIN\" hook generic pre_action > d{n} 2> r{n} && touch ran{n}\n"
        ));
    }
    let out = run(
        Command::new(wrap_bin())
            .args([
                "--harness",
                &format!("unix:{}", sock.display()),
                "--timeout",
                "5000",
                "--",
            ])
            .args(["sh", "-c", &script]),
        Duration::from_secs(60),
    );
    let d = dir.path();
    assert!(
        d.join("ran1").exists(),
        "first call allowed\n{}",
        show(&out)
    );
    assert!(!d.join("ran2").exists());
    let r2 = read(d, "r2");
    assert!(
        r2.contains("the harness link was lost"),
        "in-flight request fails closed: {r2}"
    );
    assert!(!d.join("ran3").exists());
    let r3 = read(d, "r3");
    assert!(
        r3.contains("reconnected harness says no"),
        "answered after reconnecting: {r3}"
    );
}
