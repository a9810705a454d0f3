//! Whole-process benchmarks: what the wrapper costs, each figure next to a baseline measured
//! in the same run, printed as one table (and, with `--write FILE`, written into the results
//! block of that file).
//!
//! Run through `bench/run.sh` (which runs the criterion benches first, so their figures join
//! the table); alone: `cargo bench --bench wrapper -- [--quick] [--write BENCHMARKS.md]`.
//! `--only pathshim` runs only the PATH-shim rows, written into their own block (what
//! `bench/run.sh --pathshim` does); `--only telemetry` the export on/off rows (what
//! `bench/run.sh --telemetry` does). Under `cargo test` it does nothing.

mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use support::table::{machine, ms, per_sec, render, row, us, write_block, Row};
use support::{median, percentile, proc_mem, DriverReport};

/// The wrapper under test: as install.sh lays it out (`AHP_BENCH_WRAP`, set by bench/run.sh:
/// beside a statically linked hook), else cargo's build.
fn ahp_wrap() -> &'static str {
    static WRAP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    WRAP.get_or_init(|| {
        std::env::var("AHP_BENCH_WRAP").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ahp-wrap").into())
    })
}
const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const BEGIN: &str = "<!-- bench:results:begin -->";
const END: &str = "<!-- bench:results:end -->";
/// The block `--only pathshim` writes.
const PATHSHIM_BEGIN: &str = "<!-- bench:pathshim:begin -->";
const PATHSHIM_END: &str = "<!-- bench:pathshim:end -->";
/// The block `--only telemetry` writes.
const TELEMETRY_BEGIN: &str = "<!-- bench:telemetry:begin -->";
const TELEMETRY_END: &str = "<!-- bench:telemetry:end -->";

struct Opts {
    quick: bool,
    write: Option<PathBuf>,
    /// Another `ahp-wrap` build whose hook process is timed in the same run (before/after).
    compare: Option<PathBuf>,
    /// Only these rows: `pathshim`, `telemetry` (`--only NAME`).
    only: Option<String>,
}

fn opts() -> Opts {
    let mut args = std::env::args().skip(1);
    let mut o = Opts {
        quick: false,
        write: None,
        compare: None,
        only: None,
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--write" => o.write = args.next().map(PathBuf::from),
            "--compare" => o.compare = args.next().map(PathBuf::from),
            "--only" => o.only = args.next(),
            _ => {}
        }
    }
    o
}

fn main() {
    if support::dispatch_role() || !support::benchmarking() {
        return;
    }
    let o = opts();
    let calls = if o.quick { 100 } else { 500 };
    let mut rows = Vec::new();
    let scratch = tempfile::tempdir().expect("temp dir");

    let (begin, end) = if o.only.as_deref() == Some("pathshim") {
        eprintln!("PATH shim exec latency: {calls} calls per program, interleaved…");
        pathshim_rows(&mut rows, calls, scratch.path());
        (PATHSHIM_BEGIN, PATHSHIM_END)
    } else if o.only.as_deref() == Some("telemetry") {
        eprintln!("hook latency with telemetry on and off: {calls} calls per run…");
        telemetry_rows(
            &mut rows,
            calls,
            scratch.path(),
            if o.quick { 2 } else { 5 },
        );
        (TELEMETRY_BEGIN, TELEMETRY_END)
    } else {
        eprintln!("hook latency: {calls} calls per program, interleaved…");
        hook_rows(&mut rows, calls, scratch.path(), o.compare.as_deref());
        eprintln!("PATH shim exec latency…");
        pathshim_rows(&mut rows, calls, scratch.path());
        eprintln!("start-up…");
        startup_rows(&mut rows, if o.quick { 50 } else { 200 });
        eprintln!("pass-through…");
        passthrough_rows(&mut rows, if o.quick { 3 } else { 7 });
        criterion_rows(&mut rows);
        (BEGIN, END)
    };

    let table = render(&rows);
    let machine = machine(MANIFEST_DIR);
    println!("\n{machine}\n\n{table}");
    if let Some(path) = o.write {
        write_block(&path, begin, end, &format!("{machine}\n\n{table}"));
    }
}

