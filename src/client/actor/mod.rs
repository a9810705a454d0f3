//! The client actor: one task that owns the link and every piece of protocol state.

mod batch;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::handshake::parse_handshake;
use super::{ClientConfig, Command, Fault, LinkState, Negotiated};
use crate::jsonrpc::Id;
use crate::protocol::jsonrpc::{self, Inbound};
use crate::protocol::Event;
use crate::transport::{self, ConnectError, HarnessSpec, Incoming, Link, Outgoing};

/// How long the handshake may take before the link is considered down.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Reconnect backoff bounds.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Notifications kept while the link is not ready; older ones are dropped past this.
const MAX_QUEUED_NOTIFICATIONS: usize = 10_000;
/// Ids of requests whose callers gave up, so that a late answer is not a violation.
const MAX_EXPIRED: usize = 4096;
/// How long `close` waits for batches in flight to be answered.
const CLOSE_DRAIN: Duration = Duration::from_millis(1000);
/// Batch size when the harness names none.
const DEFAULT_BATCH_SIZE: usize = 100;

enum Pending {
    Caller(oneshot::Sender<Result<Value, Fault>>),
    Handshake,
    Batch,
}

pub(super) struct Actor {
    spec: HarnessSpec,
    cfg: ClientConfig,
    handshake: Value,
    rx: mpsc::Receiver<Command>,
    state: watch::Sender<LinkState>,
    link: Option<Link>,
    connecting: Option<oneshot::Receiver<Result<Link, ConnectError>>>,
    negotiated: Option<Negotiated>,
    pending: HashMap<String, Pending>,
    /// Requests accepted before the link was ready, in order.
    unsent: Vec<Outgoing>,
    batch: VecDeque<Event>,
    batch_due: Option<Instant>,
    handshake_due: Option<Instant>,
    retry_at: Option<Instant>,
    backoff: Duration,
    expired: VecDeque<String>,
    closing: Option<(oneshot::Sender<()>, Instant)>,
    dead: Option<String>,
    last_violation: Option<String>,
    seq: u64,
}

impl Actor {
    pub(super) fn new(
        spec: HarnessSpec,
        cfg: ClientConfig,
        handshake: Value,
        rx: mpsc::Receiver<Command>,
        state: watch::Sender<LinkState>,
    ) -> Actor {
        Actor {
            spec,
            cfg,
            handshake,
            rx,
            state,
            link: None,
            connecting: None,
            negotiated: None,
            pending: HashMap::new(),
            unsent: Vec::new(),
            batch: VecDeque::new(),
            batch_due: None,
            handshake_due: None,
            retry_at: None,
            backoff: BACKOFF_MIN,
            expired: VecDeque::new(),
            closing: None,
            dead: None,
            last_violation: None,
            seq: 0,
        }
    }

