//! HCP fleet figures, on a private RabbitMQ broker this bench starts (Debian's
//! `rabbitmq-server`, as tests/rabbitmq/setup.sh installs it), with a trivial agent (`true`):
//!
//! - latency per task: one task at a time from publish to result (p50, p95), against the
//!   same supervised run started directly (`ahp-wrap --audit-log … -- true`, since the
//!   worker's runs keep a durable audit log too): the overhead is what the broker round
//!   trip, the L3 gate, the event stream and the ack add;
//! - throughput: tasks per second through the broker, K tasks published at once, with one
//!   worker and with two, against direct runs one after another.
//!
//! Run through `bench/run.sh` (with `--write`, the table goes into BENCHMARKS.md); alone:
//! `cargo bench --bench fleet [-- --quick]`. Under `cargo test` it does nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench or test may stop at the first failure

use ahp_wrap_testkit::rabbitmq;
mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ahp_wrap::fleet::capability::{DataClass, Risk};
use ahp_wrap::fleet::message::Task;
use futures_util::StreamExt;
use lapin::options::ConfirmSelectOptions;
use support::percentile;
use support::table::{machine, ms, per_sec, row, write_block, Row};

const AHP_WRAP: &str = env!("CARGO_BIN_EXE_ahp-wrap");
const BEGIN: &str = "<!-- bench:fleet:begin -->";
const END: &str = "<!-- bench:fleet:end -->";
const CAPABILITY: &str = "name = \"bench\"\ndescription = \"true\"\nrisk_ceiling = \"R1\"\n";