/// Runs the driver under `ahp-wrap --framework <framework> <extra> -- <driver>`, in `dir`;
/// returns its report.
fn drive(
    framework: &str,
    extra: &[String],
    programs: &str,
    calls: usize,
    dir: &Path,
    alt: Option<&Path>,
) -> DriverReport {
    let me = std::env::current_exe().expect("current exe");
    let out = dir.join("driver.json");
    let _ = std::fs::remove_file(&out);
    let mut cmd = Command::new(ahp_wrap());
    if let Some(alt) = alt {
        cmd.env("AHP_BENCH_ALT_BIN", alt);
    }
    if let Some((bin, home)) = peer_home(dir) {
        cmd.env("AHP_BENCH_PEER_BIN", bin)
            .env("MOAT_HOME", home.join(".moat"))
            .env("CLAUDE_CONFIG_DIR", home.join(".claude"));
    }
    let status = cmd
        .args(["--framework", framework, "--summary", "never"])
        .args(extra)
        .arg("--")
        .arg(&me)
        .arg(support::ROLE_DRIVER)
        .env("AHP_BENCH_CALLS", calls.to_string())
        .env("AHP_BENCH_PROGRAMS", programs)
        .env(
            "AHP_BENCH_PAYLOAD",
            Path::new(MANIFEST_DIR).join("shims/claude-code/samples/PreToolUse.json"),
        )
        .env(
            "AHP_BENCH_PYHOOK",
            Path::new(MANIFEST_DIR).join("bench/minimal_hook.py"),
        )
        .env("AHP_BENCH_PYTHON", python_exe())
        .env("AHP_BENCH_OUT", &out)
        .current_dir(dir)
        .stdin(Stdio::null())
        .status()
        .expect("run ahp-wrap");
    assert!(status.success(), "the hook driver failed: {status}");
    let report: DriverReport =
        serde_json::from_slice(&std::fs::read(&out).expect("driver report")).expect("report");
    assert_eq!(
        report.hook_status, 0,
        "the hook did not allow: {}",
        report.hook_stdout
    );
    assert!(
        !report.hook_stdout.contains("deny"),
        "the hook did not allow: {}",
        report.hook_stdout
    );
    report
}

