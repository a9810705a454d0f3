//! Declared credentials put on the wire: a connection the gate allowed to a host a credential
//! is bound to is not tunnelled but served here. The proxy is the TLS server the client
//! reaches (a certificate for the host, signed by the run's CA), reads each HTTP/1.1 request,
//! puts the real value where the credential may appear (its headers, basic auth, its query
//! parameters, the body when declared), and sends it on over TLS to the real host, verified
//! against this machine's roots. A request carrying the placeholder of a credential not bound
//! to the host is refused and audited as an attempt to send it elsewhere.
//!
//! Each injection is audited (a `success` notification: credential, host, method, path
//! without its query, the process; never the value) and counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::ca::RunCa;
use super::http::plain;
use super::{Asker, Body, Egress, REQUEST_TIMEOUT};
use crate::floor::credentials::{Credential, Credentials};
use crate::floor::hosts::Target;
use crate::protocol::EventType;

/// The largest body read whole to put a credential in it.
const MAX_BODY: usize = 16 << 20;

/// The credentials of a run, the CA that lets the proxy read their requests, and what was
/// done with them.
pub(crate) struct Injection {
    /// The declared credentials.
    pub credentials: Credentials,
    /// The run's certificate authority.
    pub ca: RunCa,
    /// Per credential: requests it was injected into, and placeholders refused elsewhere.
    pub counts: Mutex<BTreeMap<String, Counted>>,
    /// Per host: clients that did not complete TLS with the run's CA (a program with roots
    /// of its own, or pinning), said at the end of the run.
    pub untrusted: Mutex<BTreeMap<String, u64>>,
    /// What a request that carries a credential's value must not carry out with it.
    pub secrets: super::leaks::Secrets,
}

/// What became of one credential in a run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Counted {
    /// Requests that carried its real value.
    pub injected: u64,
    /// Requests or connections refused for carrying its placeholder elsewhere.
    pub refused: u64,
    /// The hosts it was sent to.
    pub hosts: std::collections::BTreeSet<String>,
}

impl Injection {
    fn count(&self, name: &str, host: Option<&str>) {
        crate::telemetry::credential(
            name,
            if host.is_some() {
                "injected"
            } else {
                "refused"
            },
        );
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        let c = counts.entry(name.to_owned()).or_default();
        match host {
            Some(h) => {
                c.injected += 1;
                c.hosts.insert(h.to_owned());
            }
            None => c.refused += 1,
        }
    }
}

type Sender = Arc<tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Body>>>;

