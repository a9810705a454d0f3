//! The egress proxy of the network floor: the only way out of the agent's network namespace.
//!
//! It listens on a loopback port inside that namespace (the agent's `HTTP_PROXY`,
//! `HTTPS_PROXY` and `ALL_PROXY` name it) and speaks HTTP (`CONNECT`, and absolute-form
//! requests for `http://` URLs, each request decided on its own) and SOCKS5 (`CONNECT`,
//! with names or addresses), told apart by the first byte. Each new connection is a
//! `pre_action` with tool `net` (host, port, URL, the asking process) to the gate, after the
//! `[floor.net]` host rules ([`HostRules`]): a host they deny is refused and audited without
//! asking anyone; an unknown host gets the policy's treatment. Names are resolved here, after
//! the decision (a refused name is never looked up), and an address a name resolves to is
//! checked again (a name pointing at the metadata endpoint is refused).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::net::{TcpListener, TcpStream};

use crate::audit::AuditPeer;
use http::{empty, forward, plain};
use tunnel::tunnel;

pub(crate) use ca::RunCa;
pub(crate) use inject::Injection;

mod ca;
#[cfg(target_os = "linux")]
mod carry;
#[cfg(target_os = "linux")]
mod dns;
mod http;
mod inject;
pub(crate) mod leaks;
#[cfg(target_os = "linux")]
mod publish;
mod socks;
mod tunnel;
use crate::floor::hosts::{HostRules, Judgement, Target};
use crate::floor::spec::Unknown;
use crate::gate::{Gate, Origin};
use crate::protocol::{EventType, Final, ToolCall};

/// How long the proxy waits for an upstream connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a client has to say where it goes.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The proxy of one run.
pub(crate) struct Egress {
    gate: Arc<Gate>,
    rules: HostRules,
    /// The agent's pid (0 until it runs), for the asking process's ancestry.
    agent: AtomicI32,
    /// The agent's own process listens on the tree's loopback (a proxy for the commands it
    /// runs in a sandbox of its own, as Claude Code's is): its connections are then no
    /// longer its own hooked fetches only, and get the treatment of any other process's.
    pub(crate) agent_serves: std::sync::atomic::AtomicBool,
    /// The process behind each client port, as the connect bridge noted it.
    askers: Arc<std::sync::Mutex<std::collections::HashMap<u16, i32>>>,
    /// The proxy listens on this machine's loopback (the tree has no network namespace of
    /// its own): it serves only the connections the bridge made for the tree, by their port.
    pub(crate) only_the_tree: std::sync::atomic::AtomicBool,
    /// Connections let through and refused.
    pub allowed: AtomicU64,
    /// Connections and name look-ups refused (the published listeners' are counted in
    /// `published`).
    pub refused: AtomicU64,
    /// The tree's listeners published on this machine's loopback.
    #[cfg(target_os = "linux")]
    pub published: publish::Published,
    /// Connections by name refused lately, by name, port and process (see `carry`).
    #[cfg(target_os = "linux")]
    refused_names: carry::Recent,
    /// The run's declared credentials, when it has any: the connections to their hosts are
    /// served (the `inject` module), not tunnelled.
    pub injection: Option<Injection>,
}

type Body = BoxBody<Bytes, hyper::Error>;

impl Egress {
    /// `askers`: the process behind each client port (see `floor::bridge::Askers`).
    pub(crate) fn new(
        gate: Arc<Gate>,
        rules: HostRules,
        askers: Arc<std::sync::Mutex<std::collections::HashMap<u16, i32>>>,
    ) -> Egress {
        Egress {
            gate,
            rules,
            agent: AtomicI32::new(0),
            agent_serves: std::sync::atomic::AtomicBool::new(false),
            askers,
            only_the_tree: std::sync::atomic::AtomicBool::new(false),
            allowed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            #[cfg(target_os = "linux")]
            published: publish::Published::default(),
            #[cfg(target_os = "linux")]
            refused_names: carry::Recent::default(),
            injection: None,
        }
    }

    /// `self`, putting `injection`'s credentials on the requests to their hosts.
    pub(crate) fn injecting(mut self, injection: Option<Injection>) -> Egress {
        self.injection = injection;
        self
    }

    /// The decisions the gate made through the proxy, the connect bridge and the tree's
    /// listeners: what a run without hooks still had supervised.
    pub(crate) fn decided(&self) -> u64 {
        let published = {
            #[cfg(target_os = "linux")]
            let n = self.published.ports.load(Ordering::Relaxed)
                + self.published.refused.load(Ordering::Relaxed);
            #[cfg(not(target_os = "linux"))]
            let n = 0;
            n
        };
        self.allowed.load(Ordering::Relaxed) + self.refused.load(Ordering::Relaxed) + published
    }