fn hook_rows(rows: &mut Vec<Row>, calls: usize, dir: &Path, compare: Option<&Path>) {
    let me = std::env::current_exe().expect("current exe");
    let harness = format!(
        "stdio:{} {}",
        support::shell_quote(&me),
        support::ROLE_HARNESS
    );
    let audit = dir.join("audit.jsonl");
    let peer = peer_home(dir);
    let mut first = "true,python,hook,hook-alone,true-env".to_owned();
    if compare.is_some() {
        first.push_str(",hook-alt");
    }
    if peer.is_some() {
        first.push_str(",peer");
    }
    let first = first.as_str();
    let runs: [(&str, Vec<String>, &str); 3] = [
        ("embedded policy", vec![], first),
        (
            "local stdio harness",
            vec!["--harness".into(), harness],
            "true,hook",
        ),
        (
            "embedded policy + durable audit log",
            vec!["--audit-log".into(), audit.display().to_string()],
            "true,hook",
        ),
    ];
    let mut python = None;
    for (i, (name, extra, programs)) in runs.into_iter().enumerate() {
        let mut r = drive("claude-code", &extra, programs, calls, dir, compare);
        let mut peer_rows = Vec::new();
        if let (Some(mut p), Some((bin, _))) = (r.samples.remove("peer"), &peer) {
            let mut t = r.samples["true"].clone();
            let mut h = r.samples["hook"].clone();
            let (p50, p99) = (percentile(&mut p, 50.0), percentile(&mut p, 99.0));
            let (t50, h50) = (percentile(&mut t, 50.0), percentile(&mut h, 50.0));
            let (peer_added, ours_added) = (p50 as f64 - t50 as f64, h50 as f64 - t50 as f64);
            let verdict = match r.peer_status {
                0 => "allowed".to_owned(),
                code => format!("exit {code}: {}", r.peer_stdout.trim()),
            };
            peer_rows.push(row(
                &format!(
                    "Peer: OpenMoat {PEER_VERSION} `guard --host claude-code` (its own state and \
                     audit log), the same payload ({verdict}), p50 / p99"
                ),
                format!("{} / {}", ms(p50 as f64), ms(p99 as f64)),
                format!("`/bin/true` {}", ms(t50 as f64)),
                format!("+{}", ms(peer_added)),
            ));
            peer_rows.push(
                row(
                    &format!(
                        "ahp-wrap's hook call against the peer's, added p50 over `/bin/true` \
                         ({})",
                        bin.display()
                    ),
                    format!("{:.0}× cheaper", peer_added / ours_added.max(1.0)),
                    format!("peer +{}", ms(peer_added)),
                    format!("ours +{}", ms(ours_added)),
                )
                .target("≥ 20×", peer_added >= 20.0 * ours_added),
            );
        }
        let mut t = r.samples.remove("true").expect("true samples");
        let mut h = r.samples.remove("hook").expect("hook samples");
        if let Some(mut p) = r.samples.remove("python") {
            python = Some((percentile(&mut p, 50.0), percentile(&mut p, 99.0)));
        }
        let (t50, t99) = (percentile(&mut t, 50.0), percentile(&mut t, 99.0));
        let (h50, h99) = (percentile(&mut h, 50.0), percentile(&mut h, 99.0));
        let add50 = h50 as f64 - t50 as f64;
        let add99 = h99 as f64 - t99 as f64;
        let with_target = i < 2;
        let mut r50 = row(
            &format!("Hook call p50, {name}"),
            ms(h50 as f64),
            format!("`/bin/true` {}", ms(t50 as f64)),
            format!("+{}", ms(add50)),
        );
        let mut r99 = row(
            &format!("Hook call p99, {name}"),
            ms(h99 as f64),
            format!("`/bin/true` {}", ms(t99 as f64)),
            format!("+{}", ms(add99)),
        );
        if with_target {
            r50 = r50.target("< +1 ms", add50 < 1e6);
            r99 = r99.target("< +5 ms", add99 < 5e6);
        }
        rows.push(r50);
        rows.push(r99);
        if let (Some(mut a), Some(mut e)) =
            (r.samples.remove("hook-alone"), r.samples.remove("true-env"))
        {
            let (a50, e50) = (percentile(&mut a, 50.0), percentile(&mut e, 50.0));
            rows.push(row(
                "Hook process alone p50 (no relay: its fail-closed path), via `env`",
                ms(a50 as f64),
                format!("`env /bin/true` {}", ms(e50 as f64)),
                format!("+{}", ms(a50 as f64 - e50 as f64)),
            ));
        }
        if let Some(mut alt) = r.samples.remove("hook-alt") {
            let (a50, a99) = (percentile(&mut alt, 50.0), percentile(&mut alt, 99.0));
            rows.push(row(
                &format!(
                    "Hook call p50 / p99 through `--compare` {}",
                    compare.map(|p| p.display().to_string()).unwrap_or_default()
                ),
                format!("{} / {}", ms(a50 as f64), ms(a99 as f64)),
                format!("`/bin/true` {}", ms(t50 as f64)),
                format!("+{}", ms(a50 as f64 - t50 as f64)),
            ));
        }
        rows.append(&mut peer_rows);
        if i == 0 {
            if let Some((p50, p99)) = python {
                rows.push(row(
                    "Baseline: minimal Python hook p50 / p99",
                    "—".into(),
                    format!("{} / {}", ms(p50 as f64), ms(p99 as f64)),
                    "—".into(),
                ));
            }
        }
        if i < 2 {
            let (cat_hwm, _) = cat_rss();
            rows.push(
                row(
                    &format!("Parent peak RSS after {calls} hook calls, {name}"),
                    format!("{:.1} MiB", r.parent_hwm_kib as f64 / 1024.0),
                    format!("`cat` {:.1} MiB", cat_hwm as f64 / 1024.0),
                    format!(
                        "+{:.1} MiB",
                        (r.parent_hwm_kib as f64 - cat_hwm as f64) / 1024.0
                    ),
                )
                .target("< 10 MiB", r.parent_hwm_kib < 10 * 1024),
            );
        }
    }
}

