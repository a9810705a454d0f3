//! Spans over OTLP/HTTP (protobuf): a span per run, a child span per decided event.
//!
//! The recording side only builds the span and offers it to a bounded queue; a full queue
//! drops it and counts the drop. One task batches the queue and posts each batch with a
//! deadline; a failed post is dropped and counted, never retried into the next decision's
//! way. The trace id is derived from the session id, and so is the run span's id, so that
//! the decisions `serve` exports for a wrapper's session land in that wrapper's run trace.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::SpanKind, status, ResourceSpans, ScopeSpans, Span, Status,
};
use prost::Message as _;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use super::{unix_nanos, Metrics, RunSpan};
use crate::audit::AuditRecord;
use crate::protocol::Event;

/// Spans waiting for export; past this, new ones are dropped (and counted).
const QUEUE: usize = 4096;
/// Spans in one export request.
const BATCH: usize = 512;
/// How long a span may wait for a fuller batch.
const LINGER: Duration = Duration::from_secs(1);
/// The default deadline of one export request (`OTEL_EXPORTER_OTLP_TIMEOUT` overrides it).
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The traces endpoint (`…/v1/traces`).
    pub url: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// Deadline of one export request: `…_TIMEOUT` in milliseconds, else 10 s.
    pub timeout: Duration,
    /// `service.name`: `OTEL_SERVICE_NAME`, else the one in `OTEL_RESOURCE_ATTRIBUTES`,
    /// else `ahp-wrap`.
    pub service: String,
    /// The other resource attributes, from `OTEL_RESOURCE_ATTRIBUTES` (`service.name`
    /// taken out).
    pub resource: Vec<(String, String)>,
}

/// Why an export target cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The endpoint is not an `http://` or `https://` URL that parses.
    #[error("{name}: {url:?} is not an http:// or https:// URL")]
    Url {
        /// Where it came from: `--otlp` or the variable's name.
        name: &'static str,
        /// The endpoint, with `/v1/traces` added when it was a base URL.
        url: String,
    },
    /// `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL` asks for anything but `http/protobuf`.
    #[error(
        "{name}={protocol:?}: ahp-wrap exports OTLP over HTTP with protobuf only (http/protobuf)"
    )]
    Protocol {
        /// The variable that set it.
        name: &'static str,
        /// Its value (`grpc`, `http/json`, …).
        protocol: String,
    },
}

impl Target {
    /// The target from `--otlp URL` (a base URL gets `/v1/traces`; a URL with a path is
    /// used as it is), else from the standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// (as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces`), with their
    /// `…_HEADERS`, `…_TIMEOUT` and `…_PROTOCOL`, `OTEL_SERVICE_NAME` and
    /// `OTEL_RESOURCE_ATTRIBUTES`. `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
    /// turn the variables off (not the flag). `None`: no export.
    pub(crate) fn from(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Target>, TargetError> {
        let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let url = match flag {
            Some(url) => Some(("--otlp", base_or_whole(url))),
            None => {
                let off = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
                    || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
                if off {
                    None
                } else if let Some(url) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                    Some(("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url))
                } else {
                    env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| {
                        let url = format!("{}/v1/traces", base.trim_end_matches('/'));
                        ("OTEL_EXPORTER_OTLP_ENDPOINT", url)
                    })
                }
            }
        };
        let Some((name, url)) = url else {
            return Ok(None);
        };
        let url = url.trim().to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://"))
            || url::Url::parse(&url).is_err()
        {
            return Err(TargetError::Url { name, url });
        }
        for name in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = env(name) {
                if protocol.trim() != "http/protobuf" {
                    return Err(TargetError::Protocol { name, protocol });
                }
                break;
            }
        }
        let headers = env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| env("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|h| pairs(&h))
            .unwrap_or_default();
        let timeout = env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(TIMEOUT);
        let mut resource = env("OTEL_RESOURCE_ATTRIBUTES")
            .map(|r| pairs(&r))
            .unwrap_or_default();
        let service = env("OTEL_SERVICE_NAME")
            .or_else(|| {
                let at = resource.iter().position(|(k, _)| k == "service.name")?;
                Some(resource.remove(at).1)
            })
            .unwrap_or_else(|| "ahp-wrap".to_owned());
        Ok(Some(Target {
            url,
            headers,
            timeout,
            service,
            resource,
        }))
    }
}

/// `--otlp`'s URL: a base (no path) gets the traces path.
fn base_or_whole(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if u.path() == "/" || u.path().is_empty() => {
            format!("{}/v1/traces", url.trim_end_matches('/'))
        }
        _ => url.to_owned(),
    }
}

