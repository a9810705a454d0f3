//! In-process benchmarks (criterion): the harness client's throughput to a local stdio
//! harness, the audit log's per-record cost, and the parent's share of one hook call.
//!
//! Run through `bench/run.sh`, which puts these next to the whole-process figures; alone:
//! `cargo bench --bench inproc`. Under `cargo test` it does nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench or test may stop at the first failure

mod support;

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ahp_wrap::audit::Auditor;
use ahp_wrap::audit::{AuditLog, AuditRecord};
use ahp_wrap::client::{Client, ClientConfig};
use ahp_wrap::control::{Kind, Request};
use ahp_wrap::gate::{Decider, Embedded, FailMode, Gate, Harness, Mode};
use ahp_wrap::intercept::hooks::HookService;
use ahp_wrap::policy::Policy;
use ahp_wrap::protocol::{Event, EventType};
use ahp_wrap::transport::{AuthScheme, HarnessSpec, LinkConfig};
use criterion::{BatchSize, Criterion, Throughput};
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::time::Instant;

/// Events per measured iteration of the client benches.
const EVENTS: usize = 1000;

fn runtime() -> Runtime {
    // The wrapper runs on a current-thread runtime; so do we.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn harness_argv() -> Vec<String> {
    let me = std::env::current_exe().expect("current exe");
    vec![me.display().to_string(), support::ROLE_HARNESS.to_owned()]
}

fn sample_event(n: usize) -> Event {
    Event {
        event_type: EventType::PreAction,
        session_id: "3f1c2a9e-0000-4000-8000-000000000000".into(),
        agent_id: "claude-code-bench".into(),
        timestamp: "2025-01-01T00:00:00.000Z".into(),
        depth: 0,
        payload: json!({
            "action_type": "tool_call",
            "tool_name": "Bash",
            "arguments": {"command": format!("echo hello-{n} > /tmp/ahp_bench.txt"), "description": "echo"},
            "context": {"cwd": "/tmp/claude-runs/basic/work", "framework": "claude-code"},
        }),
        context: None,
        metadata: None,
    }
}

fn client_benches(c: &mut Criterion) {
    let rt = runtime();
    let client = rt.block_on(async {
        let client = Client::start(
            HarnessSpec::Stdio {
                argv: harness_argv(),
            },
            ClientConfig {
                link: LinkConfig {
                    token: None,
                    auth: AuthScheme::Bearer,
                    max_frame: 4 << 20,
                },
                session_id: "bench".into(),
                agent_id: "bench".into(),
                framework: "bench".into(),
                framework_version: "0".into(),
                batch_window: Duration::from_millis(20),
            },
        );
        client
            .wait_ready(Duration::from_secs(10))
            .await
            .expect("the echo harness answers the handshake");
        client
    });
    let events: Vec<Event> = (0..EVENTS).map(sample_event).collect();
    let far = || Instant::now() + Duration::from_secs(60);

    let mut g = c.benchmark_group("client");
    g.throughput(Throughput::Elements(EVENTS as u64));
    g.sample_size(20);
    g.bench_function("one_at_a_time", |b| {
        b.iter(|| {
            rt.block_on(async {
                for e in &events {
                    black_box(client.event(e, far()).await.expect("allow"));
                }
            })
        })
    });
    g.bench_function("pipelined", |b| {
        b.iter(|| {
            rt.block_on(async {
                let deadline = far();
                let all = events.iter().map(|e| client.event(e, deadline));
                for r in futures_util::future::join_all(all).await {
                    black_box(r.expect("allow"));
                }
            })
        })
    });
    g.bench_function("batched", |b| {
        b.iter(|| {
            rt.block_on(async {
                for e in &events[1..] {
                    client.notify(e.clone());
                }
                // A blocking event goes out after the queued notifications and the harness
                // answers in order: when it is answered, every batch has been handled.
                black_box(client.event(&events[0], far()).await.expect("allow"));
            })
        })
    });

    // Baseline: the same harness fed pre-serialized requests through a bare pipe, one
    // writer thread and one reader; no client. What the harness alone can do.
    let frames: Vec<u8> = events
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": format!("r{i}"), "method": "ahp/event", "params": e})).expect("json");
            line.push(b'\n');
            line
        })
        .collect();
    let argv = harness_argv();
    let mut child = Command::new(&argv[0])
        .arg(&argv[1])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the echo harness");
    let mut to = child.stdin.take().expect("piped");
    let mut from = BufReader::new(child.stdout.take().expect("piped"));
    g.bench_function("raw_pipe_baseline", |b| {
        b.iter(|| {
            std::thread::scope(|s| {
                s.spawn(|| to.write_all(&frames).expect("write"));
                let mut line = String::new();
                for _ in 0..EVENTS {
                    line.clear();
                    from.read_line(&mut line).expect("read");
                }
            })
        })
    });
    g.finish();
    drop(to);
    let _ = child.wait();
    rt.block_on(client.close(Duration::from_secs(2)));
}