/// The peer the hook is timed against (issue 23): `bench/run.sh` installs it into the target
/// directory and names it in `AHP_BENCH_PEER`.
const PEER_VERSION: &str = "0.12.1";

/// The peer's binary and its home in `dir` (set up once with `openmoat init --yes`: its
/// default policy, its audit log, Claude Code's hook entry in a settings file of the bench's),
/// when `AHP_BENCH_PEER` names it.
fn peer_home(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let bin = PathBuf::from(std::env::var_os("AHP_BENCH_PEER")?);
    let home = dir.join("peer-home");
    if !home.join(".moat").exists() {
        std::fs::create_dir_all(home.join(".claude")).expect("peer home");
        let out = Command::new(&bin)
            .args(["init", "--yes", "--hosts", "claude-code"])
            .current_dir(&home)
            .env("HOME", &home)
            .env("MOAT_HOME", home.join(".moat"))
            .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
            .stdin(Stdio::null())
            .output()
            .expect("run the peer's init");
        assert!(
            out.status.success(),
            "{} init: {}{}",
            bin.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Some((bin, home))
}

/// Telemetry's cost on the hook path: runs of the hook driver (embedded policy) with no
/// export, with spans exported to a collector that answers (a local OTLP/HTTP sink in this
/// process), and with one that is down, alternated `rounds` times so that load swings hit
/// each alike. Each run's figure is the hook's p50 over `/bin/true`'s, interleaved call by
/// call within it; the row gives the median of the runs.
fn telemetry_rows(rows: &mut Vec<Row>, calls: usize, dir: &Path, rounds: usize) {
    let (sink, received) = otlp_sink();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let down = format!("http://{}", closed.local_addr().expect("an address"));
    drop(closed);
    let variants: [(&str, Vec<String>); 3] = [
        ("no export", vec![]),
        ("spans to a live collector", vec!["--otlp".into(), sink]),
        (
            "spans to a collector that is down",
            vec!["--otlp".into(), down],
        ),
    ];
    let mut added: [Vec<f64>; 3] = Default::default();
    let mut added99: [Vec<f64>; 3] = Default::default();
    for _ in 0..rounds {
        for (i, (_, extra)) in variants.iter().enumerate() {
            let mut r = drive("claude-code", extra, "true,hook", calls, dir, None);
            let mut t = r.samples.remove("true").expect("true samples");
            let mut h = r.samples.remove("hook").expect("hook samples");
            added[i].push(percentile(&mut h, 50.0) as f64 - percentile(&mut t, 50.0) as f64);
            added99[i].push(percentile(&mut h, 99.0) as f64 - percentile(&mut t, 99.0) as f64);
        }
    }
    let spans = received.load(std::sync::atomic::Ordering::Relaxed);
    assert!(spans > 0, "the collector received no export request");
    let off = median(&mut added[0].clone());
    let off99 = median(&mut added99[0].clone());
    for (i, (name, _)) in variants.iter().enumerate() {
        let (p50, p99) = (median(&mut added[i]), median(&mut added99[i]));
        let mut r = row(
            &format!(
                "Hook call added p50 / p99, embedded policy, {name} (median of {rounds} runs)"
            ),
            format!("+{} / +{}", us(p50), us(p99)),
            format!("no export +{} / +{}", us(off), us(off99)),
            format!("{:+.0} µs", (p50 - off) / 1e3),
        );
        if i > 0 {
            r = r.target("≤ +50 µs p50", p50 - off <= 50e3);
        }
        rows.push(r);
    }
    rows.push(row(
        "Export requests the live collector received",
        spans.to_string(),
        "—".into(),
        "—".into(),
    ));
}

/// An OTLP/HTTP sink on a thread of this process: answers 200 to every POST, counting them.
fn otlp_sink() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let received = std::sync::Arc::new(AtomicU64::new(0));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.set_nonblocking(true).expect("non-blocking");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let count = received.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            let app = axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move |_body: axum::body::Bytes| {
                    count.fetch_add(1, Ordering::Relaxed);
                    async { "" }
                }),
            );
            let _ = axum::serve(listener, app).await;
        });
    });
    (url, received)
}

