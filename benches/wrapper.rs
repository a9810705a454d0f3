//! Whole-process benchmarks: what the wrapper costs, each figure next to a baseline measured
//! in the same run, printed as one table (and, with `--write FILE`, written into the results
//! block of that file).
//!
//! Run through `bench/run.sh` (which runs the criterion benches first, so their figures join
//! the table); alone: `cargo bench --bench wrapper -- [--quick] [--write BENCHMARKS.md]`.
//! `--only pathshim` runs only the PATH-shim rows, written into their own block (what
//! `bench/run.sh --pathshim` does); `--only telemetry` the export on/off rows (what
//! `bench/run.sh --telemetry` does). Under `cargo test` it does nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench or test may stop at the first failure

mod support;

// The rows, by what they time: hook calls (and telemetry's cost on them), whole processes
// (PATH shims, start-up, pass-through), and the criterion figures folded in.
#[path = "wrapper/criterion.rs"]
mod criterion;
#[path = "wrapper/hooks.rs"]
mod hooks;
#[path = "wrapper/processes.rs"]
mod processes;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::table::{machine, render, write_block};
use support::{proc_mem, DriverReport};

/// The p50 row of a process started through `env` (`ours`) against `env /bin/true`, samples
/// in ns taken in the same run.
fn against_env_true(figure: &str, ours: &mut [u64], env: &mut [u64]) -> support::table::Row {
    use support::table::{ms, row};
    let (o, e) = (
        support::percentile(ours, 50.0),
        support::percentile(env, 50.0),
    );
    row(
        figure,
        ms(o as f64),
        format!("`env /bin/true` {}", ms(e as f64)),
        format!("+{}", ms(o as f64 - e as f64)),
    )
}

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
        processes::pathshim_rows(&mut rows, calls, scratch.path());
        (PATHSHIM_BEGIN, PATHSHIM_END)
    } else if o.only.as_deref() == Some("telemetry") {
        eprintln!("hook latency with telemetry on and off: {calls} calls per run…");
        hooks::telemetry_rows(
            &mut rows,
            calls,
            scratch.path(),
            if o.quick { 2 } else { 5 },
        );
        (TELEMETRY_BEGIN, TELEMETRY_END)
    } else {
        eprintln!("hook latency: {calls} calls per program, interleaved…");
        hooks::hook_rows(&mut rows, calls, scratch.path(), o.compare.as_deref());
        eprintln!("PATH shim exec latency…");
        processes::pathshim_rows(&mut rows, calls, scratch.path());
        eprintln!("start-up…");
        processes::startup_rows(&mut rows, if o.quick { 50 } else { 200 }, scratch.path());
        eprintln!("pass-through…");
        processes::passthrough_rows(&mut rows, if o.quick { 3 } else { 7 });
        criterion::criterion_rows(&mut rows);
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