/// `k=v,k2=v2`, values percent-decoded (the W3C baggage form the OTel variables use).
fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|p| {
            let (k, v) = p.split_once('=')?;
            let v = url::form_urlencoded::parse(format!("v={}", v.trim()).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            Some((k.trim().to_owned(), v))
        })
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// The most of a decided call's arguments a span carries (as redacted JSON).
const MAX_ARGUMENTS: usize = 4096;

/// A decided event, as its span will say it.
struct DecisionSpan {
    end: SystemTime,
    took: Duration,
    session: String,
    agent: String,
    depth: u32,
    event_type: &'static str,
    framework: String,
    tool: Option<String>,
    arguments: Option<serde_json::Value>,
    verdict: String,
    source: String,
    latency_us: u64,
    observed: Option<String>,
    reason: Option<String>,
}

enum Item {
    Span(Box<Span>),
    DecisionSpan(Box<DecisionSpan>),
    /// Send what is queued now, then say so.
    Flush(oneshot::Sender<()>),
}

/// The recording side of the export.
pub(super) struct Exporter {
    queue: mpsc::Sender<Item>,
    dropped: prometheus::IntCounter,
    /// The run of this process, from its start to its end.
    run: Mutex<Option<RunSpan>>,
}

impl Exporter {
    /// Starts the export task on the current runtime.
    pub(super) fn start(target: Target, role: &'static str, metrics: &Metrics) -> Exporter {
        let (queue, rx) = mpsc::channel(QUEUE);
        let resource = resource(&target, role);
        let sender = Sender {
            client: reqwest::Client::builder()
                .connect_timeout(target.timeout.min(Duration::from_secs(3)))
                .timeout(target.timeout)
                .build()
                .unwrap_or_default(),
            target,
            resource,
            exported: metrics.spans_exported.clone(),
            dropped: metrics.spans_dropped.clone(),
            failures: metrics.export_failures.clone(),
            warned: false,
        };
        tokio::spawn(sender.run(rx));
        Exporter {
            queue,
            dropped: metrics.spans_dropped.clone(),
            run: Mutex::new(None),
        }
    }

    /// Offers a span to the queue; never waits.
    fn offer(&self, span: Span) {
        if self.queue.try_send(Item::Span(Box::new(span))).is_err() {
            self.dropped.inc();
        }
    }

    /// The span of a decided event, as its audit record has it. Only what the span needs
    /// is copied here; the span is built (and redacted) by the export task, off the
    /// decision's path.
    pub(super) fn decided(
        &self,
        event: &Event,
        record: &AuditRecord,
        framework: &str,
        took: Duration,
    ) {
        let decided = DecisionSpan {
            end: SystemTime::now(),
            took,
            session: event.session_id.clone(),
            agent: event.agent_id.clone(),
            depth: event.depth,
            event_type: event.event_type.as_str(),
            framework: framework.to_owned(),
            tool: event
                .payload
                .get("tool_name")
                .and_then(|t| t.as_str())
                .map(str::to_owned),
            arguments: event.payload.get("arguments").cloned(),
            verdict: record.decision.clone(),
            source: record.source.clone(),
            latency_us: record.latency_us,
            observed: record.observed.clone(),
            reason: record.reason.clone(),
        };
        if self
            .queue
            .try_send(Item::DecisionSpan(Box::new(decided)))
            .is_err()
        {
            self.dropped.inc();
        }
    }

    pub(super) fn run_started(&self, run: RunSpan) {
        if let Ok(mut slot) = self.run.lock() {
            *slot = Some(run);
        }
    }

