//! Telemetry: live views of what the audit log records. Prometheus metrics (served at
//! `/metrics`) and OpenTelemetry spans (exported over OTLP/HTTP): a span per run, a child
//! span per decided event.
//!
//! Owns: the process's one set of metrics, the `/metrics` endpoint, and the span export
//! (bounded, batched, dropped and counted on overload). Must not touch: decisions (the
//! gate's) or the audit log, which stays the record of truth: telemetry is told about a
//! record only once it is durable (see [`crate::audit::Observer::recorded`]), so the counters agree with
//! the log, and it never holds a decision up.
//!
//! Off unless asked for (`--metrics-listen`, `--otlp`, the standard `OTEL_EXPORTER_OTLP_*`
//! variables, or `serve`), and then one atomic load per call site when it is off.

mod metrics;
mod otlp;

pub(crate) use metrics::{router, FrameCounters, Metrics, Pending};
pub(crate) use otlp::{Target, TargetError};

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use crate::audit::AuditRecord;
use crate::protocol::Event;

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

/// What a process turns on.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Keep metrics (to serve at `/metrics`).
    pub metrics: bool,
    /// Serve `/metrics` on this address (`--metrics-listen`).
    pub metrics_listen: Option<String>,
    /// Export spans here.
    pub otlp: Option<Target>,
    /// The framework label of events that name none (a run's own framework).
    pub framework: Option<String>,
    /// What this process is, for the spans' resource (`run`, `serve`, `worker`).
    pub role: &'static str,
}

impl Options {
    /// The options of a command line (`--metrics-listen`, `--otlp`), with the standard
    /// `OTEL_*` variables: `metrics` keeps metrics even without `--metrics-listen` (`serve`
    /// serves them on its own listener).
    pub(crate) fn new(
        metrics_listen: Option<String>,
        otlp: Option<&str>,
        role: &'static str,
        metrics: bool,
    ) -> Result<Options, TargetError> {
        let otlp = Target::from(otlp, |name| std::env::var(name).ok())?;
        Ok(Options {
            metrics: metrics || metrics_listen.is_some(),
            metrics_listen,
            otlp,
            framework: None,
            role,
        })
    }

    /// Whether anything is on.
    pub(crate) fn any(&self) -> bool {
        self.metrics || self.otlp.is_some()
    }
}

/// Turns telemetry on for this process, on the current runtime, as `options` say: binds
/// `--metrics-listen` and says where on stderr. `Ok(None)`: nothing is on.
pub(crate) async fn start(options: Options) -> Result<Option<&'static Telemetry>, String> {
    if !options.any() {
        return Ok(None);
    }
    let listener = match &options.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("--metrics-listen {addr}: cannot listen: {e}"))?,
        ),
        None => None,
    };
    let telemetry = init(options);
    if let Some(listener) = listener {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("ahp-wrap: metrics on http://{addr}/metrics");
        }
        tokio::spawn(metrics::serve_on(listener));
    }
    Ok(Some(telemetry))
}

/// The process's telemetry.
pub(crate) struct Telemetry {
    /// The process's Prometheus metrics; kept even when only spans were asked for.
    pub metrics: Metrics,
    spans: Option<otlp::Exporter>,
    framework: String,
}

/// Turns telemetry on for this process. Must run inside the Tokio runtime when spans are
/// exported (the exporter is a task of it). A second call changes nothing.
pub(crate) fn init(options: Options) -> &'static Telemetry {
    TELEMETRY.get_or_init(|| Telemetry::new(options))
}

/// The process's telemetry, when it is on.
#[inline]
pub(crate) fn get() -> Option<&'static Telemetry> {
    TELEMETRY.get()
}

impl Telemetry {
    /// Telemetry for `options`, before [`init`] installs it as the process's.
    fn new(options: Options) -> Telemetry {
        let metrics = Metrics::new();
        let spans = options
            .otlp
            .map(|target| otlp::Exporter::start(target, options.role, &metrics));
        Telemetry {
            metrics,
            spans,
            framework: options.framework.unwrap_or_else(|| "unknown".to_owned()),
        }
    }