    /// Records the agent's pid.
    pub(crate) fn agent_is(&self, pid: i32) {
        self.agent.store(pid, Ordering::SeqCst);
    }

    /// Serves `listener` until the task is dropped.
    pub(crate) async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("egress proxy: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let me = self.clone();
            tokio::spawn(async move {
                if let Err(e) = me.connection(stream, peer).await {
                    tracing::debug!("egress proxy: {e}");
                }
            });
        }
    }

    async fn connection(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(), String> {
        let _ = stream.set_nodelay(true);
        if self.only_the_tree.load(Ordering::Relaxed)
            && !self
                .askers
                .lock()
                .is_ok_and(|a| a.contains_key(&peer.port()))
        {
            tracing::warn!(
                "egress proxy: refused a connection from {peer}, which the agent's tree did \
                 not make (this proxy serves the tree alone)"
            );
            return Ok(());
        }
        let mut first = [0u8; 1];
        let n = tokio::time::timeout(REQUEST_TIMEOUT, stream.peek(&mut first))
            .await
            .map_err(|_| "a client said nothing".to_owned())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        if first[0] == 5 {
            return self.socks5(stream, peer).await;
        }
        let me = self.clone();
        let service = hyper::service::service_fn(move |req| {
            let me = me.clone();
            async move { Ok::<_, hyper::Error>(me.http(req, peer).await) }
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await
            .map_err(|e| e.to_string())
    }

    /// One HTTP request: `CONNECT host:port`, or an absolute-form request forwarded as is.
    async fn http(
        self: Arc<Self>,
        req: Request<hyper::body::Incoming>,
        peer: SocketAddr,
    ) -> Response<Body> {
        if req.method() == Method::CONNECT {
            let Some(authority) = req.uri().authority().cloned() else {
                return plain(StatusCode::BAD_REQUEST, "CONNECT needs host:port\n");
            };
            let Some(port) = authority.port_u16() else {
                return plain(StatusCode::BAD_REQUEST, "CONNECT needs host:port\n");
            };
            let host = authority.host().to_ascii_lowercase();
            let (upstream, asker) =
                match self.admit(&host, port, "https", "http-connect", peer).await {
                    Ok(s) => s,
                    Err(refusal) => return refusal.response(),
                };
            let inject = Target::parse(&host).is_some_and(|t| self.injects_for(&t));
            tokio::spawn(async move {
                match hyper::upgrade::on(req).await {
                    Ok(upgraded) if inject => {
                        let host = host
                            .trim_start_matches('[')
                            .trim_end_matches(']')
                            .to_owned();
                        self.intercept(TokioIo::new(upgraded), host, upstream, asker)
                            .await
                    }
                    Ok(upgraded) => tunnel(upgraded, upstream).await,
                    Err(e) => tracing::debug!("egress proxy: upgrade failed: {e}"),
                }
            });
            return Response::new(empty());
        }
        let uri = req.uri().clone();
        let (Some(host), Some("http")) = (uri.host(), uri.scheme_str()) else {
            return plain(
                StatusCode::BAD_REQUEST,
                "this is the wrapper's egress proxy: send CONNECT, or an absolute http:// URL\n",
            );
        };
        let port = uri.port_u16().unwrap_or(80);
        let (upstream, asker) = match self.admit(host, port, "http", "http", peer).await {
            Ok(s) => s,
            Err(refusal) => return refusal.response(),
        };
        // A credential never goes over plain HTTP: its placeholder on such a request is an
        // attempt to send it where it cannot be protected.
        if let Some(injection) = &self.injection {
            let seen = |bytes: &[u8]| injection.credentials.foreign_in(bytes, None);
            let carried = seen(uri.to_string().as_bytes())
                .or_else(|| req.headers().values().find_map(|v| seen(v.as_bytes())));
            if let Some(c) = carried {
                let how = "on a plain-HTTP request, which never carries a credential";
                let reason = self
                    .placeholder_elsewhere(c, host, how, asker.as_deref())
                    .await;
                self.refused.fetch_add(1, Ordering::Relaxed);
                return plain(
                    StatusCode::FORBIDDEN,
                    &format!("ahp-wrap refused this request: {reason}\n"),
                );
            }
        }
        match forward(req, upstream).await {
            Ok(resp) => resp,
            Err(e) => plain(
                StatusCode::BAD_GATEWAY,
                &format!("the upstream failed: {e}\n"),
            ),
        }
    }

    /// Audits a direct connection the kernel's side refused (see `floor::bridge`): `chain` is the
    /// asking process and its ancestry, read while it still waited in `connect`.
    #[cfg(target_os = "linux")]
    pub(crate) async fn direct_refused(
        &self,
        r: crate::floor::bridge::Refusal,
        chain: Vec<(i32, Vec<String>)>,
    ) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let asker = Asker::from_chain(&chain);
        let addr = match r.dest {
            crate::floor::bridge::Dest::Inet(addr) => addr,
            crate::floor::bridge::Dest::Unix(path) => {
                let shown = path.display().to_string();
                let mut arguments = json!({"path": shown, "url": format!("unix:{shown}")});
                let tmux = std::env::var("TMUX").ok();
                if let Some(why) = routine_probe(&path, &chain, tmux.as_deref()) {
                    arguments["routine"] = why.into();
                }
                let (event, origin) = self.event_with(arguments, "direct", asker.as_ref());
                let reason = format!("unix:{shown}: {}", r.why);
                self.refused(&event, reason, origin).await;
                return;
            }
            crate::floor::bridge::Dest::Socket(kind) => {
                let arguments = json!({"socket": kind, "url": format!("socket:{kind}")});
                let (event, origin) = self.event_with(arguments, "direct", asker.as_ref());
                let reason = format!("a {kind} socket: {}", r.why);
                self.refused(&event, reason, origin).await;
                return;
            }
        };
        let target = Target::Addr(crate::floor::hosts::canonical(addr.ip()));
        let (event, origin) = self.event(&target, addr.port(), "tcp", "direct", asker.as_ref());
        let reason = format!("{}:{}: {}", target, addr.port(), r.why);
        self.refused(&event, reason, origin).await;
    }

    /// Decides a connection to `host:port` and makes it; with the process that asked.
    async fn admit(
        &self,
        host: &str,
        port: u16,
        scheme: &str,
        via: &str,
        peer: SocketAddr,
    ) -> Result<(TcpStream, Option<Arc<Asker>>), Refusal> {
        let Some(target) = Target::parse(host) else {
            return Err(Refusal::failed(format!(
                "`{host}` is not a host name or address"
            )));
        };
        let noted = self
            .askers
            .lock()
            .ok()
            .and_then(|mut a| a.remove(&peer.port()));
        let (addrs, asker) = self.allow(&target, port, (scheme, via), noted).await?;
        let mut last = format!("{target} has no address");
        for addr in addrs {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    self.allowed.fetch_add(1, Ordering::Relaxed);
                    return Ok((s, asker));
                }
                Ok(Err(e)) => last = format!("cannot connect to {addr}: {e}"),
                Err(_) => last = format!("cannot connect to {addr}: timed out"),
            }
        }
        Err(Refusal::failed(last))
    }

    /// Decides a connection to `target:port` that the process `noted` asks for (`scheme`
    /// and `via` say how, for its event), then resolves the name: the addresses it may go
    /// to, with the process that asked. A refused name is never looked up, and a name that
    /// leads to an address the rules deny is refused then. A process whose command line
    /// carries a credential's placeholder to a host it is not bound to is refused first.
    async fn allow(
        &self,
        target: &Target,
        port: u16,
        (scheme, via): (&str, &str),
        noted: Option<i32>,
    ) -> Result<(Vec<SocketAddr>, Option<Arc<Asker>>), Refusal> {
        let agent = self.agent.load(Ordering::SeqCst);
        let asker = noted.and_then(|pid| asking_process(pid, agent));
        if let Some(c) = self.carried_elsewhere(asker.as_ref(), target) {
            let how = "on the command line of the process that connects";
            let reason = self
                .placeholder_elsewhere(c, &target.to_string(), how, asker.as_ref())
                .await;
            return Err(self.refuse(reason));
        }
        let (event, origin) = self.event(target, port, scheme, via, asker.as_ref());
        // The agent's own process: its fetches are hooked tool calls the policy sees, so a
        // host no list names goes to the gate as before. Any other process of the tree (or
        // one the proxy cannot name) gets the `unknown` treatment, and so does the agent's
        // own once it serves on the tree's loopback: it may be carrying another process's
        // connection then (Claude Code's sandbox proxy, for the commands it runs).
        let own = agent > 0 && noted == Some(agent) && !self.agent_serves.load(Ordering::SeqCst);
        let judgement = match self.rules.judge_at(target, Some(port)) {
            Judgement::Unknown(_) if own => Judgement::Unknown(Unknown::Allow),
            other => other,
        };
        let decision = match judgement {
            Judgement::Denied(reason) => self.refused(&event, reason, origin.clone()).await,
            Judgement::Unknown(Unknown::Block) => {
                let reason = match crate::floor::hosts::is_loopback(target) {
                    true => format!(
                        "{}, which the floor does not let through (unknown = \"block\")",
                        self.rules.unnamed(target, port)
                    ),
                    false => format!(
                        "{target} is not a host the floor lets through ([floor.net] allow; unknown = \"block\")"
                    ),
                };
                self.refused(&event, reason, origin.clone()).await
            }
            // A person allowed a tool call of this run that contacts it (an MCP server's
            // fetch, escalated by the same host rules): not asked twice.
            Judgement::Unknown(Unknown::Ask)
                if self.gate.host_approved(&approved_key(target, port)) =>
            {
                self.gate.decide(&event, false, origin.clone()).await
            }
            Judgement::Unknown(Unknown::Ask) => {
                let reason = self.rules.unnamed(target, port);
                self.gate.ask_person(&event, reason, origin.clone()).await
            }
            Judgement::Allowed | Judgement::Unknown(Unknown::Allow) => {
                self.gate.decide(&event, false, origin.clone()).await
            }
        };
        match decision.verdict {
            Final::Allow { .. } => {}
            Final::Block { reason } => {
                // A tool that reports the failed connection is told why (as for the floor's
                // own refusals), in the words of the decision.
                self.gate
                    .floor_met
                    .refused_target(&target.to_string(), &reason);
                return Err(self.refuse(reason));
            }
            other => {
                let reason = format!(
                    "the harness answered a connection with {}, which a proxy cannot carry out",
                    other.name()
                );
                return Err(self.refuse(reason));
            }
        }
        let addrs: Vec<SocketAddr> = match target {
            Target::Addr(a) => vec![SocketAddr::new(*a, port)],
            Target::Name(name) => tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(|e| Refusal::failed(format!("cannot resolve {name}: {e}")))?
                .collect(),
        };
        // (An address was judged as it is, its port with it.)
        let resolved = matches!(target, Target::Name(_));
        if let Some(why) = addrs
            .iter()
            .filter(|_| resolved)
            .find_map(|a| self.rules.refuse_resolved(a.ip(), a.port()))
        {
            let decision = self.refused(&event, why, origin).await;
            let reason = match decision.verdict {
                Final::Block { reason } => reason,
                _ => unreachable!("refused() blocks"),
            };
            return Err(self.refuse(reason));
        }
        Ok((addrs, asker.map(Arc::new)))
    }

    /// Records that the floor refused `event` (a `net` event of this proxy's), and remembers
    /// its host or socket so that a tool reporting the failed connection is told why.
    async fn refused(
        &self,
        event: &crate::protocol::Event,
        reason: String,
        origin: Origin,
    ) -> crate::gate::Decision {
        let arguments = event.payload.get("arguments");
        let target = ["host", "path"]
            .iter()
            .find_map(|k| arguments?.get(*k)?.as_str());
        if let Some(target) = target {
            self.gate.floor_met.refused_target(target, &reason);
        }
        self.gate.refused(event, reason, origin).await
    }

    fn refuse(&self, reason: String) -> Refusal {
        self.refused.fetch_add(1, Ordering::Relaxed);
        Refusal {
            reason,
            decided: true,
        }
    }

    /// The `pre_action` for a connection, and where it came from.
    fn event(
        &self,
        target: &Target,
        port: u16,
        scheme: &str,
        via: &str,
        asker: Option<&Asker>,
    ) -> (crate::protocol::Event, Origin) {
        let mut arguments = json!({
            "host": target.to_string(),
            "port": port,
            "url": format!("{scheme}://{target}:{port}/"),
        });
        // On this machine's loopback, who listens there: what a person (or a policy) weighs.
        #[cfg(target_os = "linux")]
        if via == "loopback" {
            if let Some((pid, argv)) = crate::child::sockets::listener_on(port) {
                arguments["listener"] = json!({"pid": pid, "argv": argv});
            }
        }
        self.event_with(arguments, via, asker)
    }

    /// A `net` pre_action with these arguments, asked by `asker` through `via`.
    fn event_with(
        &self,
        arguments: Value,
        via: &str,
        asker: Option<&Asker>,
    ) -> (crate::protocol::Event, Origin) {
        let mut context = json!({"interceptor": "egress", "via": via});
        if let Some(a) = asker {
            context["process"] = json!({"pid": a.pid, "argv": a.argv});
            context["process_ancestry"] = Value::Array(
                a.ancestry
                    .iter()
                    .map(|(pid, argv)| json!({"pid": pid, "argv": argv}))
                    .collect(),
            );
        }
        let payload = ToolCall::new("net", arguments, context).into_payload();
        let mut metadata = Map::new();
        metadata.insert("interceptor".into(), "egress".into());
        let event = self.gate.event(EventType::PreAction, payload, metadata);
        let origin = Origin {
            framework_session: None,
            peer: asker.map(|a| AuditPeer {
                pid: a.pid,
                descends_from_agent: true,
            }),
        };
        (event, origin)
    }
}