    /// Exports the run's span (once).
    pub(super) fn run_ended(&self, exit_code: u8, events: u64) {
        let Some(run) = self.run.lock().ok().and_then(|mut r| r.take()) else {
            return;
        };
        self.offer(Span {
            trace_id: trace_id(&run.session_id).to_vec(),
            span_id: run_span_id(&run.session_id).to_vec(),
            name: "ahp.run".to_owned(),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: unix_nanos(run.start),
            end_time_unix_nano: unix_nanos(SystemTime::now()),
            attributes: vec![
                text("ahp.session_id", &run.session_id),
                text("ahp.agent", &run.agent),
                text("ahp.framework", &run.framework),
                int("ahp.depth", i64::from(run.depth)),
                int("ahp.events", events as i64),
                int("process.exit.code", i64::from(exit_code)),
            ],
            ..Default::default()
        });
    }

    /// Sends what is queued and waits for it for at most `within`.
    pub(super) async fn flush(&self, within: Duration) {
        let (tx, rx) = oneshot::channel();
        let sent = tokio::time::timeout(within, self.queue.send(Item::Flush(tx))).await;
        if matches!(sent, Ok(Ok(()))) {
            let _ = tokio::time::timeout(within, rx).await;
        }
    }
}

/// The export task's side.
struct Sender {
    client: reqwest::Client,
    target: Target,
    resource: Resource,
    exported: prometheus::IntCounter,
    dropped: prometheus::IntCounter,
    failures: prometheus::IntCounter,
    /// A failure is warned about once; the counters say the rest.
    warned: bool,
}

impl Sender {
    async fn run(mut self, mut rx: mpsc::Receiver<Item>) {
        let mut batch: Vec<Span> = Vec::with_capacity(BATCH);
        loop {
            let item = if batch.is_empty() {
                rx.recv().await
            } else {
                match tokio::time::timeout(LINGER, rx.recv()).await {
                    Ok(item) => item,
                    Err(_) => {
                        self.post(std::mem::take(&mut batch)).await;
                        continue;
                    }
                }
            };
            match item {
                None => {
                    self.post(batch).await;
                    return;
                }
                Some(item @ (Item::Span(..) | Item::DecisionSpan(..))) => {
                    batch.push(finished(item));
                    if batch.len() >= BATCH {
                        self.post(std::mem::take(&mut batch)).await;
                    }
                }
                Some(Item::Flush(done)) => {
                    self.post(std::mem::take(&mut batch)).await;
                    let _ = done.send(());
                }
            }
        }
    }

    async fn post(&mut self, spans: Vec<Span>) {
        if spans.is_empty() {
            return;
        }
        let count = spans.len() as u64;
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(self.resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "ahp-wrap".to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..Default::default()
                    }),
                    spans,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        let mut post = self
            .client
            .post(&self.target.url)
            .header("content-type", "application/x-protobuf")
            .body(request.encode_to_vec());
        for (k, v) in &self.target.headers {
            post = post.header(k.as_str(), v.as_str());
        }
        let outcome = match post.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("the collector answered {}", r.status())),
            Err(e) => Err(crate::error_chain(&e)),
        };
        match outcome {
            Ok(()) => self.exported.inc_by(count),
            Err(why) => {
                self.failures.inc();
                self.dropped.inc_by(count);
                if !std::mem::replace(&mut self.warned, true) {
                    tracing::warn!(
                        "OTLP export to {} failed ({why}); {count} spans dropped (further failures are counted, not logged)",
                        self.target.url
                    );
                } else {
                    tracing::debug!("OTLP export failed ({why}); {count} spans dropped");
                }
            }
        }
    }
}

