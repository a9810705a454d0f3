//! Spans over OTLP/HTTP, received by a collector that decodes the real OpenTelemetry
//! protobuf schema (`tests/otlp/receiver.py`, on Python's `opentelemetry-proto`):
//! - a real Claude Code run exports its run span and one child span per decided event,
//!   with the audit log's verdicts, rules and redactions;
//! - a collector that is down or hangs changes no decision and holds nothing up.

use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::claude_code as support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{bash, run, FakeApi, World};

/// The receiver's Python, installed by tests/otlp/setup.sh (run here: it is idempotent).
fn python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("sh")
        .arg(root.join("tests/otlp/setup.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/otlp/setup.sh failed (it installs opentelemetry-proto from PyPI): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A running receiver; its spans are the JSON lines of `spans`.
struct Receiver {
    child: Child,
    port: u16,
    spans: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start(dir: &Path, mode: &[&str]) -> Receiver {
        let spans = dir.join(format!("spans{}.jsonl", mode.len()));
        let mut child = Command::new(python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py"))
            .args(mode)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&spans).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the receiver said {line:?}"))
            .parse()
            .unwrap();
        Receiver { child, port, spans }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans received so far.
    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.spans)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The spans, once one named `name` has arrived (within 10 s).
    fn spans_until(&self, name: &str) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let spans = self.spans();
            if spans.iter().any(|s| s["name"] == name) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The audit log's decided records (blocking events), in order.
fn decided(audit: &Path) -> Vec<Value> {
    agents::read_jsonl(audit)
        .into_iter()
        .filter(|r| r["event_type"].is_string() && r["decision"] != "notified")
        .collect()
}

/// The AWS key the model writes into a command: the audit log and the span both redact it.
const SECRET: &str = "AKIAIOSFODNN7EXAMPLE";

#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn a_real_claude_run_exports_its_run_and_each_decision_as_the_audit_log_has_them() {
    let world = World::new();
    let home = world.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "SECRET-KEY-MATERIAL\n").unwrap();
    let fine = world.ws().join("fine-marker");
    let receiver = Receiver::start(world.dir.path(), &[]);
    let audit = world.dir.path().join("audit.jsonl");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            bash("cat ~/.ssh/id_rsa"),
            bash(&format!("touch {} # key {SECRET}", fine.display())),
            {"text": "All done."}
        ]),
    );
    let mut cmd = world.command(
        &api,
        Some(&[
            "--otlp",
            &receiver.url(),
            "--audit-log",
            audit.to_str().unwrap(),
        ]),
        &["-p", "tidy up", "--allowedTools", "Bash"],
    );
    cmd.env("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team%20a")
        .env("OTEL_SERVICE_NAME", "ci-agents");
    let r = run(cmd);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    assert!(fine.exists(), "the allowed command should have run");

    let spans = receiver.spans_until("ahp.run");
    let records = decided(&audit);
    let session = records[0]["session"].as_str().unwrap().to_owned();
    let runs: Vec<&Value> = spans.iter().filter(|s| s["name"] == "ahp.run").collect();
    assert_eq!(runs.len(), 1, "one run span: {spans:#?}");
    let run_span = runs[0];
    let attrs = &run_span["attributes"];
    assert_eq!(attrs["ahp.session_id"], session.as_str());
    assert_eq!(attrs["ahp.framework"], "claude-code");
    assert_eq!(attrs["ahp.depth"], 0);
    assert_eq!(attrs["process.exit.code"], 0);
    assert_eq!(run_span["parent_span_id"], "");
    assert_eq!(run_span["resource"]["service.name"], "ci-agents");
    assert_eq!(run_span["resource"]["ahp.role"], "run");
    assert_eq!(
        run_span["tenant"], "team a",
        "OTEL_EXPORTER_OTLP_HEADERS is sent"
    );

    // One child span per decided event, with the audit log's verdict, rule and tool.
    let decisions: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("ahp.decide "))
        .collect();
    assert!(records.len() >= 2, "two Bash calls at least: {records:#?}");
    assert_eq!(
        decisions.len(),
        records.len(),
        "a span per decided event: {decisions:#?}\nvs the audit log: {records:#?}"
    );
    for record in &records {
        // Concurrent hooks may be recorded and exported in different orders: a record's
        // span is the one with its event type, verdict and latency.
        let span = decisions
            .iter()
            .find(|s| {
                let a = &s["attributes"];
                a["ahp.event_type"] == record["event_type"]
                    && a["ahp.verdict"] == record["decision"]
                    && a["ahp.latency_us"] == record["latency_us"]
            })
            .unwrap_or_else(|| panic!("no span for {record:#}: {decisions:#?}"));
        let a = &span["attributes"];
        assert_eq!(span["trace_id"], run_span["trace_id"], "one trace per run");
        assert_eq!(
            span["parent_span_id"], run_span["span_id"],
            "a child of the run"
        );
        assert_eq!(
            span["name"],
            format!("ahp.decide {}", record["event_type"].as_str().unwrap())
        );
        assert_eq!(a["ahp.verdict"], record["decision"]);
        assert_eq!(a["ahp.latency_us"], record["latency_us"]);
        let source = record["source"].as_str().unwrap();
        match source.strip_prefix("policy:") {
            Some(rule) => assert_eq!(a["ahp.rule"], rule),
            None => assert!(a.get("ahp.rule").is_none(), "{a}"),
        }
        assert_eq!(a["ahp.fail_mode"], false);
        assert_eq!(
            a.get("ahp.reason"),
            record.get("reason").filter(|r| !r.is_null())
        );
        let blocked = record["decision"] == "block";
        assert_eq!(span["status"], if blocked { 2 } else { 0 }, "{span}");
    }
    let cat = decisions
        .iter()
        .find(|s| {
            s["attributes"]["ahp.arguments"]
                .as_str()
                .unwrap_or("")
                .contains("id_rsa")
        })
        .expect("the secret read has a span");
    assert_eq!(cat["attributes"]["ahp.verdict"], "block");
    assert_eq!(cat["attributes"]["ahp.tool"], "Bash");
    assert_eq!(cat["attributes"]["ahp.decided_by"], "policy");

    // The key in the allowed command is redacted in the span as in the audit log.
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(!text.contains(SECRET) && text.contains("[REDACTED:aws-key]"));
    let touch = decisions
        .iter()
        .find(|s| {
            s["attributes"]["ahp.arguments"]
                .as_str()
                .unwrap_or("")
                .contains("fine-marker")
        })
        .expect("the allowed command has a span");
    let args = touch["attributes"]["ahp.arguments"].as_str().unwrap();
    assert!(!args.contains(SECRET), "{args}");
    assert!(args.contains("[REDACTED:aws-key]"), "{args}");
    assert!(!spans.iter().any(|s| s.to_string().contains(SECRET)));
}

