//! Helpers shared by the benches: the roles a bench binary plays when it runs itself as a
//! child (a fast stdio harness, a hook driver), and percentile arithmetic.
//!
//! A bench binary is re-run with `__ahp_bench_harness` or `__ahp_bench_driver` among its args;
//! [`dispatch_role`] is the first thing its `main` calls.

#![allow(dead_code)] // each bench uses its own part

pub(crate) mod table;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// argv[1] that turns a bench binary into the echo harness.
pub(crate) const ROLE_HARNESS: &str = "__ahp_bench_harness";
/// argv[1] that turns a bench binary into the hook driver.
pub(crate) const ROLE_DRIVER: &str = "__ahp_bench_driver";

/// Plays a child role if argv asks for one; returns `true` when it did (main then exits).
/// The role may come after other arguments: `--framework claude-code` adds `--settings`.
pub(crate) fn dispatch_role() -> bool {
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            ROLE_HARNESS => echo_harness(),
            ROLE_DRIVER => hook_driver(),
            _ => continue,
        }
        return true;
    }
    false
}

/// Whether cargo ran us as a benchmark (`cargo bench` passes `--bench`). `cargo test
/// --all-targets` runs bench binaries too, without it: the benches are never part of the
/// test run, so they do nothing then.
pub(crate) fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

// ---------------------------------------------------------------------------------------
// The echo harness: the smallest correct AHP harness, so that it is never the bottleneck.

#[derive(serde::Deserialize)]
struct Msg<'a> {
    #[serde(borrow, default)]
    id: Option<&'a str>,
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(default)]
    params: Option<Params>,
}

#[derive(serde::Deserialize, Default)]
struct Params {
    #[serde(default)]
    events: Vec<serde::de::IgnoredAny>,
}

