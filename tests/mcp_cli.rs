//! How `ahp-wrap mcp` ends, through the real command line: a client that hangs up lets the
//! server exit by itself (and ends one that does not, after a short grace), and a server that
//! breaks the stream gets its open calls answered with an error and the run failed.

use ahp_wrap_testkit::agents;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agents::run_with_input;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn mcp(server: &[&str]) -> Command {
    let mut cmd = Command::new(ahp_wrap_testkit::wrap_bin());
    cmd.args(["mcp", "--name", "t", "--summary", "never", "--"])
        .args(server);
    cmd
}

#[test]
#[cfg_attr(
    skip_e2e = "mcp",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the mcp setup"
)]
fn a_client_that_hangs_up_lets_the_server_exit_by_itself() {
    let js = server_js();
    let dir = tempfile::tempdir().unwrap();
    let input = format!("{INITIALIZE}\n");
    let run = run_with_input(
        &mut mcp(&["node", &js, dir.path().to_str().unwrap()]),
        input.as_bytes(),
        Duration::from_secs(60),
    );
    run.check(
        run.output.status.code() == Some(0),
        "the server's own exit code",
    );
    run.check(
        run.stdout().contains(r#""id":1"#),
        "the initialize answer came back",
    );
    // The server exits on EOF: nothing waits for the grace.
    run.check(run.elapsed < Duration::from_secs(10), "ended promptly");
}

#[test]
fn a_server_that_ignores_the_hang_up_is_ended_after_the_grace() {
    let run = run_with_input(&mut mcp(&["sleep", "60"]), b"", Duration::from_secs(60));
    // SIGTERM after the 2 s grace: 128 + 15, long before sleep would end.
    run.check(run.output.status.code() == Some(143), "ended by SIGTERM");
    run.check(
        run.elapsed < Duration::from_secs(15),
        "ended after the grace",
    );
}

#[test]
fn a_server_that_breaks_the_stream_fails_the_open_call_and_the_run() {
    // A line over the 16 MiB frame limit, then silence: it cannot be passed on.
    let flood = "head -c 17000000 /dev/zero | tr '\\0' a; sleep 60";
    let mut child = mcp(&["sh", "-c", flood])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let mut answer = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(
        answer.contains(r#""id":1"#) && answer.contains("-32000"),
        "{answer}"
    );
    assert_eq!(status.code(), Some(125), "the run fails: {answer}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// The installed filesystem server (tests/mcp/setup.sh).
fn server_js() -> String {
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/.cache/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    assert!(
        js.exists(),
        "{} is missing: run tests/mcp/setup.sh",
        js.display()
    );
    js.display().to_string()
}

/// `--via-run` outside a run, and `--wrap-mcp` for an agent without the support, refuse
/// before anything starts.
#[test]
fn via_run_outside_a_run_and_wrap_mcp_elsewhere_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let touch = format!("touch {}", marker.display());
    let out = Command::new(ahp_wrap_testkit::wrap_bin())
        .args(["mcp", "--via-run", "--name", "t", "--", "sh", "-c", &touch])
        .env_remove("AHP_WRAP_SOCKET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("--via-run: no run to ask"), "{stderr}");
    let script = dir.path().join("agent.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{touch}\n")).unwrap();
    std::process::Command::new("chmod")
        .arg("755")
        .arg(&script)
        .status()
        .unwrap();
    let out = Command::new(ahp_wrap_testkit::wrap_bin())
        .args(["--wrap-mcp", "--framework", "gemini", "--"])
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("--wrap-mcp is supported for Claude Code only"),
        "{stderr}"
    );
    assert!(!marker.exists(), "a refused run started its command");
}
