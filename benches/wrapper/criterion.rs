//! The criterion figures (benches/inproc.rs, run first by bench/run.sh) folded into the
//! table, read from criterion's saved estimates.

use std::path::{Path, PathBuf};

use super::support::table::{per_sec, row, us, Row};
use super::MANIFEST_DIR;

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

pub(super) fn criterion_rows(rows: &mut Vec<Row>) {
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