/// A span as it is sent. A decision's reason and arguments are redacted as the audit log
/// redacts them (the arguments cut at [`MAX_ARGUMENTS`]).
fn finished(item: Item) -> Span {
    let d = match item {
        Item::Span(span) => return *span,
        Item::DecisionSpan(d) => *d,
        Item::Flush(_) => unreachable!("a flush is no span"),
    };
    let mut attributes = vec![
        text("ahp.session_id", &d.session),
        text("ahp.agent_id", &d.agent),
        int("ahp.depth", i64::from(d.depth)),
        text("ahp.event_type", d.event_type),
        text("ahp.framework", &d.framework),
        text("ahp.verdict", &d.verdict),
        int("ahp.latency_us", d.latency_us as i64),
    ];
    if let Some(tool) = &d.tool {
        attributes.push(text("ahp.tool", tool));
    }
    let (by, rule) = super::decided_by(&d.source);
    attributes.push(text("ahp.decided_by", by));
    if !rule.is_empty() {
        attributes.push(text("ahp.rule", rule));
    }
    attributes.push(boolean("ahp.fail_mode", by == "fail-mode"));
    if by == "person" {
        attributes.push(boolean("ahp.escalated", true));
        attributes.push(int("ahp.escalation.wait_ms", d.took.as_millis() as i64));
        let who = d.source.strip_prefix("person").unwrap_or_default();
        let who = who.strip_prefix(':').unwrap_or("terminal");
        attributes.push(text("ahp.escalation.answered_by", who));
    }
    if let Some(observed) = &d.observed {
        attributes.push(text("ahp.observed", observed));
    }
    let reason = d
        .reason
        .map(|r| crate::audit::redact::redact_str(&r).into_owned());
    if let Some(reason) = &reason {
        attributes.push(text("ahp.reason", reason));
    }
    if let Some(mut arguments) = d.arguments {
        crate::audit::redact::redact_value(&mut arguments);
        let mut json = arguments.to_string();
        if json.len() > MAX_ARGUMENTS {
            let mut cut = MAX_ARGUMENTS;
            while !json.is_char_boundary(cut) {
                cut -= 1;
            }
            json.truncate(cut);
            json.push('…');
        }
        attributes.push(text("ahp.arguments", &json));
    }
    let start = d.end.checked_sub(d.took).unwrap_or(d.end);
    let status = (d.verdict == "block").then(|| Status {
        message: reason.unwrap_or_default(),
        code: status::StatusCode::Error as i32,
    });
    Span {
        trace_id: trace_id(&d.session).to_vec(),
        span_id: random_span_id().to_vec(),
        parent_span_id: run_span_id(&d.session).to_vec(),
        name: format!("ahp.decide {}", d.event_type),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: unix_nanos(start),
        end_time_unix_nano: unix_nanos(d.end),
        attributes,
        status,
        ..Default::default()
    }
}

fn resource(target: &Target, role: &'static str) -> Resource {
    let mut attributes = vec![
        text("service.name", &target.service),
        text("service.version", env!("CARGO_PKG_VERSION")),
        text("ahp.role", role),
        int("process.pid", i64::from(std::process::id())),
    ];
    for (k, v) in &target.resource {
        attributes.push(text(k, v));
    }
    Resource {
        attributes,
        ..Default::default()
    }
}

