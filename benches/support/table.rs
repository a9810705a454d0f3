//! The benches' results table, the machine line above it, and the block of a results file
//! (BENCHMARKS.md) a run rewrites: one way to print and record figures for every bench.

use std::path::Path;
use std::process::Command;

/// One row of the table.
pub(crate) struct Row {
    figure: String,
    ours: String,
    baseline: String,
    overhead: String,
    target: String,
    /// `Some(true)` meets the target, `Some(false)` misses it, `None` has none.
    meets: Option<bool>,
}

pub(crate) fn row(figure: &str, ours: String, baseline: String, overhead: String) -> Row {
    Row {
        figure: figure.to_owned(),
        ours,
        baseline,
        overhead,
        target: "—".to_owned(),
        meets: None,
    }
}

impl Row {
    pub(crate) fn target(mut self, target: &str, meets: bool) -> Row {
        self.target = target.to_owned();
        self.meets = Some(meets);
        self
    }
}

pub(crate) fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

pub(crate) fn us(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

pub(crate) fn per_sec(n: f64) -> String {
    let n = n.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{out} /s")
}

pub(crate) fn render(rows: &[Row]) -> String {
    let mut s = String::from(
        "| Figure | ahp-wrap | Baseline (same run) | Overhead | Target | Meets |\n|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let meets = match r.meets {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.figure, r.ours, r.baseline, r.overhead, r.target, meets
        ));
    }
    s
}

pub(crate) fn machine(manifest_dir: &str) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let out = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    // The machine may be shared: how busy it was, as the figures were taken.
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" / "))
        .unwrap_or_else(|| "unknown".into());
    format!(
        "Measured {} on {cpu}, {cores} cores, {mem_gib:.0} GiB, {}, load average {load} \
         (1/5/15 min, at the end); {}; release build of {}.",
        out("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        out("uname", &["-sr"]),
        out("rustc", &["-V"]),
        out("git", &["-C", manifest_dir, "rev-parse", "--short", "HEAD"]),
    )
}

/// Rewrites the block between `begin` and `end` in the file at `path` with `body` (or adds
/// the block at the end when the file has none).
pub(crate) fn write_block(path: &Path, begin: &str, end: &str, body: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let block = format!("{begin}\n{body}{end}");
    let new = match (text.find(begin), text.find(end)) {
        (Some(b), Some(e)) if b < e => format!("{}{block}{}", &text[..b], &text[e + end.len()..]),
        _ => format!("{text}\n{block}\n"),
    };
    std::fs::write(path, new).expect("write the results");
    eprintln!("results written to {}", path.display());
}
