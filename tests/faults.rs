//! A harness that misbehaves: each fault ends in the fail mode with a reason that names
//! the cause, the gated action never runs, and the agent's own exit code comes back.

use ahp_wrap_testkit::common;

use std::process::Command;
use std::time::Duration;

use common::*;

const PAYLOAD: &str = r#"{"event_type":"pre_action","payload":{"action_type":"tool_call","tool_name":"bash","arguments":{"command":"touch ran"}}}"#;

struct Outcome {
    hook_rc: String,
    reason: String,
    ran: bool,
    decision: String,
    harness_log: String,
}

fn run_fault(mode: &str, extra: &[&str]) -> Outcome {
    let mut args = vec!["--timeout", "1500"];
    if extra.contains(&"--timeout") {
        args.clear();
    }
    args.extend_from_slice(extra);
    let extra = &args;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("harness.jsonl");
    let harness = format!(
        "stdio:python3 '{}' {mode} '{}'",
        support("fault_harness.py").display(),
        log.display()
    );
    let out = run(
        Command::new(wrap_bin())
            .args(["--harness", &harness])
            .args(extra)
            .arg("--")
            .args(gated_agent(dir.path(), PAYLOAD, 7)),
        Duration::from_secs(60),
    );
    assert_eq!(
        out.status.code(),
        Some(7),
        "the agent's exit code is ours\n{}",
        show(&out)
    );
    Outcome {
        hook_rc: read(dir.path(), "hook_rc").trim().to_owned(),
        reason: read(dir.path(), "reason.txt"),
        ran: dir.path().join("ran").exists(),
        decision: read(dir.path(), "decision.json"),
        harness_log: read(dir.path(), "harness.jsonl"),
    }
}

fn assert_blocked(o: &Outcome, cause: &str) {
    assert!(!o.ran, "the gated command must not run");
    assert_eq!(o.hook_rc, "2", "the generic hook exits 2 on block");
    assert!(
        o.reason.contains(cause),
        "the reason names the cause {cause:?}: {}",
        o.reason
    );
    assert!(o.reason.contains("fail mode: closed"), "{}", o.reason);
    let d: serde_json::Value = serde_json::from_str(&o.decision).unwrap();
    assert_eq!(d["decision"], "block");
}

#[test]
fn hung_harness_fails_closed_at_the_deadline() {
    assert_blocked(&run_fault("hang", &[]), "no answer within 1500 ms");
}

#[test]
fn harness_that_never_handshakes_fails_closed() {
    assert_blocked(&run_fault("hang-handshake", &[]), "harness is unreachable");
}

#[test]
fn harness_dying_mid_request_fails_closed() {
    assert_blocked(&run_fault("die", &[]), "the harness process exited");
}

#[test]
fn garbage_answer_fails_closed() {
    assert_blocked(&run_fault("garbage", &[]), "malformed JSON");
}

#[test]
fn wrong_id_fails_closed() {
    assert_blocked(&run_fault("wrong-id", &[]), "unknown id \"not-ahpw-");
}

#[test]
fn numeric_id_fails_closed() {
    assert_blocked(&run_fault("numeric-id", &[]), "non-string id 7");
}

#[test]
fn oversized_line_fails_closed() {
    assert_blocked(
        &run_fault("oversized", &["--max-frame", "4096"]),
        "a frame over the 4096-byte limit",
    );
}

#[test]
fn unknown_decision_fails_closed() {
    assert_blocked(
        &run_fault("unknown-decision", &[]),
        "unknown decision \"maybe\"",
    );
}

#[test]
fn modify_with_a_payload_that_is_not_an_object_fails_closed() {
    for mode in ["modify-string", "modify-number"] {
        assert_blocked(
            &run_fault(mode, &[]),
            "field \"modified_payload\" of a \"modify\" decision has the wrong type",
        );
    }
}