    pub(super) async fn run(mut self) {
        self.start_connect();
        loop {
            tokio::select! {
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => self.on_command(cmd).await,
                    None => break,
                },
                incoming = recv_link(&mut self.link) => self.on_incoming(incoming).await,
                // Cancellation-safe: a oneshot receiver keeps its value until awaited again.
                connected = wait_connect(&mut self.connecting) => {
                    self.connecting = None;
                    self.on_connected(connected).await;
                }
                () = sleep_opt(self.retry_at) => {
                    self.retry_at = None;
                    self.start_connect();
                }
                () = sleep_opt(self.batch_due) => self.flush_batch().await,
                () = sleep_opt(self.handshake_due) => self.on_handshake_timeout(),
                () = sleep_opt(self.closing.as_ref().map(|c| c.1)) => break,
            }
            if self.closing.is_some() && self.drained() {
                break;
            }
        }
        self.finish().await;
    }

    fn ready(&self) -> bool {
        self.negotiated.is_some() && self.link.is_some()
    }

    fn drained(&self) -> bool {
        (self.batch.is_empty() && !self.pending.values().any(|p| matches!(p, Pending::Batch)))
            || !self.ready()
    }

    fn next_id(&mut self, kind: &str) -> String {
        self.seq += 1;
        format!("ahpw-{kind}-{}", self.seq)
    }

    fn set_state(&self, state: LinkState) {
        self.state.send_replace(state);
    }

    fn start_connect(&mut self) {
        if self.dead.is_some() || self.closing.is_some() {
            return;
        }
        let (tx, rx) = oneshot::channel();
        let spec = self.spec.clone();
        let link_cfg = self.cfg.link.clone();
        tokio::spawn(async move {
            let _ = tx.send(transport::connect(&spec, &link_cfg).await);
        });
        self.connecting = Some(rx);
    }

    async fn on_connected(&mut self, result: Result<Link, ConnectError>) {
        match result {
            Ok(link) => {
                self.link = Some(link);
                let id = self.next_id("hs");
                self.pending.insert(id.clone(), Pending::Handshake);
                self.handshake_due = Some(Instant::now() + HANDSHAKE_TIMEOUT);
                let text = jsonrpc::request(&id, "ahp/handshake", &self.handshake);
                self.send(Outgoing { id: Some(id), text }).await;
            }
            Err(e) => self.link_down(e.0),
        }
    }

    fn on_handshake_timeout(&mut self) {
        self.handshake_due = None;
        let ids: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Handshake))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.pending.remove(&id);
            self.remember_expired(id);
        }
        let mut why = format!(
            "no handshake answer within {} ms",
            HANDSHAKE_TIMEOUT.as_millis()
        );
        if let Some(v) = &self.last_violation {
            why.push_str(&format!(" (it sent {v})"));
        }
        self.link = None;
        self.link_down(why);
    }

    fn on_handshake(&mut self, outcome: Result<Value, Fault>) {
        self.handshake_due = None;
        let negotiated = match outcome {
            Ok(result) => parse_handshake(&result),
            Err(Fault::Transport(why)) => {
                self.link = None;
                return self.link_down(why);
            }
            Err(Fault::Refused(why)) => {
                return self.die_as(why.clone(), LinkState::Refused(why));
            }
            Err(fault) => Err(format!("the harness refused the handshake: {fault}")),
        };
        match negotiated {
            Ok(n) => {
                tracing::info!(
                    harness = %n.harness_name,
                    version = %n.protocol_version,
                    timeout_ms = ?n.timeout_ms,
                    batch_size = ?n.batch_size,
                    max_depth = ?n.max_depth,
                    "harness handshake done"
                );
                self.backoff = BACKOFF_MIN;
                self.negotiated = Some(n.clone());
                self.set_state(LinkState::Ready(n));
            }
            Err(why) => self.die(why),
        }
    }

    async fn on_ready_flush(&mut self) {
        if !self.ready() {
            return;
        }
        self.flush_batch().await;
        for msg in std::mem::take(&mut self.unsent) {
            let live = msg
                .id
                .as_ref()
                .is_some_and(|id| self.pending.contains_key(id));
            if live {
                self.send(msg).await;
            }
        }
    }

    async fn on_command(&mut self, cmd: Command) {
        match cmd {
            Command::Request {
                id,
                method,
                params,
                reply,
            } => {
                if let Some(why) = &self.dead {
                    let _ = reply.send(Err(Fault::Unreachable(why.clone())));
                    return;
                }
                self.pending.insert(id.clone(), Pending::Caller(reply));
                let text = jsonrpc::request(&id, method, &params);
                let msg = Outgoing { id: Some(id), text };
                if self.ready() {
                    // Notifications queued before this request go first, in order.
                    self.flush_batch().await;
                    self.send(msg).await;
                } else {
                    self.unsent.push(msg);
                }
            }
            Command::Notify(event) => {
                if self.dead.is_some() {
                    return;
                }
                if self.batch.len() >= MAX_QUEUED_NOTIFICATIONS {
                    self.batch.pop_front();
                    tracing::warn!("harness notification dropped: too many queued");
                }
                self.batch.push_back(*event);
                if self.ready() {
                    if self.batch.len() >= self.batch_size() {
                        self.flush_batch().await;
                    } else if self.batch_due.is_none() {
                        self.batch_due = Some(Instant::now() + self.cfg.batch_window);
                    }
                }
            }
            Command::Cancel(id) => {
                self.unsent.retain(|m| m.id.as_deref() != Some(id.as_str()));
                if self.pending.remove(&id).is_some() {
                    self.remember_expired(id);
                }
            }
            Command::Close(done) => {
                self.flush_batch().await;
                self.closing = Some((done, Instant::now() + CLOSE_DRAIN));
            }
        }
    }

    async fn send(&mut self, msg: Outgoing) {
        let Some(link) = &self.link else {
            return;
        };
        if link.tx.send(msg).await.is_err() {
            self.link = None;
            self.link_down("the link's writer stopped".into());
        }
    }

    async fn on_incoming(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Frame(text) => match jsonrpc::parse_inbound(&text) {
                Ok(Inbound::Response { id, outcome }) => match self.pending.remove(&id) {
                    Some(Pending::Caller(reply)) => {
                        let _ = reply.send(outcome.map_err(Fault::Rpc));
                    }
                    Some(Pending::Handshake) => {
                        self.on_handshake(outcome.map_err(Fault::Rpc));
                        self.on_ready_flush().await;
                    }
                    Some(Pending::Batch) => {
                        if let Err(e) = outcome {
                            tracing::warn!("the harness refused a batch of notifications: {e}");
                        }
                    }
                    None if self.expired.contains(&id) => {
                        tracing::debug!(%id, "late answer to a request whose caller gave up");
                    }
                    None => self.violation(format!("a response with an unknown id {id:?}")),
                },
                Ok(Inbound::Call { method, id }) => {
                    tracing::warn!(%method, "the harness called a method; ahp-wrap serves none");
                    if let Some(Id::Str(id)) = id {
                        let text = crate::jsonrpc::error_response(
                            &Value::String(id),
                            -32601,
                            "Method not found",
                        );
                        self.send(Outgoing { id: None, text }).await;
                    }
                }
                Err(e) => self.violation(e.to_string()),
            },
            Incoming::Violation(what) => self.violation(what),
            Incoming::Failed {
                id,
                reason,
                refused,
            } => match self.pending.remove(&id) {
                Some(Pending::Caller(reply)) => {
                    let _ = reply.send(Err(Fault::failed(reason, refused)));
                }
                Some(Pending::Handshake) => self.on_handshake(Err(Fault::failed(reason, refused))),
                Some(Pending::Batch) => {
                    tracing::warn!("a batch of notifications was lost: {reason}")
                }
                None => {}
            },
            Incoming::Closed(why) => {
                self.link = None;
                self.link_down(why);
            }
        }
    }

    /// The harness broke the protocol: every caller waiting on it gets the fail mode with
    /// that reason, since we cannot know which request the bad frame was meant for.
    fn violation(&mut self, what: String) {
        tracing::warn!("the harness broke the protocol: it sent {what}");
        self.last_violation = Some(what.clone());
        let callers: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Caller(_)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in callers {
            if let Some(Pending::Caller(reply)) = self.pending.remove(&id) {
                let _ = reply.send(Err(Fault::Violation(what.clone())));
            }
            self.remember_expired(id);
        }
    }

    /// The link is gone: fail what was in flight, then reconnect or give up.
    fn link_down(&mut self, why: String) {
        self.negotiated = None;
        self.handshake_due = None;
        let in_flight: Vec<(String, Pending)> = self.pending.drain().collect();
        for (id, p) in in_flight {
            match p {
                Pending::Caller(reply) => {
                    // Requests not yet sent wait for the next link; sent ones are lost.
                    if self
                        .unsent
                        .iter()
                        .any(|m| m.id.as_deref() == Some(id.as_str()))
                    {
                        self.pending.insert(id, Pending::Caller(reply));
                    } else {
                        let _ = reply.send(Err(Fault::Closed(why.clone())));
                    }
                }
                Pending::Batch => tracing::warn!("a batch of notifications was lost: {why}"),
                Pending::Handshake => {}
            }
        }
        if self.spec.reconnects() && self.closing.is_none() {
            tracing::warn!(
                "harness link down ({why}); retrying in {} ms",
                self.backoff.as_millis()
            );
            self.set_state(LinkState::Down(why));
            self.retry_at = Some(Instant::now() + self.backoff);
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        } else {
            self.die(why);
        }
    }

    fn die(&mut self, why: String) {
        self.die_as(why.clone(), LinkState::Dead(why));
    }

    /// Gives up for good, the link's state saying why.
    fn die_as(&mut self, why: String, state: LinkState) {
        tracing::warn!("harness unusable: {why}");
        self.link = None;
        self.negotiated = None;
        for (_, p) in self.pending.drain() {
            if let Pending::Caller(reply) = p {
                let _ = reply.send(Err(Fault::Unreachable(why.clone())));
            }
        }
        self.unsent.clear();
        self.batch.clear();
        self.set_state(state);
        self.dead = Some(why);
    }

    fn remember_expired(&mut self, id: String) {
        if self.expired.len() >= MAX_EXPIRED {
            self.expired.pop_front();
        }
        self.expired.push_back(id);
    }

    async fn finish(mut self) {
        if let Some(mut link) = self.link.take() {
            drop(link.tx);
            // Give a stdio harness a moment to read what is left, see EOF and exit on its
            // own: past the transport's grace (1 s) it is killed, and its stdout closes. A
            // harness busy on a loaded machine needed more than the half second this was.
            let _ = tokio::time::timeout(Duration::from_millis(1500), async {
                while let Some(msg) = link.rx.recv().await {
                    if matches!(msg, Incoming::Closed(_)) {
                        break;
                    }
                }
            })
            .await;
        }
        for (_, p) in self.pending.drain() {
            if let Pending::Caller(reply) = p {
                let _ = reply.send(Err(Fault::Closed("the wrapper is shutting down".into())));
            }
        }
        if let Some((done, _)) = self.closing.take() {
            let _ = done.send(());
        }
    }
}

async fn recv_link(link: &mut Option<Link>) -> Incoming {
    match link {
        Some(link) => link
            .rx
            .recv()
            .await
            .unwrap_or_else(|| Incoming::Closed("the link ended".into())),
        None => std::future::pending().await,
    }
}

async fn wait_connect(
    connecting: &mut Option<oneshot::Receiver<Result<Link, ConnectError>>>,
) -> Result<Link, ConnectError> {
    match connecting {
        Some(rx) => rx
            .await
            .unwrap_or_else(|_| Err(ConnectError("the connect task stopped".into()))),
        None => std::future::pending().await,
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
