//! What workspace checkpoints cost (BENCHMARKS.md, "Checkpoints"), on a directory of a real
//! project that `bench/checkpoints.sh` unpacks from a package registry and commits to git:
//!
//! - the first checkpoint of a run on a cold store (every file read and kept);
//! - the first checkpoint on a warm store (the workspace's index from the run before: only
//!   the files that changed are read), what a run adds before its agent starts;
//! - a checkpoint of the unchanged tree, what a tool call pays while its decision is made;
//! - a checkpoint after one file changed.
//!
//! `AHP_WRAP_BENCH_REPO=DIR XDG_STATE_HOME=EMPTY_DIR cargo bench --bench checkpoints`; without
//! `AHP_WRAP_BENCH_REPO` (as under `cargo test`) it does nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench or test may stop at the first failure

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ahp_wrap::checkpoint::Checkpointer;

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let Some(repo) = std::env::var_os("AHP_WRAP_BENCH_REPO") else {
        eprintln!(
            "checkpoints bench: AHP_WRAP_BENCH_REPO is not set (bench/checkpoints.sh sets it)"
        );
        return;
    };
    let ws = PathBuf::from(repo)
        .canonicalize()
        .expect("the bench's repository");
    let spec = ahp_wrap::policy::checkpoint_spec(None).expect("the default [checkpoints]");
    let start = |run: &str| {
        Checkpointer::start(&spec, &ws, run, "bench")
            .expect("a checkpoint")
            .expect("checkpoints on")
    };
    // The script gives a state directory of the bench's own, empty: the first run is cold.
    let t = Instant::now();
    let cold = start("bench-cold");
    let cold_first = t.elapsed();
    cold.end();

    let mut warm = Vec::new();
    for i in 0..21 {
        let t = Instant::now();
        let c = start(&format!("bench-warm-{i}"));
        warm.push(t.elapsed());
        c.end();
    }

    let c = start("bench-calls");
    let mut unchanged = Vec::new();
    for _ in 0..101 {
        let t = Instant::now();
        c.before("Bash", "true".into());
        unchanged.push(t.elapsed());
    }
    let victim = ws.join("bench-changed.txt");
    let mut changed = Vec::new();
    for i in 0..101 {
        std::fs::write(&victim, format!("change {i}\n")).expect("a file changed");
        let t = Instant::now();
        c.before("Bash", "echo".into());
        changed.push(t.elapsed());
    }
    c.end();
    let _ = std::fs::remove_file(&victim);
    let kept = ahp_wrap::checkpoint::store::Store::open()
        .map(|s| s.runs().len())
        .unwrap_or(0);
    println!("workspace: {}", ws.display());
    println!(
        "first checkpoint, cold store:            {}",
        ms(cold_first)
    );
    println!(
        "first checkpoint, warm store (p50 of 21): {}",
        ms(p50(warm))
    );
    println!(
        "unchanged tree (p50 of 101):              {}",
        ms(p50(unchanged))
    );
    println!(
        "one file changed (p50 of 101):            {}",
        ms(p50(changed))
    );
    println!("runs in the store: {kept}");
}