    /// This telemetry as the audit log's observer.
    pub(crate) fn observer(&'static self) -> &'static dyn crate::audit::Observer {
        self
    }

    /// A run began: its span is exported when it ends ([`Telemetry::run_ended`]).
    pub(crate) fn run_started(&self, run: RunSpan) {
        if let Some(spans) = &self.spans {
            spans.run_started(run);
        }
    }

    /// The run ended with `exit_code` after `events` events; its span goes out, and the
    /// export is flushed for at most `within`.
    pub(crate) async fn run_ended(&self, exit_code: u8, events: u64, within: Duration) {
        if let Some(spans) = &self.spans {
            spans.run_ended(exit_code, events);
            spans.flush(within).await;
        }
    }
}

impl crate::audit::Observer for Telemetry {
    /// An audit record was made durable (in `wrote`): count it, and export its span when it
    /// is a decision.
    fn recorded(&self, event: &Event, record: &AuditRecord, wrote: Duration) {
        self.metrics.audit_write.observe(wrote.as_secs_f64());
        let framework = framework_of(event).unwrap_or(&self.framework);
        let event_type = event.event_type.as_str();
        if record.decision == "notified" {
            self.metrics
                .notifications
                .with_label_values(&[event_type, framework])
                .inc();
            return;
        }
        let (by, rule) = decided_by(&record.source);
        self.metrics
            .decisions
            .with_label_values(&[record.decision.as_str(), rule, by, framework, event_type])
            .inc();
        let latency = Duration::from_micros(record.latency_us);
        self.metrics
            .decision_latency
            .with_label_values(&[by])
            .observe(latency.as_secs_f64());
        if by == "floor" {
            self.metrics.floor_refusals.inc();
        }
        if let Some(spans) = &self.spans {
            spans.decided(event, record, framework, latency);
        }
    }

    fn failed(&self) {
        self.metrics.audit_failures.inc();
    }
}

/// A run's span, as it starts.
#[derive(Debug, Clone)]
pub(crate) struct RunSpan {
    /// The run's session id; the trace id is derived from it, so the run's decisions share
    /// its trace (`ahp.session_id`).
    pub session_id: String,
    /// The agent's program as started (`ahp.agent`).
    pub agent: String,
    /// The framework's name, or `mcp` / the ACP name for a proxy run (`ahp.framework`).
    pub framework: String,
    /// Nesting depth: 0 for a top-level run, one more under each enclosing wrapper
    /// (`ahp.depth`).
    pub depth: u32,
    /// When the run began: the span's start time.
    pub start: SystemTime,
}

/// The framework an event names in its metadata (hooks and proxies set it).
fn framework_of(event: &Event) -> Option<&str> {
    event.metadata.as_ref()?.get("framework")?.as_str()
}

/// Who decided (`policy`, `harness`, `person`, `fail-mode`, `cancelled`, `floor`) and the
/// policy's rule, from the audit record's `source`. A person's name is no label (it would
/// make a series per person); the span has it.
fn decided_by(source: &str) -> (&str, &str) {
    match source.split_once(':') {
        Some(("policy", rule)) => ("policy", rule),
        Some((by, _)) => (by, ""),
        None => (source, ""),
    }
}

/// Counts a fail-mode activation (`closed` or `open`).
pub(crate) fn fail_mode(mode: &str) {
    if let Some(t) = get() {
        t.metrics.fail_mode.with_label_values(&[mode]).inc();
    }
}

/// A harness (or the wrapping run) answered one ask in `took`.
pub(crate) fn harness_round_trip(took: Duration) {
    if let Some(t) = get() {
        t.metrics.harness_round_trip.observe(took.as_secs_f64());
    }
}

/// An escalation now waits for a person; the guard counts it answered (or not) when dropped
/// or told.
pub(crate) fn escalation_started() -> Option<Pending> {
    get().map(|t| t.metrics.escalation_started())
}

/// The counters of one stream proxy's direction, when metrics are on (taken once, counted
/// per frame without a lookup).
pub(crate) fn proxy_counters(proxy: &str, direction: &str) -> Option<FrameCounters> {
    get().map(|t| t.metrics.frame_counters(proxy, direction))
}

/// The floor published a listener of the tree (`port`), carried a connection to one
/// (`connection`), or left one unpublished (`refused`, `taken`).
pub(crate) fn published(what: &str) {
    if let Some(t) = get() {
        t.metrics.published.with_label_values(&[what]).inc();
    }
}

/// The egress proxy put the credential `name`'s value on a request (`injected`) or refused
/// its placeholder going elsewhere (`refused`).
pub(crate) fn credential(name: &str, outcome: &str) {
    if let Some(t) = get() {
        t.metrics
            .credentials
            .with_label_values(&[name, outcome])
            .inc();
    }
}

/// A fleet task ended with `outcome` (`completed`, `failed`, `refused`, `aborted`, …).
pub(crate) fn fleet_task(outcome: &str) {
    if let Some(t) = get() {
        t.metrics.fleet_tasks.with_label_values(&[outcome]).inc();
    }
}

/// Nanoseconds since the Unix epoch.
fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_decided_is_read_from_the_records_source() {
        assert_eq!(decided_by("policy:no-rm"), ("policy", "no-rm"));
        assert_eq!(decided_by("policy"), ("policy", ""));
        assert_eq!(decided_by("person:alice@10.0.0.7:5123"), ("person", ""));
        assert_eq!(decided_by("fail-mode"), ("fail-mode", ""));
        assert_eq!(decided_by("floor"), ("floor", ""));
    }
}