fn main() {
    if !support::benchmarking() {
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let write = args
        .iter()
        .position(|a| a == "--write")
        .and_then(|i| args.get(i + 1).cloned());
    if !std::path::Path::new(rabbitmq::SERVER).exists() {
        eprintln!(
            "fleet bench skipped: {} is missing (tests/rabbitmq/setup.sh installs it)",
            rabbitmq::SERVER
        );
        return;
    }
    eprintln!("fleet: starting a private broker…");
    let broker = rabbitmq::Broker::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let cap = dir.path().join("bench.toml");
    std::fs::write(&cap, CAPABILITY).unwrap();
    let (seq, tasks) = if quick { (50, 100) } else { (200, 500) };
    let mut rows = Vec::new();

    let mut workers = vec![worker(&broker, &cap, dir.path(), 0)];
    eprintln!("fleet: {seq} tasks one at a time, and as many direct runs, interleaved…");
    rows.extend(latency_rows(&broker, seq));
    eprintln!("fleet: {tasks} tasks at once, one worker…");
    let one = throughput(&broker, tasks);
    workers.push(worker(&broker, &cap, dir.path(), 1));
    eprintln!("fleet: {tasks} tasks at once, two workers…");
    let two = throughput(&broker, tasks);
    let direct = direct_rate(if quick { 50 } else { 200 });
    for (name, rate) in [("1 worker", one), ("2 workers", two)] {
        rows.push(row(
            &format!("HCP tasks/s through the broker, {name} (`true`)"),
            per_sec(rate),
            format!("{} direct runs", per_sec(direct)),
            format!("{:.0} %", 100.0 * rate / direct),
        ));
    }
    for w in &mut workers {
        // SIGTERM: the worker removes its temporary directory.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(w.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = w.wait();
    }
    drop(broker);
    let mut table = String::from(
        "| Figure | ahp-wrap worker | Baseline (same run) | Overhead | Target | Meets |\n|---|---|---|---|---|---|\n",
    );
    table.push_str(
        &support::table::render(&rows)
            .lines()
            .skip(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    );
    let machine = machine(env!("CARGO_MANIFEST_DIR"));
    println!("\n{machine}\n\n{table}");
    if let Some(path) = write {
        write_block(
            std::path::Path::new(&path),
            BEGIN,
            END,
            &format!("{machine}\n\n{table}"),
        );
    }
}

/// Starts `ahp-wrap worker … -- true` and waits until it consumes.
fn worker(
    broker: &rabbitmq::Broker,
    cap: &std::path::Path,
    dir: &std::path::Path,
    n: usize,
) -> Child {
    let log = dir.join(format!("worker-{n}.log"));
    let child = Command::new(AHP_WRAP)
        .args(["worker", "--amqp", &broker.url(), "--capability"])
        .arg(cap)
        .args(["--", "true"])
        .env("AHP_WRAP_LOG", "warn")
        .env("TMPDIR", dir)
        .env("XDG_STATE_HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start a worker");
    let start = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("consuming")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// `ahp-wrap --audit-log LOG -- true` run directly, as the worker runs it (its runs keep
/// a durable audit log too: the records it streams as events).
fn direct() -> Duration {
    static LOG: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let log = LOG
        .get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .join("direct.jsonl");
    let t = Instant::now();
    let ok = Command::new(AHP_WRAP)
        .env("XDG_STATE_HOME", LOG.get().unwrap().path())
        .args(["--summary", "never", "--audit-log"])
        .arg(&log)
        .args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    t.elapsed()
}

fn direct_rate(n: usize) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        direct();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn latency_rows(broker: &rabbitmq::Broker, n: usize) -> Vec<Row> {
    let mut hcp = Vec::with_capacity(n);
    let mut local = Vec::with_capacity(n);
    rabbitmq::block_on(async {
        let client = Client::new(broker).await;
        for _ in 0..n {
            let t = Instant::now();
            client.run(1).await;
            hcp.push(t.elapsed().as_nanos() as u64);
            local.push(direct().as_nanos() as u64);
        }
    });
    let mut out = Vec::new();
    for (name, p) in [("p50", 50.0), ("p95", 95.0)] {
        let a = percentile(&mut hcp, p) as f64;
        let b = percentile(&mut local, p) as f64;
        out.push(row(
            &format!("HCP task latency, publish to result, {name} (`true`)"),
            ms(a),
            format!("{} direct `ahp-wrap --audit-log … -- true`", ms(b)),
            format!("+{}", ms(a - b)),
        ));
    }
    out
}

fn throughput(broker: &rabbitmq::Broker, n: usize) -> f64 {
    rabbitmq::block_on(async {
        let client = Client::new(broker).await;
        let t = Instant::now();
        client.run(n).await;
        n as f64 / t.elapsed().as_secs_f64()
    })
}

/// A caller on one connection: publishes tasks, waits for their results.
struct Client {
    _conn: lapin::Connection,
    ch: lapin::Channel,
    reply: String,
    replies: tokio::sync::Mutex<lapin::Consumer>,
}

impl Client {
    async fn new(broker: &rabbitmq::Broker) -> Client {
        let conn = lapin::Connection::connect(&broker.url(), Default::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let (reply, replies) = ahp_wrap::fleet::amqp::private_queue(&ch, "reply queue", None, "r")
            .await
            .unwrap();
        Client {
            reply,
            _conn: conn,
            ch,
            replies: tokio::sync::Mutex::new(replies),
        }
    }

    /// Publishes `n` tasks at once and waits for every result.
    async fn run(&self, n: usize) {
        let mut pending = HashMap::new();
        for _ in 0..n {
            let task = Task::new("bench", "go", Risk::R1, DataClass::T1);
            let props = ahp_wrap::fleet::amqp::json_props(&task.task_id, true)
                .with_reply_to(self.reply.as_str().into());
            let body = serde_json::to_vec(&task).unwrap();
            ahp_wrap::fleet::amqp::publish(&self.ch, "hcp.tasks", "bench", &body, props, true)
                .await
                .unwrap();
            pending.insert(task.task_id, ());
        }
        let mut replies = self.replies.lock().await;
        while !pending.is_empty() {
            let d = replies.next().await.expect("replies").expect("a reply");
            let v: serde_json::Value = serde_json::from_slice(&d.data).unwrap();
            if v["type"] == "result" {
                assert_eq!(v["status"], "complete", "{v}");
                pending.remove(v["task_id"].as_str().unwrap());
            }
        }
    }
}
