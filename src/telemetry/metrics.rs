//! The metrics, in the Prometheus text exposition format, and the `/metrics` endpoint.

use std::sync::Arc;
use std::time::Instant;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// Latency buckets, in seconds: from a policy decision (tens of microseconds) to a person's
/// answer (minutes).
const LATENCY: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Audit write buckets, in seconds: a file-less count to an fsync on a slow disk.
const WRITE: &[f64] = &[
    0.000_001, 0.000_01, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 1.0,
];

/// Every metric of the process, registered in its own registry.
pub(crate) struct Metrics {
    registry: Registry,
    /// What is registered: name, type and label names (for the docs' table, kept by a test).
    #[cfg_attr(not(test), allow(dead_code))]
    catalogue: Vec<(String, &'static str, Vec<String>)>,
    /// `ahp_wrap_decisions_total`: decided events once durable in the audit log, by
    /// `verdict`, `rule`, `decided_by`, `framework`, `event_type`.
    pub decisions: IntCounterVec,
    /// `ahp_wrap_notifications_total`: fire-and-forget events recorded, by `event_type`,
    /// `framework`.
    pub notifications: IntCounterVec,
    /// `ahp_wrap_decision_latency_seconds`: arrival to final verdict (re-asks and a
    /// person's wait included), by `decided_by`.
    pub decision_latency: HistogramVec,
    /// `ahp_wrap_harness_round_trip_seconds`: one ask of a harness (or of the wrapping
    /// run), send to answer.
    pub harness_round_trip: Histogram,
    /// `ahp_wrap_fail_mode_activations_total`: verdicts the fail mode gave for want of a
    /// valid decision, by `mode`.
    pub fail_mode: IntCounterVec,
    /// `ahp_wrap_escalations_pending`: escalations waiting for a person now (see
    /// [`Metrics::escalation_started`]).
    pub escalations_pending: IntGauge,
    /// `ahp_wrap_escalations_total`: escalations ended, by `outcome` (`allowed`, `denied`,
    /// `unanswered`).
    pub escalations: IntCounterVec,
    /// `ahp_wrap_escalation_wait_seconds`: how long each escalation waited for its answer
    /// or deadline.
    pub escalation_wait: Histogram,
    /// `ahp_wrap_audit_write_seconds`: writing one audit record until it is durable.
    pub audit_write: Histogram,
    /// `ahp_wrap_audit_write_failures_total`: audit records that could not be written.
    pub audit_failures: IntCounter,
    /// `ahp_wrap_proxy_frames_total`: frames a stream proxy read, by `proxy`, `direction`.
    pub proxy_frames: IntCounterVec,
    /// `ahp_wrap_proxy_bytes_total`: bytes of those frames, by `proxy`, `direction`.
    pub proxy_bytes: IntCounterVec,
    /// `ahp_wrap_floor_refusals_total`: connections the floor's network rules refused
    /// (decisions whose source is the floor).
    pub floor_refusals: IntCounter,
    /// `ahp_wrap_floor_published_total`: the tree's listeners on this machine's loopback,
    /// by `what` (`port`, `connection`, `refused`, `taken`).
    pub published: IntCounterVec,
    /// `ahp_wrap_floor_credentials_total`: declared credentials on the egress proxy, by
    /// `credential` (the variable's name) and `outcome` (`injected`: the real value put on a
    /// request to its host; `refused`: its placeholder going elsewhere).
    pub credentials: IntCounterVec,
    /// `ahp_wrap_fleet_tasks_total`: tasks a fleet worker answered, by `outcome` (the
    /// result's status).
    pub fleet_tasks: IntCounterVec,
    /// `ahp_wrap_otlp_spans_exported_total`: spans the OTLP collector accepted.
    pub spans_exported: IntCounter,
    /// `ahp_wrap_otlp_spans_dropped_total`: spans lost to a full queue or a failed export.
    pub spans_dropped: IntCounter,
    /// `ahp_wrap_otlp_export_failures_total`: OTLP export requests that failed.
    pub export_failures: IntCounter,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero, in a registry of its own (not Prometheus's global one).
    #[allow(
        clippy::expect_used,
        reason = "the metrics' names, help and labels are literals of ours, each registered once"
    )]
    pub(crate) fn new() -> Metrics {
        let registry = Registry::new();
        let catalogue = std::cell::RefCell::new(Vec::new());
        let register = |c: Box<dyn prometheus::core::Collector>, kind: &'static str| {
            for desc in c.desc() {
                catalogue.borrow_mut().push((
                    desc.fq_name.clone(),
                    kind,
                    desc.variable_labels.clone(),
                ));
            }
            registry.register(c).expect("registered once");
        };
        let counters = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
            register(Box::new(c.clone()), "counter");
            c
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("a valid metric");
            register(Box::new(c.clone()), "counter");
            c
        };
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            let h = Histogram::with_opts(opts).expect("a valid metric");
            register(Box::new(h.clone()), "histogram");
            h
        };
        let decision_latency = HistogramVec::new(
            HistogramOpts::new(
                "ahp_wrap_decision_latency_seconds",
                "From an event's arrival to its final verdict (re-asks and a person's answer included), by who decided.",
            )
            .buckets(LATENCY.to_vec()),
            &["decided_by"],
        )
        .expect("a valid metric");
        register(Box::new(decision_latency.clone()), "histogram");
        let escalations_pending = IntGauge::new(
            "ahp_wrap_escalations_pending",
            "Escalations waiting for a person now.",
        )
        .expect("a valid metric");
        register(Box::new(escalations_pending.clone()), "gauge");
        Metrics {
            decisions: counters(
                "ahp_wrap_decisions_total",
                "Blocking events decided, as the audit log records them: by verdict, policy rule, who decided, framework and event type.",
                &["verdict", "rule", "decided_by", "framework", "event_type"],
            ),
            notifications: counters(
                "ahp_wrap_notifications_total",
                "Fire-and-forget events recorded, by event type and framework.",
                &["event_type", "framework"],
            ),
            decision_latency,
            harness_round_trip: histogram(
                "ahp_wrap_harness_round_trip_seconds",
                "One ask of a harness over a transport (or of the wrapping run), from sending to its answer.",
                LATENCY,
            ),
            fail_mode: counters(
                "ahp_wrap_fail_mode_activations_total",
                "Verdicts given by the fail mode because no valid decision arrived, by mode.",
                &["mode"],
            ),
            escalations_pending,
            escalations: counters(
                "ahp_wrap_escalations_total",
                "Escalations taken to a person, by outcome (allowed, denied, unanswered).",
                &["outcome"],
            ),
            escalation_wait: histogram(
                "ahp_wrap_escalation_wait_seconds",
                "How long an escalation waited for a person's answer (or for its deadline).",
                LATENCY,
            ),
            audit_write: histogram(
                "ahp_wrap_audit_write_seconds",
                "Writing one audit record until it is durable.",
                WRITE,
            ),
            audit_failures: counter(
                "ahp_wrap_audit_write_failures_total",
                "Audit records that could not be written.",
            ),
            proxy_frames: counters(
                "ahp_wrap_proxy_frames_total",
                "Frames read by a stream proxy, by proxy and direction.",
                &["proxy", "direction"],
            ),
            proxy_bytes: counters(
                "ahp_wrap_proxy_bytes_total",
                "Bytes of the frames read by a stream proxy, by proxy and direction.",
                &["proxy", "direction"],
            ),
            floor_refusals: counter(
                "ahp_wrap_floor_refusals_total",
                "Connections the floor's network rules refused (file and signal refusals are the kernel's and are not counted).",
            ),
            published: counters(
                "ahp_wrap_floor_published_total",
                "The tree's listeners published on this machine's loopback: ports published, connections carried into the tree, listeners not published (refused, or their port taken here).",
                &["what"],
            ),
            credentials: counters(
                "ahp_wrap_floor_credentials_total",
                "Declared credentials on the egress proxy: real values put on requests to their hosts (injected), placeholders going elsewhere (refused).",
                &["credential", "outcome"],
            ),
            fleet_tasks: counters(
                "ahp_wrap_fleet_tasks_total",
                "Fleet tasks a worker ended, by outcome.",
                &["outcome"],
            ),
            spans_exported: counter(
                "ahp_wrap_otlp_spans_exported_total",
                "Spans the OTLP collector accepted.",
            ),
            spans_dropped: counter(
                "ahp_wrap_otlp_spans_dropped_total",
                "Spans dropped: the export queue was full, or the collector refused or could not be reached.",
            ),
            export_failures: counter(
                "ahp_wrap_otlp_export_failures_total",
                "OTLP export requests that failed.",
            ),
            catalogue: catalogue.take(),
            registry,
        }
    }

    /// Every metric, in the Prometheus text exposition format (version 0.0.4).
    pub(crate) fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_default()
    }

    /// An escalation now waits: the returned guard counts its outcome.
    pub(crate) fn escalation_started(&self) -> Pending {
        self.escalations_pending.inc();
        Pending {
            pending: self.escalations_pending.clone(),
            outcomes: self.escalations.clone(),
            wait: self.escalation_wait.clone(),
            since: Instant::now(),
            outcome: "unanswered",
        }
    }

    /// The counters of one proxy direction.
    pub(crate) fn frame_counters(&self, proxy: &str, direction: &str) -> FrameCounters {
        FrameCounters {
            frames: self.proxy_frames.with_label_values(&[proxy, direction]),
            bytes: self.proxy_bytes.with_label_values(&[proxy, direction]),
        }
    }
}