/// Newline-delimited JSON-RPC on stdin/stdout: a handshake that offers batching, `allow` for
/// every event, one `allow` per event of a batch. Answers are flushed when no more input is
/// already buffered, so pipelined requests are answered in bulk.
pub(crate) fn echo_harness() {
    let stdin = std::io::stdin();
    let mut input = BufReader::with_capacity(256 * 1024, stdin.lock());
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, stdout.lock());
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(msg) = serde_json::from_str::<Msg>(&line) else {
            continue;
        };
        if let Some(id) = msg.id {
            let id = serde_json::to_string(id).expect("a string serializes");
            let result = match msg.method {
                Some("ahp/handshake") => r#"{"protocol_version":"2.4","harness_info":{"name":"bench-echo","version":"1","capabilities":["pre_action","batch"]},"config":{"timeout_ms":10000,"batch_size":100,"max_depth":8}}"#.to_owned(),
                Some("ahp/batch") => {
                    let n = msg.params.map_or(0, |p| p.events.len());
                    let mut r = String::from(r#"{"decisions":["#);
                    for i in 0..n {
                        if i > 0 {
                            r.push(',');
                        }
                        r.push_str(r#"{"decision":"allow"}"#);
                    }
                    r.push_str("]}");
                    r
                }
                _ => r#"{"decision":"allow"}"#.to_owned(),
            };
            let _ = writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        }
        if input.buffer().is_empty() && out.flush().is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------
// The hook driver: runs as the wrapped "agent" and times hook calls.

/// What the driver measured, written as JSON to `$AHP_BENCH_OUT`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Default)]
pub(crate) struct DriverReport {
    /// Per program name (`true`, `python`, `hook`): each call's wall time in nanoseconds.
    pub samples: std::collections::BTreeMap<String, Vec<u64>>,
    /// The wrapper's (our parent's) peak and current RSS when the calls were done, in KiB.
    pub parent_hwm_kib: u64,
    pub parent_rss_kib: u64,
    /// What the hook printed on its first call (to check it allowed).
    pub hook_stdout: String,
    pub hook_status: i32,
    /// The same of the peer (`AHP_BENCH_PEER_BIN`), when it is timed.
    #[serde(default)]
    pub peer_stdout: String,
    #[serde(default)]
    pub peer_status: i32,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Spawns each program in turn (rotating the order every round), the payload on its stdin,
/// and times it from spawn to reaped. The same code path for the hook and the baselines.
pub(crate) fn hook_driver() {
    let calls: usize = env_or("AHP_BENCH_CALLS", "500").parse().expect("calls");
    let warmup: usize = env_or("AHP_BENCH_WARMUP", "20").parse().expect("warmup");
    let programs: Vec<String> = env_or("AHP_BENCH_PROGRAMS", "true,hook")
        .split(',')
        .map(str::to_owned)
        .collect();
    let payload = std::fs::read(std::env::var("AHP_BENCH_PAYLOAD").expect("AHP_BENCH_PAYLOAD"))
        .expect("payload");
    let out = std::env::var("AHP_BENCH_OUT").expect("AHP_BENCH_OUT");
    // What the frameworks register as the hook command: the small hook executable.
    let hook_bin = std::env::var("AHP_WRAP_HOOK_BIN").unwrap_or_default();
    let hook_name = env_or("AHP_BENCH_HOOK", "PreToolUse");
    let pyhook = env_or("AHP_BENCH_PYHOOK", "");
    let python = env_or("AHP_BENCH_PYTHON", "python3");
    let alt_bin = env_or("AHP_BENCH_ALT_BIN", &hook_bin);
    let hook = |bin: &str| {
        vec![
            bin.to_owned(),
            "hook".into(),
            "claude-code".into(),
            hook_name.clone(),
        ]
    };
    // `hook-alone`: the hook process without the relay (no socket to reach, so it renders
    // the fail-closed answer itself): what the hook process costs on its own.
    let argv = |name: &str| -> Vec<String> {
        match name {
            "true" => vec!["/bin/true".into()],
            "python" => vec![python.clone(), pyhook.clone()],
            "hook" => hook(&hook_bin),
            "hook-alt" => hook(&alt_bin),
            // The closest peer's hook entry point, for the same payload (its state in
            // MOAT_HOME, which the bench prepared).
            "peer" => vec![
                env_or("AHP_BENCH_PEER_BIN", "openmoat"),
                "guard".into(),
                "--host".into(),
                "claude-code".into(),
            ],
            "hook-alone" => [
                vec!["/usr/bin/env".into(), "-u".into(), "AHP_WRAP_SOCKET".into()],
                hook(&hook_bin),
            ]
            .concat(),
            "true-env" => vec![
                "/usr/bin/env".into(),
                "-u".into(),
                "AHP_WRAP_SOCKET".into(),
                "/bin/true".into(),
            ],
            // PATH shims (under `--framework path`): the real program by its path, and the
            // same call through its entry in the shim directory (what `cp` by name finds).
            "cp" => [vec![real_program("cp")], copy_args()].concat(),
            "cp-shim" => [vec![shim("cp")], copy_args()].concat(),
            "git" => vec![real_program("git"), "--version".into()],
            "git-shim" => vec![shim("git"), "--version".into()],
            // The shim without a wrapper to ask: its fail-closed refusal, no round trip and
            // no program run (the shim process's own cost, against `true-env`).
            "git-shim-alone" => vec![
                "/usr/bin/env".into(),
                "-u".into(),
                "AHP_WRAP_SOCKET".into(),
                shim("git"),
                "--version".into(),
            ],
            other => panic!("unknown program {other}"),
        }
    };
    let mut report = DriverReport::default();
    // Each round in an order of its own (a Fisher-Yates shuffle from a fixed seed): in a fixed
    // cycle each program always follows the same one, and a call right after the Python
    // baseline (a large process) was measured 0.4 ms slower than the same call elsewhere.
    let mut order: Vec<usize> = (0..programs.len()).collect();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..warmup + calls {
        for i in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(i, (seed % (i as u64 + 1)) as usize);
        }
        for &k in &order {
            let name = &programs[k];
            let (ns, stdout, status) = time_call(&argv(name), &payload);
            // A refused or failed command would time the refusal, not the command.
            if ["cp", "cp-shim", "git", "git-shim"].contains(&name.as_str()) {
                assert_eq!(status, 0, "{:?} failed (exit {status})", argv(name));
            }
            if name == "hook" && report.hook_stdout.is_empty() && round == 0 {
                report.hook_stdout = String::from_utf8_lossy(&stdout).into_owned();
                report.hook_status = status;
            }
            if name == "peer" && round == 0 {
                report.peer_stdout = String::from_utf8_lossy(&stdout).into_owned();
                report.peer_status = status;
            }
            if round >= warmup {
                report.samples.entry(name.clone()).or_default().push(ns);
            }
        }
    }
    let (hwm, rss) = proc_mem(nix_getppid());
    report.parent_hwm_kib = hwm;
    report.parent_rss_kib = rss;
    std::fs::write(out, serde_json::to_vec(&report).expect("serializes")).expect("write report");
}

/// The shim directory's entry for `name` (the driver runs under `--framework path`).
fn shim(name: &str) -> String {
    let dir = std::env::var("AHP_WRAP_PATHSHIM_DIR").expect("run under PATH shims");
    format!("{dir}/{name}")
}

/// The real `name` on `PATH`, past the shim directory.
fn real_program(name: &str) -> String {
    let shims = std::env::var_os("AHP_WRAP_PATHSHIM_DIR").unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|d| d.as_os_str() != shims)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no {name} on PATH"))
        .display()
        .to_string()
}

/// A copy of a small (1 KiB) file in the working directory (the driver's `cp` calls).
fn copy_args() -> Vec<String> {
    const SMALL: &str = "small.txt";
    if !Path::new(SMALL).exists() {
        std::fs::write(SMALL, "0123456789abcde\n".repeat(64)).expect("write the small file");
    }
    vec![SMALL.into(), "copy.txt".into()]
}

fn nix_getppid() -> u32 {
    std::os::unix::process::parent_id()
}

/// One call: spawn, feed the payload, read stdout to the end, reap. Nanoseconds, stdout,
/// and the exit code.
pub(crate) fn time_call(argv: &[String], payload: &[u8]) -> (u64, Vec<u8>, i32) {
    let start = Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {argv:?}: {e}"));
    // A program that does not read its stdin (true) may be gone already: not an error.
    let _ = child.stdin.take().expect("piped").write_all(payload);
    let mut stdout = Vec::new();
    let _ = child.stdout.take().expect("piped").read_to_end(&mut stdout);
    let status = child.wait().expect("wait");
    let ns = start.elapsed().as_nanos() as u64;
    (ns, stdout, status.code().unwrap_or(-1))
}

/// `(VmHWM, VmRSS)` of a process, in KiB (0 when unknown).
pub(crate) fn proc_mem(pid: u32) -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

// ---------------------------------------------------------------------------------------
// Statistics.

/// The `p`-th percentile (nearest rank) of `samples`; sorts them.
pub(crate) fn percentile(samples: &mut [u64], p: f64) -> u64 {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// The median of a few floats.
pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Quotes `s` for the `stdio:` harness spec (split like a POSIX shell).
pub(crate) fn shell_quote(s: &Path) -> String {
    format!("'{}'", s.display().to_string().replace('\'', r"'\''"))
}