/// PATH shims: a command run through its shim under `--framework path` (the hook process,
/// an `exec` request, the embedded policy's decision, then the real program), against the
/// same program run directly, interleaved call by call.
fn pathshim_rows(rows: &mut Vec<Row>, calls: usize, dir: &Path) {
    let programs = "cp,cp-shim,git,git-shim,git-shim-alone,true-env";
    let r = drive("path", &[], programs, calls, dir, None);
    let mut samples = r.samples;
    for (name, what) in [("cp", "`cp` of a 1 KiB file"), ("git", "`git --version`")] {
        let mut bare = samples.remove(name).expect("bare samples");
        let mut shim = samples
            .remove(&format!("{name}-shim"))
            .expect("shim samples");
        for p in [50.0, 95.0] {
            let (s, b) = (percentile(&mut shim, p), percentile(&mut bare, p));
            let add = s as f64 - b as f64;
            let mut r = row(
                &format!("PATH shim exec p{p}, embedded policy: {what}"),
                ms(s as f64),
                format!("bare {what} {}", ms(b as f64)),
                format!("+{}", ms(add)),
            );
            if p == 50.0 {
                r = r.target("< +1 ms", add < 1e6);
            }
            rows.push(r);
        }
    }
    let mut alone = samples
        .remove("git-shim-alone")
        .expect("shim-alone samples");
    let mut env = samples.remove("true-env").expect("true-env samples");
    let (a50, e50) = (percentile(&mut alone, 50.0), percentile(&mut env, 50.0));
    rows.push(row(
        "PATH shim process alone p50 (no wrapper to ask: its refusal), via `env`",
        ms(a50 as f64),
        format!("`env /bin/true` {}", ms(e50 as f64)),
        format!("+{}", ms(a50 as f64 - e50 as f64)),
    ));
}

/// The Python interpreter itself, not a launcher in front of it (a pyenv shim is a shell
/// script that would add a hundred milliseconds to the baseline).
fn python_exe() -> String {
    Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Peak RSS of an idle `cat`: the floor of any process, for scale.
fn cat_rss() -> (u64, u64) {
    let mut cat = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("cat");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let m = proc_mem(cat.id());
    drop(cat.stdin.take());
    let _ = cat.wait();
    m
}

fn run_quiet(argv: &[&str]) -> u64 {
    let start = Instant::now();
    let status = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success(), "{argv:?}: {status}");
    start.elapsed().as_nanos() as u64
}

fn startup_rows(rows: &mut Vec<Row>, n: usize) {
    let mut bare = Vec::new();
    let mut wrapped = Vec::new();
    for i in 0..n + 10 {
        let a = || run_quiet(&["true"]);
        let b = || run_quiet(&[ahp_wrap(), "--", "true"]);
        let (x, y) = if i % 2 == 0 {
            (a(), b())
        } else {
            let y = b();
            (a(), y)
        };
        if i >= 10 {
            bare.push(x);
            wrapped.push(y);
        }
    }
    for p in [50.0, 99.0] {
        let (w, t) = (percentile(&mut wrapped, p), percentile(&mut bare, p));
        let add = w as f64 - t as f64;
        let mut r = row(
            &format!("Start-up `ahp-wrap -- true`, p{p}"),
            ms(w as f64),
            format!("`true` {}", ms(t as f64)),
            format!("+{}", ms(add)),
        );
        if p == 50.0 {
            r = r.target("< +5 ms", add < 5e6);
        }
        rows.push(r);
    }
}