/// What a person's answer about a connection is remembered under for the rest of the run:
/// the host, or for this machine's loopback the address and its port (one port approved is
/// not another).
fn approved_key(target: &Target, port: u16) -> String {
    match crate::floor::hosts::is_loopback(target) {
        true => format!("loopback:{port}"),
        false => target.to_string(),
    }
}

/// Why a connection was not made: refused by a decision, or failed.
struct Refusal {
    reason: String,
    /// A decision refused it (else it failed: bad request, no address, no answer).
    decided: bool,
}

impl Refusal {
    fn failed(reason: String) -> Refusal {
        Refusal {
            reason,
            decided: false,
        }
    }
}

/// The process at the other end of a proxy connection.
struct Asker {
    pid: i32,
    argv: Vec<String>,
    ancestry: Vec<(i32, Vec<String>)>,
}

impl Asker {
    /// The first process of `chain` (as `child::procfs::ancestry` reads it), with the rest
    /// as its ancestry.
    fn from_chain(chain: &[(i32, Vec<String>)]) -> Option<Asker> {
        let (pid, argv) = chain.first().cloned()?;
        Some(Asker {
            pid,
            argv,
            ancestry: chain[1..].to_vec(),
        })
    }
}

/// The process `pid` (as the connect bridge noted it) and its ancestry up to the agent.
fn asking_process(pid: i32, agent: i32) -> Option<Asker> {
    let chain = crate::child::procfs::ancestry(pid, agent, std::process::id() as i32);
    Asker::from_chain(&chain)
}