impl Egress {
    /// Serves `client`, allowed to reach `host` (over `upstream`, connected), putting the
    /// credentials bound to it on its requests.
    pub(super) async fn intercept<S>(
        self: Arc<Self>,
        client: S,
        host: String,
        upstream: TcpStream,
        asker: Option<Arc<Asker>>,
    ) where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Some(injection) = self.injection.as_ref() else {
            return;
        };
        let server = match injection.ca.server(&host) {
            Ok(s) => s,
            Err(e) => return tracing::warn!("egress: {e}"),
        };
        let accepted = tokio::time::timeout(
            REQUEST_TIMEOUT,
            tokio_rustls::TlsAcceptor::from(server).accept(client),
        )
        .await;
        let tls = match accepted {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::warn!(
                    "egress: a client did not complete TLS for {host} with the run's CA: {e}"
                );
                if let Ok(mut untrusted) = injection.untrusted.lock() {
                    *untrusted.entry(host).or_default() += 1;
                }
                return;
            }
            Err(_) => return tracing::debug!("egress: the client for {host} did not start TLS"),
        };
        // The real host, verified; a failure is each request's answer.
        let sender = self.upstream(&host, upstream).await;
        let target = Target::parse(&host);
        let me = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let (me, host, sender, asker) =
                (me.clone(), host.clone(), sender.clone(), asker.clone());
            let target = target.clone();
            async move {
                let resp = match (&sender, target) {
                    (Ok(sender), Some(target)) => {
                        me.inject(req, (&host, &target), sender, asker.as_deref())
                            .await
                    }
                    (Err(why), _) => plain(StatusCode::BAD_GATEWAY, &format!("ahp-wrap: {why}\n")),
                    (_, None) => plain(StatusCode::BAD_GATEWAY, "ahp-wrap: not a host\n"),
                };
                Ok::<_, hyper::Error>(resp)
            }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(tls), service)
            .await;
        if let Err(e) = served {
            tracing::debug!("egress: an intercepted connection: {e}");
        }
    }

    /// TLS to the real `host` over `upstream`, and HTTP/1.1 on it.
    async fn upstream(&self, host: &str, upstream: TcpStream) -> Result<Sender, String> {
        let injection = self.injection.as_ref().ok_or("no credentials")?;
        let config = injection.ca.client()?;
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{host}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, upstream)
            .await
            .map_err(|e| format!("TLS with {host} failed: {e}"))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("{host}: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Arc::new(tokio::sync::Mutex::new(sender)))
    }

    /// One request to `host`: refused when it carries another host's credential, else sent
    /// on with the bound credentials' values in place of their placeholders.
    async fn inject(
        &self,
        req: Request<hyper::body::Incoming>,
        (host, target): (&str, &Target),
        sender: &Sender,
        asker: Option<&Asker>,
    ) -> Response<Body> {
        let Some(injection) = self.injection.as_ref() else {
            return plain(StatusCode::BAD_GATEWAY, "ahp-wrap: no credentials\n");
        };
        let creds = &injection.credentials;
        let (mut parts, body) = req.into_parts();
        // Read whole when a credential may be put in it, or when what leaves with one is
        // checked for the person's secrets (`leaks`).
        let checked = !injection.secrets.is_empty() && creds.any_bound_to(target);
        let whole = checked || creds.iter().any(|c| c.body && c.bound_to(target));
        let limit = match checked {
            true => super::leaks::MAX_CHECKED,
            false => MAX_BODY,
        };
        let mut body_bytes = None;
        let mut streamed = None;
        if !whole {
            streamed = Some(body);
        } else {
            match Limited::new(body, limit).collect().await {
                Ok(b) => body_bytes = Some(b.to_bytes()),
                Err(e) => {
                    return plain(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &format!("ahp-wrap: a body sent with a credential is read whole to be checked, up to {limit} bytes: {e}\n"),
                    )
                }
            }
        }
        let path = parts.uri.path().to_owned();
        if let Some((c, place)) = foreign(creds, &parts, body_bytes.as_deref(), target) {
            let name = c.name.clone();
            let reason = self
                .placeholder_elsewhere(c, host, &format!("in {place}"), asker)
                .await;
            tracing::debug!("egress: {name} to {host}: refused");
            return plain(
                StatusCode::FORBIDDEN,
                &format!("ahp-wrap refused this request: {reason}\n"),
            );
        }
        let mut used = Vec::new();
        for c in creds.iter().filter(|c| c.bound_to(target)) {
            let mut put = put_in_headers(c, &mut parts.headers);
            put |= put_in_query(c, &mut parts.uri);
            if let Some(b) = body_bytes.as_mut().filter(|_| c.body) {
                if c.in_bytes(b) {
                    *b = Bytes::from(replace(b, c));
                    put = true;
                }
            }
            if put {
                used.push(c);
            }
        }
        // What leaves with a real credential carries none of the person's secrets.
        if let (false, Some(b)) = (used.is_empty(), body_bytes.as_deref()) {
            let encoding = parts
                .headers
                .get(hyper::header::CONTENT_ENCODING)
                .and_then(|v| v.to_str().ok());
            if let Some(what) = injection.secrets.found(b, encoding) {
                let reason = self
                    .leak_refused(&used, host, (&parts.method, &path), &what, asker)
                    .await;
                return plain(
                    StatusCode::FORBIDDEN,
                    &format!("ahp-wrap refused this request: {reason}\n"),
                );
            }
        }
        let body = match (body_bytes, streamed) {
            (Some(b), _) => {
                if parts.headers.contains_key(hyper::header::CONTENT_LENGTH) {
                    parts
                        .headers
                        .insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(b.len()));
                }
                Full::new(b).map_err(|never| match never {}).boxed()
            }
            (None, Some(body)) => body.boxed(),
            (None, None) => super::http::empty(),
        };
        let method = parts.method.to_string();
        let req = Request::from_parts(parts, body);
        let sent = {
            let mut sender = sender.lock().await;
            match sender.ready().await {
                Ok(()) => sender.send_request(req).await,
                Err(e) => Err(e),
            }
        };
        let resp = match sent {
            Ok(resp) => resp,
            Err(e) => {
                return plain(
                    StatusCode::BAD_GATEWAY,
                    &format!("ahp-wrap: {host} did not answer: {e}\n"),
                )
            }
        };
        for c in used {
            self.injected(c, host, (&method, &path), asker).await;
        }
        resp.map(BodyExt::boxed)
    }

    /// Refuses and audits a request to `host` that would have carried the credentials `used`
    /// and, in its body, a secret of the person's (`what`: where it came from, never its
    /// value); returns the reason.
    async fn leak_refused(
        &self,
        used: &[&Credential],
        host: &str,
        (method, path): (&hyper::Method, &str),
        what: &str,
        asker: Option<&Asker>,
    ) -> String {
        let names: Vec<&str> = used.iter().map(|c| c.name.as_str()).collect();
        let reason = format!(
            "a {method} request to {host} with the credential {} carries a secret of the \
             person's in its body: the value of {what} (nothing of it was sent; commit or \
             publish without it, or leave it out of what the agent sends)",
            names.join(", ")
        );
        let arguments = json!({
            "host": host,
            "credential": names,
            "method": method.as_str(),
            "path": path,
            "leaked_from": what,
        });
        let (event, origin) = self.event_with(arguments, "inject", asker);
        self.refused(&event, reason.clone(), origin).await;
        reason
    }

    /// Audits and counts that `c`'s value went to `host`.
    async fn injected(
        &self,
        c: &Credential,
        host: &str,
        (method, path): (&str, &str),
        asker: Option<&Asker>,
    ) {
        let Some(injection) = self.injection.as_ref() else {
            return;
        };
        injection.count(&c.name, Some(host));
        let payload = json!({
            "operation": "credential_injected",
            "credential": c.name,
            "host": host,
            "method": method,
            "path": path,
            "process": asker.map(|a| json!({"pid": a.pid, "argv": redact(&a.argv, injection)})),
        });
        let (event, origin) = self.event_with(json!({}), "inject", asker);
        let event = crate::protocol::Event {
            event_type: EventType::Success,
            payload,
            ..event
        };
        self.gate.notify(event, origin).await;
    }

    /// Refuses and audits `c`'s placeholder going to `host` (`how`: where it was seen);
    /// returns the reason.
    pub(super) async fn placeholder_elsewhere(
        &self,
        c: &Credential,
        host: &str,
        how: &str,
        asker: Option<&Asker>,
    ) -> String {
        let reason = format!(
            "an attempt to send the credential {} to {host}, a host it is not bound to (its placeholder {how}); [[floor.credentials]] hosts: {}",
            c.name,
            c.hosts.shown().join(", ")
        );
        if let Some(injection) = self.injection.as_ref() {
            injection.count(&c.name, None);
        }
        let arguments = json!({"host": host, "credential": c.name});
        let (event, origin) = self.event_with(arguments, "inject", asker);
        self.refused(&event, reason.clone(), origin).await;
        reason
    }

    /// The credential whose placeholder the process `asker` (or an ancestor) carries on its
    /// command line to `target`, a host that credential is not bound to.
    pub(super) fn carried_elsewhere<'a>(
        &'a self,
        asker: Option<&Asker>,
        target: &Target,
    ) -> Option<&'a Credential> {
        let injection = self.injection.as_ref()?;
        let asker = asker?;
        let lines = std::iter::once(&asker.argv).chain(asker.ancestry.iter().map(|(_, a)| a));
        lines.flatten().find_map(|arg| {
            injection
                .credentials
                .foreign_in(arg.as_bytes(), Some(target))
        })
    }

    /// Whether a connection to `target` is served here rather than tunnelled.
    pub(super) fn injects_for(&self, target: &Target) -> bool {
        self.injection
            .as_ref()
            .is_some_and(|i| i.credentials.any_bound_to(target))
    }
}

