//! The whole-process rows: a command through its PATH shim, the wrapper's start-up, and
//! the pass-through of the agent's stdio.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::support::table::{ms, row, Row};
use super::support::{median, percentile};
use super::{against_env_true, ahp_wrap, drive};

/// PATH shims: a command run through its shim under `--framework path` (the hook process,
/// an `exec` request, the embedded policy's decision, then the real program), against the
/// same program run directly, interleaved call by call.
pub(super) fn pathshim_rows(rows: &mut Vec<Row>, calls: usize, dir: &Path) {
    let programs = "cp,cp-shim,git,git-shim,git-shim-alone,true-env";
    let r = drive("path", &[], programs, calls, dir, None);
    let mut samples = r.samples;
    for (name, what) in [("cp", "`cp` of a 1 KiB file"), ("git", "`git --version`")] {
        let mut bare = samples.remove(name).expect("bare samples");
        let mut shim = samples
            .remove(&format!("{name}-shim"))
            .expect("shim samples");
        let figure = |p| format!("PATH shim exec p{p}, embedded policy: {what}");
        let (base, target) = (format!("bare {what}"), ("< +1 ms", 1e6));
        added_rows(
            rows,
            figure,
            &base,
            (&mut shim[..], &mut bare[..]),
            [50.0, 95.0],
            target,
        );
    }
    let mut alone = samples
        .remove("git-shim-alone")
        .expect("shim-alone samples");
    let mut env = samples.remove("true-env").expect("true-env samples");
    rows.push(against_env_true(
        "PATH shim process alone p50 (no wrapper to ask: its refusal), via `env`",
        &mut alone,
        &mut env,
    ));
}

fn run_quiet(argv: &[&str], dir: &Path) -> u64 {
    let start = Instant::now();
    let status = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success(), "{argv:?}: {status}");
    start.elapsed().as_nanos() as u64
}

/// Start-up: `ahp-wrap -- true` in an empty project directory of its own (a run's first
/// and last checkpoints read the workspace: in a large one they are what a run's start and
/// end cost, measured apart by bench/checkpoints.sh).
pub(super) fn startup_rows(rows: &mut Vec<Row>, n: usize, scratch: &Path) {
    let dir = scratch.join("startup");
    std::fs::create_dir_all(&dir).expect("a project directory");
    let mut bare = Vec::new();
    let mut wrapped = Vec::new();
    for i in 0..n + 10 {
        let a = || run_quiet(&["true"], &dir);
        let b = || run_quiet(&[ahp_wrap(), "--", "true"], &dir);
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
    let figure = |p| format!("Start-up `ahp-wrap -- true`, p{p}");
    let samples = (&mut wrapped[..], &mut bare[..]);
    added_rows(
        rows,
        figure,
        "`true`",
        samples,
        [50.0, 99.0],
        ("≤ +8 ms", 8e6),
    );
}

/// A row per percentile of `ours` against `base` (ns, taken in the same run): both values and
/// what ours adds; the first percentile's row carries the target (its text, and the most it
/// may add, in ns).
fn added_rows(
    rows: &mut Vec<Row>,
    figure: impl Fn(f64) -> String,
    base_name: &str,
    (ours, base): (&mut [u64], &mut [u64]),
    percentiles: [f64; 2],
    (target, most): (&str, f64),
) {
    for (i, p) in percentiles.into_iter().enumerate() {
        let (o, b) = (percentile(ours, p), percentile(base, p));
        let add = o as f64 - b as f64;
        let mut r = row(
            &figure(p),
            ms(o as f64),
            format!("{base_name} {}", ms(b as f64)),
            format!("+{}", ms(add)),
        );
        if i == 0 {
            r = r.target(target, add < most);
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

pub(super) fn passthrough_rows(rows: &mut Vec<Row>, n: usize) {
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