/// Why a refused path socket is one of the agent's routine probes, which the run's summary
/// does not list as a block (the audit log keeps it): a `tmux display-message -p` (a query,
/// as Claude Code makes at start inside tmux) to the person's own tmux server, the one named
/// by the wrapper's `$TMUX` (`tmux`). The server runs whatever a client asks, so the
/// connection stays refused; a client asking anything else is listed.
fn routine_probe(
    path: &std::path::Path,
    chain: &[(i32, Vec<String>)],
    tmux: Option<&str>,
) -> Option<&'static str> {
    let socket = tmux?.split(',').next()?;
    if path != std::path::Path::new(socket) {
        return None;
    }
    let (_, argv) = chain.first()?;
    let program = std::path::Path::new(argv.first()?).file_name()?;
    let words: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
    let query = words
        .iter()
        .position(|w| matches!(*w, "display-message" | "display"))
        .is_some_and(|at| words[at..].contains(&"-p"));
    let other = words
        .iter()
        .any(|w| w.contains(';') || w.contains("run-shell") || *w == "run");
    (program == "tmux" && query && !other)
        .then_some("the agent asked your tmux server about its pane (a query)")
}

#[cfg(test)]
mod routine_tests {
    use super::routine_probe;
    use std::path::Path;

    #[test]
    fn only_a_tmux_query_to_the_persons_own_server_is_routine() {
        let tmux = Some("/tmp/tmux-0/default,123,0");
        let socket = Path::new("/tmp/tmux-0/default");
        let asked = |argv: &[&str]| vec![(7, argv.iter().map(|a| a.to_string()).collect())];
        let query = asked(&["tmux", "display-message", "-p", "#{pane_id}"]);
        assert!(routine_probe(socket, &query, tmux).is_some());
        assert!(routine_probe(
            socket,
            &asked(&["/usr/bin/tmux", "display", "-p", "x"]),
            tmux
        )
        .is_some());
        // Anything else a client asks is listed.
        assert!(routine_probe(socket, &asked(&["tmux", "run-shell", "touch x"]), tmux).is_none());
        assert!(routine_probe(
            socket,
            &asked(&["tmux", "display", "-p", "x", ";", "run", "y"]),
            tmux
        )
        .is_none());
        assert!(routine_probe(socket, &asked(&["python3", "talk.py"]), tmux).is_none());
        // Another server's socket, or no tmux around the wrapper.
        assert!(routine_probe(Path::new("/tmp/other.sock"), &query, tmux).is_none());
        assert!(routine_probe(socket, &query, None).is_none());
    }
}
