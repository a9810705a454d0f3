//! `ahp-wrap serve` as a harness for other AHP clients: the reference client (a3s-ahp 2.4)
//! over every listener, token auth on the network ones, and one audit log for all.

use ahp_wrap_testkit::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use a3s_ahp::{AhpClient, AuthConfig, Decision, EventType, Transport};
use common::*;
use serde_json::json;

struct Serve {
    child: Child,
    addr: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `ahp-wrap serve`, returns once it says where it listens.
fn serve(listen: &str, extra: &[&str]) -> Serve {
    let mut child = Command::new(wrap_bin())
        .args(["serve", "--listen", listen])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next().expect("serve says where it listens").unwrap();
    let addr = line
        .strip_prefix("ahp-wrap serve: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    std::thread::spawn(move || for _ in lines {});
    Serve { child, addr }
}

const RM_RF: &str = "rm -rf /";

async fn exercise(client: &AhpClient) {
    let hs = client.handshake(vec!["pre_action".into()]).await.unwrap();
    assert_eq!(hs.protocol_version, "2.4");
    assert_eq!(hs.harness_info.name, "ahp-wrap");
    assert_eq!(hs.config.as_ref().unwrap().max_depth, Some(8));
    let blocked = client
        .send_event_decision(
            EventType::PreAction,
            json!({"action_type": "tool_call", "tool_name": "Bash", "arguments": {"command": RM_RF}, "context": {"cwd": "/tmp"}}),
        )
        .await
        .unwrap();
    assert!(matches!(blocked, Decision::Block { .. }), "{blocked:?}");
    let fine = client
        .send_event_decision(
            EventType::PreAction,
            json!({"action_type": "tool_call", "tool_name": "Bash", "arguments": {"command": "ls -la"}, "context": {"cwd": "/tmp"}}),
        )
        .await
        .unwrap();
    assert!(matches!(fine, Decision::Allow { .. }), "{fine:?}");
    // With no approvals host, a person is the wrapper's to ask: the escalation comes back.
    let asked = client
        .send_event_decision(
            EventType::PreAction,
            json!({"action_type": "tool_call", "tool_name": "Bash", "arguments": {"command": "git reset --hard"}, "context": {"cwd": "/tmp"}}),
        )
        .await
        .unwrap();
    assert!(matches!(asked, Decision::Escalate { .. }), "{asked:?}");
    // A notification is accepted and audited.
    client
        .send_event(
            EventType::PostAction,
            json!({"tool_name": "Bash", "result": {"exit_code": 0}}),
        )
        .await
        .unwrap();
}

fn audited(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check_audit(log: &Path) {
    // Notifications arrive asynchronously: wait a little for the last one.
    for _ in 0..100 {
        if audited(log).len() >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let records = audited(log);
    let decisions: Vec<&str> = records
        .iter()
        .map(|r| r["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        ["block", "allow", "escalate", "notified"],
        "{records:?}"
    );
    let out = run(
        Command::new(wrap_bin()).args(["audit", "verify"]).arg(log),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", show(&out));
}

#[tokio::test]
async fn reference_client_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let client = AhpClient::new(Transport::Stdio {
        program: wrap_bin().display().to_string(),
        args: vec![
            "serve".into(),
            "--listen".into(),
            "stdio".into(),
            "--audit-log".into(),
            log.display().to_string(),
        ],
    })
    .await
    .unwrap();
    exercise(&client).await;
    check_audit(&log);
}

#[tokio::test]
async fn reference_client_over_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let sock = dir.path().join("serve.sock");
    let s = serve(
        &format!("unix:{}", sock.display()),
        &["--audit-log", log.to_str().unwrap()],
    );
    let client = AhpClient::new(Transport::UnixSocket {
        path: s.addr.clone(),
    })
    .await
    .unwrap();
    exercise(&client).await;
    check_audit(&log);
}

#[tokio::test]
async fn reference_client_over_http_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let s = serve(
        "http://127.0.0.1:0",
        &["--token", "sekret", "--audit-log", log.to_str().unwrap()],
    );
    let client = AhpClient::new(Transport::Http {
        url: s.addr.clone(),
        auth: Some(AuthConfig::bearer("sekret")),
    })
    .await
    .unwrap();
    exercise(&client).await;
    check_audit(&log);
    let intruder = AhpClient::new(Transport::Http {
        url: s.addr.clone(),
        auth: Some(AuthConfig::bearer("wrong")),
    })
    .await
    .unwrap();
    assert!(
        intruder.handshake(vec![]).await.is_err(),
        "a wrong token is refused"
    );
}

#[tokio::test]
async fn reference_client_over_websocket_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let s = serve(
        "ws://127.0.0.1:0",
        &["--token", "sekret", "--audit-log", log.to_str().unwrap()],
    );
    let client = AhpClient::new(Transport::WebSocket {
        url: s.addr.clone(),
        auth: Some(AuthConfig::api_key("sekret")),
    })
    .await
    .unwrap();
    exercise(&client).await;
    check_audit(&log);
    let intruder = AhpClient::new(Transport::WebSocket {
        url: s.addr.clone(),
        auth: Some(AuthConfig::bearer("wrong")),
    })
    .await;
    assert!(intruder.is_err(), "a wrong token is refused at the upgrade");
}

#[test]
fn wrappers_share_one_serve_harness() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let s = serve(
        "http://127.0.0.1:0",
        &["--token", "t", "--audit-log", log.to_str().unwrap()],
    );
    let payload = format!(
        r#"{{"event_type":"pre_action","payload":{{"tool_name":"Bash","arguments":{{"command":"{RM_RF}"}},"context":{{"cwd":"/tmp"}}}}}}"#
    );
    for _ in 0..2 {
        let work = tempfile::tempdir().unwrap();
        let out = run(
            Command::new(wrap_bin())
                .args(["--harness", &s.addr, "--token", "t", "--"])
                .args(gated_agent(work.path(), &payload, 0)),
            Duration::from_secs(60),
        );
        assert!(!work.path().join("ran").exists(), "{}", show(&out));
    }
    let sessions: std::collections::BTreeSet<String> = audited(&log)
        .iter()
        .filter(|r| r["decision"] == "block")
        .map(|r| r["session"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sessions.len(), 2, "two wrappers, one audit log");
}

/// When serve cannot write its audit log, a decision is not given as decided: the fail mode
/// answers, as in a run (one gate for both). The log's file may grow by 1 KiB at most
/// (`ulimit -f 1`; SIGXFSZ ignored, so a write past it fails with EFBIG), so the first
/// records fit and the later ones cannot be written.
#[test]
fn a_decision_serve_cannot_record_is_the_fail_modes() {
    use std::io::Write;
    for (fail_mode, expect) in [("closed", "block"), ("open", "allow")] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let script = format!(
            "trap '' XFSZ; ulimit -f 1; exec '{}' serve --listen stdio --fail-mode {fail_mode} --audit-log '{}'",
            wrap_bin().display(),
            log.display()
        );
        let mut child = Command::new("bash")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let handshake = json!({"jsonrpc": "2.0", "id": "h", "method": "ahp/handshake",
                               "params": {"protocol_version": "2.4"}});
        writeln!(stdin, "{handshake}").unwrap();
        out.next().unwrap().unwrap();
        let mut answers = Vec::new();
        // An allowed command each time (no rule matches `ls`): only the log can make it
        // anything else.
        for i in 0..8 {
            let event = json!({"jsonrpc": "2.0", "id": format!("e{i}"), "method": "ahp/event",
                "params": {"event_type": "pre_action", "session_id": "s", "agent_id": "a",
                           "timestamp": "2026-11-25T00:00:00Z", "depth": 0,
                           "payload": {"tool_name": "Bash", "arguments": {"command": "ls"}}}});
            writeln!(stdin, "{event}").unwrap();
            let line = out.next().unwrap().unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            answers.push(v["result"].clone());
        }
        drop(stdin);
        let _ = child.wait();
        // Fewer records than decisions: some could not be written.
        let recorded = std::fs::read_to_string(&log).unwrap_or_default();
        let whole = recorded.lines().filter(|l| l.ends_with('}')).count();
        assert!(
            whole < answers.len(),
            "{fail_mode}: every record was written:\n{recorded}"
        );
        if expect == "block" {
            let failed: Vec<_> = answers
                .iter()
                .filter(|a| {
                    a["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("the audit log cannot be written"))
                })
                .collect();
            assert!(
                !failed.is_empty(),
                "{fail_mode}: no decision met the full log: {answers:#?}"
            );
            assert!(
                failed.iter().all(|a| a["decision"] == "block"),
                "{answers:#?}"
            );
        } else {
            // Open: an unrecorded `ls` goes ahead, as the fail mode says (it was refused).
            assert!(
                answers.iter().all(|a| a["decision"] == "allow"),
                "{fail_mode}: {answers:#?}"
            );
        }
        assert!(std::fs::metadata(&log).unwrap().len() <= 1024);
    }
}