fn audit_record() -> AuditRecord {
    AuditRecord {
        ts: "2025-01-01T00:00:00.000Z".into(),
        session: "3f1c2a9e-0000-4000-8000-000000000000".into(),
        framework_session: Some("20f50f66-bd7f-4038-a77f-9c8412abef47".into()),
        agent: "claude-code-bench".into(),
        depth: 0,
        event_type: "pre_action".into(),
        payload: sample_event(0).payload,
        decision: "allow".into(),
        reason: None,
        source: "policy".into(),
        latency_us: 12,
        observed: None,
        peer: None,
        reversible: None,
    }
}

/// Where the durable benches write: the bench's own temp dir, on the same disk as the
/// project unless `AHP_BENCH_TMPDIR` says otherwise.
fn tmp_dir() -> tempfile::TempDir {
    match std::env::var_os("AHP_BENCH_TMPDIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("temp dir")
}

fn audit_benches(c: &mut Criterion) {
    let record = audit_record();
    let dir = tmp_dir();
    let mut g = c.benchmark_group("audit");
    g.throughput(Throughput::Elements(1));

    let mut log = AuditLog::without_file();
    g.bench_function("no_file", |b| {
        b.iter(|| log.append(black_box(&record)).expect("append"))
    });
    let mut log = AuditLog::open(&dir.path().join("plain.jsonl"), None).expect("open");
    g.bench_function("durable", |b| {
        b.iter(|| log.append(black_box(&record)).expect("append"))
    });
    let key = b"0123456789abcdef0123456789abcdef".to_vec();
    let mut log = AuditLog::open(&dir.path().join("keyed.jsonl"), Some(key)).expect("open");
    g.bench_function("durable_hmac", |b| {
        b.iter(|| log.append(black_box(&record)).expect("append"))
    });

    // Baseline: an append-only write and fdatasync of a line of the same size, nothing else.
    let line_len = std::fs::metadata(dir.path().join("plain.jsonl"))
        .map(|m| m.len())
        .unwrap_or(0)
        / std::fs::read(dir.path().join("plain.jsonl"))
            .map(|b| b.iter().filter(|&&c| c == b'\n').count().max(1) as u64)
            .unwrap_or(1);
    let line = vec![b'x'; line_len.max(1) as usize];
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("bare.jsonl"))
        .expect("open");
    g.bench_function("write_fdatasync_baseline", |b| {
        b.iter(|| {
            f.write_all(&line).expect("write");
            f.sync_data().expect("fdatasync");
        })
    });
    g.finish();
}