/// The first credential not bound to `target` whose placeholder the request carries, and
/// where.
fn foreign<'a>(
    creds: &'a Credentials,
    parts: &hyper::http::request::Parts,
    body: Option<&[u8]>,
    target: &Target,
) -> Option<(&'a Credential, String)> {
    let seen = |bytes: &[u8]| creds.foreign_in(bytes, Some(target));
    if let Some(c) = seen(parts.uri.to_string().as_bytes()) {
        return Some((c, "the URL".into()));
    }
    for (name, value) in &parts.headers {
        let decoded = basic(value).unwrap_or_default();
        if let Some(c) = seen(value.as_bytes()).or_else(|| seen(&decoded)) {
            return Some((c, format!("the header {name}")));
        }
    }
    body.and_then(seen).map(|c| (c, "the body".into()))
}

/// The credentials of an `Authorization: Basic` value, decoded.
fn basic(value: &HeaderValue) -> Option<Vec<u8>> {
    let text = value.to_str().ok()?;
    let (scheme, rest) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()
}

/// Puts `c`'s value in the headers it may appear in; whether it did.
fn put_in_headers(c: &Credential, headers: &mut hyper::HeaderMap) -> bool {
    let mut put = false;
    let names: Vec<HeaderName> = headers.keys().cloned().collect();
    for name in names {
        let may = c.headers.iter().any(|h| h == name.as_str());
        let is_auth = name == hyper::header::AUTHORIZATION;
        let values: Vec<HeaderValue> = headers.get_all(&name).iter().cloned().collect();
        let mut changed = false;
        let mut new_values = Vec::with_capacity(values.len());
        for v in values {
            let mut new = None;
            if is_auth && c.basic_auth {
                if let Some(decoded) = basic(&v).filter(|d| c.in_bytes(d)) {
                    let encoded =
                        base64::engine::general_purpose::STANDARD.encode(replace(&decoded, c));
                    new = HeaderValue::from_str(&format!("Basic {encoded}")).ok();
                }
            }
            if new.is_none() && may && c.in_bytes(v.as_bytes()) {
                new = HeaderValue::from_bytes(&replace(v.as_bytes(), c)).ok();
            }
            changed |= new.is_some();
            new_values.push(
                new.map(|mut n| {
                    n.set_sensitive(true);
                    n
                })
                .unwrap_or(v),
            );
        }
        if changed {
            headers.remove(&name);
            for v in new_values {
                headers.append(name.clone(), v);
            }
            put = true;
        }
    }
    put
}

