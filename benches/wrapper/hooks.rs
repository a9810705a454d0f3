//! The hook rows: a hook call against `/bin/true`, Python and the closest peer, the
//! parent's memory, a durable audit log; and telemetry's cost on the same path.

use std::path::Path;

use super::support::table::{ms, row, us, Row};
use super::support::{self, median, percentile};
use super::{against_env_true, cat_rss, drive, peer_home, PEER_VERSION};

pub(super) fn hook_rows(rows: &mut Vec<Row>, calls: usize, dir: &Path, compare: Option<&Path>) {
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
            rows.push(against_env_true(
                "Hook process alone p50 (no relay: its fail-closed path), via `env`",
                &mut a,
                &mut e,
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

/// Telemetry's cost on the hook path: runs of the hook driver (embedded policy) with no
/// export, with spans exported to a collector that answers (a local OTLP/HTTP sink in this
/// process), and with one that is down, alternated `rounds` times so that load swings hit
/// each alike. Each run's figure is the hook's p50 over `/bin/true`'s, interleaved call by
/// call within it; the row gives the median of the runs.
pub(super) fn telemetry_rows(rows: &mut Vec<Row>, calls: usize, dir: &Path, rounds: usize) {
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