/// MB/s of `SIZE` bytes written into `argv`'s stdin and read back from its stdout.
fn pipe_rate(argv: &[&str]) -> f64 {
    const SIZE: usize = 256 << 20;
    let chunk = vec![b'a'; 64 << 10];
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    let start = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut left = SIZE;
        while left > 0 {
            let n = left.min(chunk.len());
            stdin.write_all(&chunk[..n]).expect("write");
            left -= n;
        }
    });
    // Timed from the first byte out to the last: the stream's rate, not the start-up and
    // shutdown around it (measured on their own).
    let mut buf = vec![0u8; 256 << 10];
    let (mut got, mut first, mut last) = (0, None, start);
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if first.is_none() {
                    first = Some((Instant::now(), n));
                }
                got += n;
                last = Instant::now();
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    writer.join().expect("writer");
    assert!(child.wait().expect("wait").success());
    assert_eq!(got, SIZE);
    let (t0, n0) = first.expect("some output");
    (SIZE - n0) as f64 / (last - t0).as_secs_f64() / 1e6
}

fn passthrough_rows(rows: &mut Vec<Row>, n: usize) {
    let mut bare = Vec::new();
    let mut wrapped = Vec::new();
    for _ in 0..n {
        bare.push(pipe_rate(&["cat"]));
        wrapped.push(pipe_rate(&[ahp_wrap(), "--", "cat"]));
    }
    let (w, b) = (median(&mut wrapped), median(&mut bare));
    rows.push(
        row(
            "Pass-through `ahp-wrap -- cat` (256 MiB, first to last byte, median)",
            format!("{w:.0} MB/s"),
            format!("`cat` {b:.0} MB/s"),
            format!("{:.0} %", 100.0 * w / b),
        )
        .target("≥ 90 %", w >= 0.9 * b),
    );
}

/// Where criterion keeps its results.
fn criterion_home() -> PathBuf {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return h.into();
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(MANIFEST_DIR).join("target"))
        .join("criterion")
}

/// Median time of one iteration of a criterion bench, in ns.
fn criterion_ns(id: &str) -> Option<f64> {
    let path = criterion_home().join(id).join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn criterion_rows(rows: &mut Vec<Row>) {
    const EVENTS: f64 = 1000.0;
    let Some(raw) = criterion_ns("client/raw_pipe_baseline") else {
        eprintln!(
            "no criterion results under {} (run bench/run.sh, or cargo bench --bench inproc first)",
            criterion_home().display()
        );
        return;
    };
    let raw_rate = EVENTS / (raw / 1e9);
    for (id, name, target) in [
        ("client/one_at_a_time", "one at a time", false),
        ("client/pipelined", "pipelined", true),
        ("client/batched", "batched notifications", true),
    ] {
        let Some(ns) = criterion_ns(id) else { continue };
        let rate = EVENTS / (ns / 1e9);
        let mut r = row(
            &format!("Client → local stdio harness, {name}"),
            per_sec(rate),
            format!("bare pipe to the same harness {}", per_sec(raw_rate)),
            format!("{:.0} % of the pipe", 100.0 * rate / raw_rate),
        );
        if target {
            r = r.target("≥ 50,000 /s", rate >= 50_000.0);
        }
        rows.push(r);
    }
    let bare = criterion_ns("audit/write_fdatasync_baseline");
    for (id, name) in [
        ("audit/durable", "durable (fdatasync), SHA-256 chain"),
        ("audit/durable_hmac", "durable (fdatasync), HMAC chain"),
        ("audit/no_file", "no file (the run summary only)"),
    ] {
        let Some(ns) = criterion_ns(id) else { continue };
        let (baseline, overhead) = match bare {
            Some(b) if id != "audit/no_file" => (
                format!("bare `write`+`fdatasync` {}", us(b)),
                format!("+{}", us(ns - b)),
            ),
            _ => ("—".into(), "—".into()),
        };
        rows.push(row(
            &format!("Audit, per record, {name}"),
            us(ns),
            baseline,
            overhead,
        ));
    }
    if let Some(ns) = criterion_ns("hook/parent_handle_embedded") {
        rows.push(row(
            "Hook, parent's in-process share (map + embedded decide + render)",
            us(ns),
            "—".into(),
            "—".into(),
        ));
    }
}