/// Puts `c`'s value in the query parameters it may appear in; whether it did.
fn put_in_query(c: &Credential, uri: &mut hyper::Uri) -> bool {
    let Some(query) = uri
        .query()
        .filter(|q| !c.query.is_empty() && c.in_bytes(q.as_bytes()))
    else {
        return false;
    };
    let mut put = false;
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if c.query.iter().any(|q| q == k) && c.in_bytes(v.as_bytes()) => {
                put = true;
                format!("{k}={}", String::from_utf8_lossy(&replace(v.as_bytes(), c)))
            }
            _ => pair.to_owned(),
        })
        .collect();
    if !put {
        return false;
    }
    let path_and_query = format!("{}?{}", uri.path(), pairs.join("&"));
    let mut parts = uri.clone().into_parts();
    match path_and_query.parse() {
        Ok(pq) => parts.path_and_query = Some(pq),
        Err(_) => return false,
    }
    match hyper::Uri::from_parts(parts) {
        Ok(new) => {
            *uri = new;
            true
        }
        Err(_) => false,
    }
}

/// `bytes` with `c`'s placeholder replaced by its value.
fn replace(bytes: &[u8], c: &Credential) -> Vec<u8> {
    let from = c.placeholder.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 64);
    let mut at = 0;
    for found in memchr::memmem::find_iter(bytes, from) {
        out.extend_from_slice(&bytes[at..found]);
        out.extend_from_slice(c.value().as_bytes());
        at = found + from.len();
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// A command line as audited: never a credential's value (a process that holds one read it
/// from somewhere the floor did not hide).
fn redact(argv: &[String], injection: &Injection) -> Vec<String> {
    argv.iter()
        .map(|a| {
            injection.credentials.iter().fold(a.clone(), |a, c| {
                a.replace(c.value(), &format!("<{}>", c.name))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
