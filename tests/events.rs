//! The wrapper's own events: session_start and session_end around the agent's life,
//! heartbeats with the agent's resource use, and error when the agent dies by a signal or
//! a hook process sends what cannot be read.

use ahp_wrap_testkit::common;

use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Runs `agent` under the fault harness in `ok` mode; returns the events it received.
fn events_of(agent: &str, extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("harness.jsonl");
    let harness = format!(
        "stdio:python3 '{}' ok '{}'",
        support("fault_harness.py").display(),
        log.display()
    );
    let out = run(
        Command::new(wrap_bin())
            .args(["--harness", &harness])
            .args(extra)
            .args(["--", "sh", "-c", agent]),
        Duration::from_secs(60),
    );
    let events = harness_events(dir.path());
    (out.status.code(), events)
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event_type"] == t).collect()
}

#[test]
fn session_events_frame_the_agents_life() {
    let (code, events) = events_of("exit 3", &[]);
    assert_eq!(code, Some(3));
    let start = of_type(&events, "session_start");
    let end = of_type(&events, "session_end");
    assert_eq!((start.len(), end.len()), (1, 1), "{events:?}");
    assert_eq!(events.first().unwrap()["event_type"], "session_start");
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
    assert!(start[0]["payload"]["pid"].as_u64().unwrap() > 1);
    assert_eq!(start[0]["payload"]["command"][0], "sh");
    assert_eq!(end[0]["payload"]["exit_code"], 3);
    assert_eq!(start[0]["session_id"], end[0]["session_id"]);
}

#[test]
fn heartbeats_carry_uptime_and_memory() {
    let (code, events) = events_of("sleep 2.5", &["--heartbeat", "1"]);
    assert_eq!(code, Some(0));
    let beats = of_type(&events, "heartbeat");
    assert!(beats.len() >= 2, "{events:?}");
    let last = beats.last().unwrap();
    assert!(
        last["payload"]["uptime_ms"].as_u64().unwrap() >= 1000,
        "{last}"
    );
    assert!(
        last["payload"]["memory_bytes"].as_u64().unwrap() > 0,
        "{last}"
    );
    assert!(last["payload"]["cpu_percent"].is_number(), "{last}");
}

#[test]
fn death_by_signal_is_an_error_event() {
    let (code, events) = events_of("kill -KILL $$", &[]);
    assert_eq!(code, Some(137));
    // (The other error event says that this generic agent called no hook.)
    let errors: Vec<_> = of_type(&events, "error")
        .into_iter()
        .filter(|e| e["payload"]["source"] == "agent")
        .collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert_eq!(errors[0]["payload"]["signal"], 9);
    assert_eq!(
        of_type(&events, "session_end")[0]["payload"]["exit_code"],
        137
    );
}

#[test]
fn an_unreadable_hook_payload_is_an_error_event_and_fails_closed() {
    let agent =
        r#"printf 'not json' | "$AHP_WRAP_BIN" hook generic pre_action; echo "rc=$?" >&2; exit 0"#;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("harness.jsonl");
    let harness = format!(
        "stdio:python3 '{}' ok '{}'",
        support("fault_harness.py").display(),
        log.display()
    );
    let out = run(
        Command::new(wrap_bin()).args(["--harness", &harness, "--", "sh", "-c", agent]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rc=2"), "{}", show(&out));
    assert!(stderr.contains("was not understood"), "{}", show(&out));
    let log = read(dir.path(), "harness.jsonl");
    assert!(
        log.contains("\"event_type\": \"error\"") || log.contains("\"event_type\":\"error\""),
        "{log}"
    );
}