/// The parent's share of one hook call: map the payload, decide (embedded), audit (no
/// file), render. No process, no socket.
fn hook_benches(c: &mut Criterion) {
    let rt = runtime();
    let payload = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shims/claude-code/samples/PreToolUse.json"),
    )
    .expect("sample payload");
    let decider = Decider {
        harness: Harness::Embedded(Arc::new(Embedded::new(
            Policy::default_policy(),
            Mode::Enforce,
        ))),
        fail_mode: FailMode::Closed,
        timeout: Duration::from_secs(10),
        approver: None,
    };
    let gate = Gate::new(
        "3f1c2a9e-0000-4000-8000-000000000000".into(),
        "claude-code-bench".into(),
        0,
        decider,
        Auditor::default(),
    );
    let service = HookService::new(Arc::new(gate), false);
    let cwd = PathBuf::from("/tmp");
    let mut g = c.benchmark_group("hook");
    g.bench_function("parent_handle_embedded", |b| {
        b.iter_batched(
            || payload.clone(),
            |p| {
                rt.block_on(service.handle(Request {
                    kind: Kind::Hook,
                    scope: "claude-code".into(),
                    name: "PreToolUse".into(),
                    cwd: cwd.clone(),
                    payload: p,
                    peer: ahp_wrap::control::Peer {
                        pid: std::process::id() as i32,
                        descends_from_agent: true,
                        parent: None,
                    },
                }))
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// The shell commands of the policy corpus (`tests/policy-corpus/`), longest first.
fn corpus_commands() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/policy-corpus");
    let mut out: Vec<String> = ["adversarial.jsonl", "benign.jsonl"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(dir.join(f))
                .expect("the policy corpus")
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                // Commands that read code from disk are timed apart (`code_on_disk`).
                .filter(|v| !matches!(v["class"].as_str(), Some("code-on-disk" | "runs-files")))
                .filter_map(|v| v["cmd"].as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    out
}

/// The `pre_action` of a shell tool call running `cmd` in `cwd`.
fn bash_event(cmd: &str, cwd: &std::path::Path) -> Event {
    Event {
        event_type: EventType::PreAction,
        session_id: "s".into(),
        agent_id: "a".into(),
        timestamp: String::new(),
        depth: 0,
        payload: json!({
            "action_type": "tool_call",
            "tool_name": "Bash",
            "arguments": {"command": cmd},
            "context": {"working_directory": cwd},
        }),
        context: None,
        metadata: None,
    }
}

/// One policy decision for the longest command of the corpus: p50 and p99 of single calls
/// (the target is < 200 µs), then criterion's figure for it and for a typical command.
fn policy_benches(c: &mut Criterion) {
    // One session for every call, as a run's gate holds it.
    let (policy, session) = (
        Policy::default_policy().with_workspace("/tmp"),
        ahp_wrap::policy::Session::default(),
    );
    let evaluate = |event: &Event| policy.evaluate_in(&session, event, None);
    let commands = corpus_commands();
    let event = |cmd: &str| bash_event(cmd, std::path::Path::new("/tmp"));
    let longest = event(&commands[0]);
    let typical = event(&commands[commands.len() / 2]);
    const CALLS: usize = 20_000;
    let timed = |what: &str, event: &Event| {
        for _ in 0..1_000 {
            black_box(evaluate(event));
        }
        let mut times: Vec<Duration> = (0..CALLS)
            .map(|_| {
                let t = std::time::Instant::now();
                black_box(evaluate(black_box(event)));
                t.elapsed()
            })
            .collect();
        times.sort();
        eprintln!(
            "policy/{what}: p50 {:.1} µs, p99 {:.1} µs over {CALLS} calls",
            times[CALLS / 2].as_secs_f64() * 1e6,
            times[CALLS * 99 / 100].as_secs_f64() * 1e6,
        );
    };
    timed(
        &format!("longest_command ({} bytes)", commands[0].len()),
        &longest,
    );
    // The session's memory of what the agent wrote: the same command in a session that
    // wrote 1,000 files of 4 KiB (each decision then reads through that memory), and the
    // cost of remembering one more such write.
    let write = |session: &str, i: usize| Event {
        session_id: session.into(),
        payload: json!({
            "action_type": "tool_call",
            "tool_name": "Write",
            "arguments": {"file_path": format!("/tmp/ahp-bench-memory/f{i}.py"), "content": "x = 1\n".repeat(683)},
            "context": {"working_directory": "/tmp"},
        }),
        ..bash_event("", std::path::Path::new("/tmp"))
    };
    for i in 0..1_000 {
        evaluate(&write("busy", i));
    }
    timed(
        "longest_command, in a session that wrote 1,000 files",
        &Event {
            session_id: "busy".into(),
            ..longest.clone()
        },
    );
    timed("a 4 KiB Write remembered", &write("busy", 0));
    code_on_disk();
    let mut g = c.benchmark_group("policy");
    g.bench_function("longest_command", |b| {
        b.iter(|| evaluate(black_box(&longest)))
    });
    g.bench_function("typical_command", |b| {
        b.iter(|| evaluate(black_box(&typical)))
    });
    g.finish();
}

/// p50 and p99 of `calls` single calls of `f`, in µs.
fn percentiles(calls: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut times: Vec<Duration> = (0..calls)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    (
        times[calls / 2].as_secs_f64() * 1e6,
        times[calls * 99 / 100].as_secs_f64() * 1e6,
    )
}

/// Decisions that read code from disk, apart from the rest: the benign twins of the policy
/// corpus (`tests/policy-corpus/on-disk/good/`) in a temp workspace, read from the cache as
/// on every call after the first; and the bound, a 512 KiB script read and parsed afresh.
fn code_on_disk() {
    let policy = Policy::default_policy();
    let session = ahp_wrap::policy::Session::default();
    let evaluate = |event: &Event| policy.evaluate_in(&session, event, None);
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = std::fs::canonicalize(dir.path()).expect("canonical");
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        for e in std::fs::read_dir(from).expect("fixtures").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                copy(&e.path(), &to.join(&name));
            } else if let Some(name) = name.strip_suffix(".fixture") {
                std::fs::create_dir_all(to).unwrap();
                std::fs::copy(e.path(), to.join(name)).unwrap();
            }
        }
    }
    copy(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/policy-corpus/on-disk/good"),
        &ws,
    );
    let event = |cmd: &str| bash_event(cmd, &ws);
    for cmd in [
        "bash scripts/nested.sh",
        "python3 py/sys.py",
        "make",
        "npm install",
        "just",
        "pytest",
        "go generate ./...",
    ] {
        let e = event(cmd);
        let first = std::time::Instant::now();
        black_box(evaluate(&e));
        let first = first.elapsed().as_secs_f64() * 1e6;
        let (p50, p99) = percentiles(5_000, || {
            black_box(evaluate(black_box(&e)));
        });
        eprintln!(
            "policy/code_on_disk `{cmd}`: first {first:.1} µs, then p50 {p50:.1} µs, p99 {p99:.1} µs over 5000 calls"
        );
    }
    // The bounds: a shell script and a Python file of the largest size read, each call a
    // file not yet cached.
    const FILES: usize = 40;
    for (name, kib, line, run) in [
        (
            "sh",
            128,
            "echo building step && cargo build --release --quiet\n",
            "bash",
        ),
        (
            "py",
            512,
            "subprocess.run([\"cargo\", \"build\"], check=True)  # step\n",
            "python3",
        ),
    ] {
        let body = line.repeat(kib * 1024 / line.len());
        for i in 0..FILES {
            std::fs::write(ws.join(format!("big{i}.{name}")), &body).unwrap();
        }
        let mut i = 0;
        let (p50, p99) = percentiles(FILES, || {
            black_box(evaluate(&event(&format!("{run} big{i}.{name}"))));
            i += 1;
        });
        eprintln!(
            "policy/code_on_disk a {} KiB .{name} file, uncached: p50 {:.1} ms, p99 {:.1} ms over {FILES} files",
            body.len() / 1024,
            p50 / 1e3,
            p99 / 1e3
        );
    }
}

fn main() {
    if support::dispatch_role() || !support::benchmarking() {
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    client_benches(&mut c);
    audit_benches(&mut c);
    hook_benches(&mut c);
    policy_benches(&mut c);
    c.final_summary();
}