/// A gated shell agent with one blocked and one allowed call; returns the two hooks' exit
/// codes, whether the allowed command ran, how long the run took, and the audit latencies.
fn gated_run(dir: &Path, otlp: Option<&str>) -> (String, bool, Duration, Vec<u64>) {
    let _ = std::fs::remove_file(dir.join("ran"));
    let audit = dir.join(format!("audit-{}.jsonl", otlp.is_some()));
    let _ = std::fs::remove_file(&audit);
    let script = format!(
        r#"cd '{dir}'
printf '%s' '{{"payload":{{"tool_name":"Bash","arguments":{{"command":"rm -rf ~"}}}}}}' | "$AHP_WRAP_BIN" hook generic pre_action >/dev/null 2>&1
a=$?
printf '%s' '{{"payload":{{"tool_name":"Bash","arguments":{{"command":"touch ran"}}}}}}' | "$AHP_WRAP_BIN" hook generic pre_action >/dev/null 2>&1
b=$?
[ $b = 0 ] && touch ran
echo "$a $b" > rcs"#,
        dir = dir.display()
    );
    let mut cmd = Command::new(ahp_wrap_testkit::wrap_bin());
    if let Some(url) = otlp {
        cmd.args(["--otlp", url]);
    }
    cmd.args(["--framework", "generic", "--no-intercept", "--audit-log"])
        .arg(&audit)
        .args(["--", "sh", "-c", &script])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let start = Instant::now();
    let out = agents::run_captured(&mut cmd, Duration::from_secs(30));
    let took = start.elapsed();
    assert!(out.status.success(), "{}", agents::show(&out));
    let latencies = decided(&audit)
        .iter()
        .map(|r| r["latency_us"].as_u64().unwrap())
        .collect();
    (
        std::fs::read_to_string(dir.join("rcs"))
            .unwrap_or_default()
            .trim()
            .to_owned(),
        dir.join("ran").exists(),
        took,
        latencies,
    )
}

#[test]
fn a_collector_that_is_down_or_hangs_changes_no_decision_and_holds_nothing_up() {
    let dir = tempfile::tempdir().unwrap();
    let (rcs, ran, _, _) = gated_run(dir.path(), None);
    assert_eq!((rcs.as_str(), ran), ("2 0", true), "without export");

    // Down: nothing listens on the port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (rcs, ran, took, _) = gated_run(dir.path(), Some(&down));
    assert_eq!((rcs.as_str(), ran), ("2 0", true), "collector down");
    assert!(
        took < Duration::from_secs(5),
        "a run took {took:?} with the collector down"
    );

    // Hangs: accepts, never answers. The export waits for it off the decisions' path, and
    // the run's exit waits for it at most 2 s.
    let hung = Receiver::start(dir.path(), &["--hang"]);
    let (rcs, ran, took, latencies) = gated_run(dir.path(), Some(&hung.url()));
    assert_eq!((rcs.as_str(), ran), ("2 0", true), "collector hung");
    assert!(
        took < Duration::from_secs(8),
        "a run took {took:?} with the collector hung"
    );
    assert_eq!(latencies.len(), 2);
    assert!(
        latencies.iter().all(|&us| us < 1_000_000),
        "a decision waited for the collector: {latencies:?} µs"
    );
}

#[test]
fn a_bad_export_setting_is_refused_before_the_agent_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let mut cmd = Command::new(ahp_wrap_testkit::wrap_bin());
    cmd.args(["--otlp", "collector:4318", "--", "touch"])
        .arg(&marker);
    let out = agents::run_captured(&mut cmd, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(125), "{}", agents::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--otlp: \"collector:4318\""));
    assert!(!marker.exists(), "the agent must not start");

    let mut cmd = Command::new(ahp_wrap_testkit::wrap_bin());
    cmd.args(["--", "touch"])
        .arg(&marker)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let out = agents::run_captured(&mut cmd, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(125), "{}", agents::show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http/protobuf"));
    assert!(!marker.exists(), "the agent must not start");
}