/// One escalation waiting for a person; counted as answered (or not) when dropped.
pub(crate) struct Pending {
    pending: IntGauge,
    outcomes: IntCounterVec,
    wait: Histogram,
    since: Instant,
    outcome: &'static str,
}

impl Pending {
    /// What the person said: `allowed`, `denied` (else it stays `unanswered`).
    pub(crate) fn answered(mut self, outcome: &'static str) {
        self.outcome = outcome;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.pending.dec();
        self.outcomes.with_label_values(&[self.outcome]).inc();
        self.wait.observe(self.since.elapsed().as_secs_f64());
    }
}

/// A proxy direction's counters.
pub(crate) struct FrameCounters {
    frames: IntCounter,
    bytes: IntCounter,
}

impl FrameCounters {
    /// `count` frames of `len` bytes in all were read.
    #[inline]
    pub(crate) fn frames(&self, count: usize, len: usize) {
        self.frames.inc_by(count as u64);
        self.bytes.inc_by(len as u64);
    }
}

/// The content type of the text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`, for a router whose state is the token clients must present (if any).
pub(super) async fn handler(token: Option<Arc<str>>, headers: HeaderMap) -> Response {
    let Some(t) = super::get() else {
        return (StatusCode::NOT_FOUND, "metrics are off").into_response();
    };
    if let Some(token) = &token {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !bearer.is_some_and(|b| crate::control::wire::same_secret(b, token)) {
            return (StatusCode::UNAUTHORIZED, "missing or wrong credentials").into_response();
        }
    }
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], t.metrics.render()).into_response()
}