/// A session's trace id: the same in every process that sees the session.
fn trace_id(session: &str) -> [u8; 16] {
    let digest = Sha256::new()
        .chain_update(b"ahp-wrap trace\0")
        .chain_update(session.as_bytes())
        .finalize();
    let mut id = [0; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// The id of a session's run span, which its decisions' spans name as their parent.
fn run_span_id(session: &str) -> [u8; 8] {
    let digest = Sha256::new()
        .chain_update(b"ahp-wrap run\0")
        .chain_update(session.as_bytes())
        .finalize();
    let mut id = [0; 8];
    id.copy_from_slice(&digest[..8]);
    id
}

fn random_span_id() -> [u8; 8] {
    let mut id = [0; 8];
    if getrandom::getrandom(&mut id).is_err() || id == [0; 8] {
        id = unix_nanos(SystemTime::now()).to_le_bytes();
    }
    id
}

fn attribute(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    attribute(key, any_value::Value::StringValue(value.to_owned()))
}

fn int(key: &str, value: i64) -> KeyValue {
    attribute(key, any_value::Value::IntValue(value))
}

fn boolean(key: &str, value: bool) -> KeyValue {
    attribute(key, any_value::Value::BoolValue(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_flag_and_the_standard_variables_name_the_traces_endpoint() {
        let t = Target::from(Some("http://127.0.0.1:4318"), env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(t.url, "http://127.0.0.1:4318/v1/traces");
        let t = Target::from(Some("http://c:4318/custom"), env(&[]))
            .unwrap()
            .unwrap();
        assert_eq!(t.url, "http://c:4318/custom");
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-tenant=a%20b, authorization=Bearer%20t",
            ),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=ci,team=infra"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ];
        let t = Target::from(None, env(&vars)).unwrap().unwrap();
        assert_eq!(t.url, "http://c:4318/v1/traces");
        assert_eq!(
            t.headers,
            [
                ("x-tenant".into(), "a b".into()),
                ("authorization".into(), "Bearer t".into())
            ]
        );
        assert_eq!(t.service, "ci");
        assert_eq!(t.resource, [("team".into(), "infra".into())]);
        assert_eq!(t.timeout, Duration::from_millis(2500));
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/x"),
        ];
        assert_eq!(
            Target::from(None, env(&vars)).unwrap().unwrap().url,
            "http://t:4318/x"
        );
        assert_eq!(Target::from(None, env(&[])).unwrap(), None);
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert_eq!(Target::from(None, env(&off)).unwrap(), None);
    }

    #[test]
    fn what_cannot_be_exported_is_refused_with_the_variable_that_said_it() {
        let e = Target::from(Some("collector:4318"), env(&[])).unwrap_err();
        assert!(e.to_string().starts_with("--otlp:"), "{e}");
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        let e = Target::from(None, env(&grpc)).unwrap_err();
        assert!(
            e.to_string()
                .contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\""),
            "{e}"
        );
    }

    fn attributes(span: &Span) -> std::collections::BTreeMap<String, String> {
        span.attributes
            .iter()
            .map(|kv| {
                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    Some(any_value::Value::IntValue(i)) => i.to_string(),
                    Some(any_value::Value::BoolValue(b)) => b.to_string(),
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), v)
            })
            .collect()
    }

    #[test]
    fn an_escalation_answered_by_a_person_says_who_and_how_long_it_waited() {
        let decided = DecisionSpan {
            end: SystemTime::now(),
            took: Duration::from_millis(4200),
            session: "s-1".into(),
            agent: "a".into(),
            depth: 0,
            event_type: "pre_action",
            framework: "claude-code".into(),
            tool: Some("Bash".into()),
            arguments: Some(serde_json::json!({"command": "git push --force", "token": "hunter2"})),
            verdict: "block".into(),
            source: "person:alice@10.0.0.7:5123".into(),
            latency_us: 4_200_000,
            observed: None,
            reason: Some("not now, key sk-ant-api03-abcdefghijklmnopqrstuvwxyz".into()),
        };
        let span = finished(Item::DecisionSpan(Box::new(decided)));
        let a = attributes(&span);
        assert_eq!(a["ahp.decided_by"], "person");
        assert_eq!(a["ahp.escalated"], "true");
        assert_eq!(a["ahp.escalation.wait_ms"], "4200");
        assert_eq!(a["ahp.escalation.answered_by"], "alice@10.0.0.7:5123");
        assert!(!a.contains_key("ahp.rule"));
        assert_eq!(span.parent_span_id, run_span_id("s-1"));
        assert_eq!(
            span.end_time_unix_nano - span.start_time_unix_nano,
            4_200_000_000
        );
        // Redacted as the audit log redacts: a key in the reason, a secret key's value.
        assert!(
            a["ahp.reason"].contains("[REDACTED:anthropic-key]"),
            "{a:?}"
        );
        assert!(!a["ahp.arguments"].contains("hunter2"), "{a:?}");
        let status = span.status.expect("a block has a status");
        assert_eq!(status.code, status::StatusCode::Error as i32);
        assert_eq!(status.message, a["ahp.reason"]);

        let at_terminal = DecisionSpan {
            source: "person".into(),
            verdict: "allow".into(),
            reason: None,
            arguments: None,
            ..decided_like()
        };
        let span = finished(Item::DecisionSpan(Box::new(at_terminal)));
        assert_eq!(attributes(&span)["ahp.escalation.answered_by"], "terminal");
        assert!(span.status.is_none());
    }

    fn decided_like() -> DecisionSpan {
        DecisionSpan {
            end: SystemTime::now(),
            took: Duration::ZERO,
            session: "s".into(),
            agent: "a".into(),
            depth: 1,
            event_type: "pre_action",
            framework: "generic".into(),
            tool: None,
            arguments: None,
            verdict: "allow".into(),
            source: "policy".into(),
            latency_us: 0,
            observed: None,
            reason: None,
        }
    }

    #[test]
    fn a_sessions_trace_is_the_same_everywhere_and_its_run_span_is_the_parent() {
        assert_eq!(trace_id("s-1"), trace_id("s-1"));
        assert_ne!(trace_id("s-1"), trace_id("s-2"));
        assert_ne!(run_span_id("s-1")[..], trace_id("s-1")[..8]);
        assert_ne!(random_span_id(), random_span_id());
    }
}