#[test]
fn a_duplicate_key_in_the_answer_fails_closed() {
    assert_blocked(
        &run_fault("duplicate-decision", &[]),
        "duplicate key \"decision\"",
    );
}

#[test]
fn reply_with_both_result_and_error_fails_closed_and_says_so() {
    // An "allow" in the result must not win over the error beside it, nor the reverse.
    assert_blocked(
        &run_fault("result-and-error", &[]),
        "the harness reply has both result and error",
    );
}

#[test]
fn json_rpc_error_fails_closed() {
    assert_blocked(&run_fault("rpc-error", &[]), "policy engine exploded");
}

#[test]
fn defer_past_the_deadline_fails_closed() {
    assert_blocked(
        &run_fault("defer-forever", &[]),
        "deferred (retry after 200 ms: busy)",
    );
}

#[test]
fn escalate_without_a_terminal_fails_closed() {
    assert_blocked(&run_fault("escalate", &[]), "no person can answer here");
}

#[test]
fn harness_timeout_ms_is_honoured_when_smaller() {
    // --timeout is 1500 ms, the harness says 300 ms: the reason names 300.
    assert_blocked(&run_fault("short-timeout", &[]), "no answer within 300 ms");
}

#[test]
fn missing_harness_program_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        Command::new(wrap_bin())
            .args([
                "--harness",
                "stdio:/no/such/harness",
                "--timeout",
                "500",
                "--",
            ])
            .args(gated_agent(dir.path(), PAYLOAD, 5)),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(5), "{}", show(&out));
    assert!(!dir.path().join("ran").exists());
    let reason = read(dir.path(), "reason.txt");
    assert!(reason.contains("cannot start harness"), "{reason}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not ready"),
        "{}",
        show(&out)
    );
}

#[test]
fn fail_mode_open_lets_the_action_through_and_says_why() {
    let o = run_fault("hang", &["--fail-mode", "open", "--timeout", "300"]);
    assert!(o.ran, "fail mode open allows");
    assert_eq!(o.hook_rc, "0");
}

#[test]
fn defer_then_decision_is_re_asked() {
    let o = run_fault("defer-once", &[]);
    assert!(!o.ran);
    assert!(
        o.reason.contains("blocked on the second ask"),
        "{}",
        o.reason
    );
    let asks = o
        .harness_log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|m| m["id"].is_string() && m["params"]["event_type"] == "pre_action")
        .count();
    assert_eq!(asks, 2, "asked twice:\n{}", o.harness_log);
}

#[test]
fn explicit_block_is_enforced_with_the_harness_reason() {
    let o = run_fault("block", &[]);
    assert!(!o.ran);
    assert_eq!(o.hook_rc, "2");
    assert!(
        o.reason.contains("the fault harness blocks everything"),
        "{}",
        o.reason
    );
}

#[test]
fn modify_returns_the_modified_payload() {
    let o = run_fault("modify", &[]);
    assert_eq!(o.hook_rc, "0");
    let d: serde_json::Value = serde_json::from_str(&o.decision).unwrap();
    assert_eq!(d["decision"], "modify");
    assert_eq!(
        d["modified_payload"]["arguments"]["command"],
        "echo modified"
    );
}

#[test]
fn handshake_comes_first_and_declares_2_4() {
    let o = run_fault("ok", &[]);
    assert!(o.ran);
    let first: serde_json::Value =
        serde_json::from_str(o.harness_log.lines().next().unwrap()).unwrap();
    assert_eq!(first["method"], "ahp/handshake");
    assert_eq!(first["params"]["protocol_version"], "2.4");
    assert!(first["id"].is_string());
    // The wrapper's own session events arrive, and the tool call as a request.
    assert!(
        o.harness_log.contains("\"session_start\""),
        "{}",
        o.harness_log
    );
    assert!(
        o.harness_log.contains("\"session_end\""),
        "{}",
        o.harness_log
    );
}