/// A router serving `GET /metrics`, guarded by `token` when one is given.
pub(crate) fn router(token: Option<Arc<str>>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: HeaderMap| handler(token.clone(), headers)),
    )
}

/// Serves `GET /metrics` on `listener` until the process ends.
pub(super) async fn serve_on(listener: tokio::net::TcpListener) {
    if let Err(e) = axum::serve(listener, router(None)).await {
        tracing::warn!("the metrics listener failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_table_lists_exactly_the_registered_metrics() {
        let doc = include_str!("../../docs/observability.md");
        let table = doc
            .split("<!-- metrics:begin")
            .nth(1)
            .and_then(|t| t.split("<!-- metrics:end -->").next())
            .expect("docs/observability.md has the metrics table");
        let mut documented: Vec<(String, String, Vec<String>)> = table
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let name = cells[1].trim_matches('`').to_owned();
                let labels = cells[3]
                    .split(',')
                    .map(|c| c.trim().trim_matches('`').to_owned())
                    .filter(|c| !c.is_empty())
                    .collect();
                (name, cells[2].to_owned(), labels)
            })
            .collect();
        let mut registered: Vec<(String, String, Vec<String>)> = Metrics::new()
            .catalogue
            .into_iter()
            .map(|(n, k, l)| (n, k.to_owned(), l))
            .collect();
        documented.sort();
        registered.sort();
        assert_eq!(documented, registered, "docs/observability.md vs the code");
    }

    #[test]
    fn the_exposition_names_every_metric_with_its_type() {
        let m = Metrics::new();
        m.decisions
            .with_label_values(&["block", "no-rm", "policy", "claude-code", "pre_action"])
            .inc();
        m.escalation_started().answered("allowed");
        m.escalation_started();
        m.frame_counters("mcp", "to_server").frames(1, 10);
        let text = m.render();
        assert!(
            text.contains("# TYPE ahp_wrap_decisions_total counter"),
            "{text}"
        );
        assert!(
            text.contains(r#"ahp_wrap_decisions_total{decided_by="policy",event_type="pre_action",framework="claude-code",rule="no-rm",verdict="block"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"ahp_wrap_escalations_total{outcome="allowed"} 1"#));
        assert!(text.contains(r#"ahp_wrap_escalations_total{outcome="unanswered"} 1"#));
        assert!(text.contains("ahp_wrap_escalations_pending 0"), "{text}");
        assert!(
            text.contains(r#"ahp_wrap_proxy_bytes_total{direction="to_server",proxy="mcp"} 10"#)
        );
        assert!(text.contains("# TYPE ahp_wrap_audit_write_seconds histogram"));
    }
}