#[test]
fn batch_size_flush_order_and_max_depth_from_the_handshake_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("harness.jsonl");
    let harness = format!(
        "stdio:python3 '{}' config '{}'",
        support("fault_harness.py").display(),
        log.display()
    );
    let post =
        r#"{"event_type":"post_action","payload":{"tool_name":"bash","result":{"exit_code":0}}}"#;
    let mut script = format!("cd '{}'\n", dir.path().display());
    for _ in 0..5 {
        script.push_str(&format!(
            "printf '%s' '{post}' | \"$AHP_WRAP_BIN\" hook generic post_action >/dev/null\n"
        ));
    }
    script.push_str(&format!(
        "printf '%s' '{PAYLOAD}' | \"$AHP_WRAP_BIN\" hook generic pre_action > decision.json\n"
    ));
    // A sub-agent wrapper: the harness's max_depth is 0, so it must refuse to start.
    script.push_str(&format!(
        "'{}' --harness \"$OUTER_HARNESS\" -- true; echo $? > nested_rc\n",
        wrap_bin().display()
    ));
    let out = run(
        Command::new(wrap_bin())
            .env("OUTER_HARNESS", &harness)
            .args(["--harness", &harness, "--"])
            .args(["sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(
        read(dir.path(), "nested_rc").trim(),
        "125",
        "{}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("past the harness's max_depth 0"),
        "{}",
        show(&out)
    );
    let msgs: Vec<serde_json::Value> = read(dir.path(), "harness.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Only the outer wrapper's messages (the nested one has its own session).
    let outer = msgs[0]["params"]["session_id"].clone();
    let mine: Vec<&serde_json::Value> = msgs
        .iter()
        .filter(|m| {
            m["params"]["session_id"] == outer
                || m["params"]["events"]
                    .as_array()
                    .is_some_and(|e| e[0]["session_id"] == outer)
        })
        .collect();
    for m in &mine {
        if let Some(events) = m["params"]["events"].as_array() {
            assert!(events.len() <= 3, "batch_size 3 honoured: {m}");
        }
    }
    // Every post_action went out before the pre_action request (flush before blocking).
    let order: Vec<String> = mine
        .iter()
        .flat_map(|m| match m["params"]["events"].as_array() {
            Some(events) => events
                .iter()
                .map(|e| e["event_type"].as_str().unwrap().to_owned())
                .collect(),
            None => vec![m["params"]["event_type"]
                .as_str()
                .unwrap_or("handshake")
                .to_owned()],
        })
        .collect();
    let pre = order
        .iter()
        .position(|t| t == "pre_action")
        .expect("pre_action sent");
    assert_eq!(
        order[..pre].iter().filter(|t| *t == "post_action").count(),
        5,
        "{order:?}"
    );
    assert!(
        mine.iter().any(|m| m["method"] == "ahp/batch"),
        "notifications were batched: {order:?}"
    );
}

/// `escalate` on a terminal: the wrapper asks the person (reason shown, default no).
fn escalate_on_a_terminal(answer: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let harness = format!(
        "stdio:python3 '{}' escalate",
        support("fault_harness.py").display()
    );
    let agent = gated_agent(dir.path(), PAYLOAD, 0);
    let out = run(
        Command::new("python3")
            .arg(support("pty_run.py"))
            .args(["Allow it?", answer, "--"])
            .arg(wrap_bin())
            .args(["--harness", &harness, "--"])
            .args(agent),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    (
        dir.path().join("ran").exists(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn escalate_asks_the_person_at_the_terminal_who_says_yes() {
    // A line-buffered terminal: the answer is a line.
    let (ran, screen) = escalate_on_a_terminal("y\\r");
    assert!(
        screen.contains("a human must look"),
        "the reason is shown: {screen}"
    );
    assert!(ran, "allowed by the person: {screen}");
}

#[test]
fn escalate_defaults_to_no() {
    let (ran, screen) = escalate_on_a_terminal("\\r");
    assert!(!ran, "Enter means no: {screen}");
}
