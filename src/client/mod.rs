//! The AHP client: one actor owns the link, the handshake, pending requests and batching;
//! callers hold a cheap handle and get a decision or a [`Fault`] that names the cause.
//!
//! Owns: request/response matching, deadlines, reconnects, batching. Must not touch: the
//! wire below a whole message (`transport`, `jsonrpc`), or what a decision means for the
//! agent ([`gate`](crate::gate)).

mod actor;
mod handshake;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::protocol::jsonrpc::RpcError;
use crate::protocol::{DecisionError, Event, PROTOCOL_VERSION};
use crate::transport::{HarnessSpec, LinkConfig};

/// What the harness told us in its handshake answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Negotiated {
    /// The answer's `protocol_version`; always 2.x (another major fails the handshake).
    pub protocol_version: String,
    /// `harness_info.name`; empty when the harness gave none.
    pub harness_name: String,
    /// `harness_info.version`; empty when the harness gave none.
    pub harness_version: String,
    /// `harness_info.capabilities`: the event types and features (`batch`, ...) the
    /// harness declares; empty when it gave none.
    pub capabilities: Vec<String>,
    /// `config.timeout_ms`: the harness's deadline for one blocking event, in ms; a run
    /// keeps its own `--timeout` when that is smaller. `None` when absent or 0.
    pub timeout_ms: Option<u64>,
    /// `config.batch_size`: the most notifications one `ahp/batch` may carry; `None`: the
    /// client's default.
    pub batch_size: Option<usize>,
    /// `config.max_depth`: the deepest sub-agent nesting allowed; `None`: the run's
    /// `--max-depth` applies.
    pub max_depth: Option<u32>,
}

/// Why a request got no usable answer. Each message reads well after "because".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Fault {
    /// The deadline passed with the link up and no answer; the time allowed, in ms.
    #[error("the harness gave no answer within {0} ms")]
    Timeout(u64),
    /// There was no link to ask on (no handshake yet by the deadline, down, or given up
    /// on); why.
    #[error("the harness is unreachable: {0}")]
    Unreachable(String),
    /// The harness sent what AHP does not allow (a malformed or unexpected message); what
    /// it sent.
    #[error("the harness broke the protocol: it sent {0}")]
    Violation(String),
    /// The harness answered the request with a JSON-RPC error.
    #[error("the harness answered with an error: {0}")]
    Rpc(RpcError),
    /// The link went down, or the client stopped, with the request in flight; why.
    #[error("the harness link was lost: {0}")]
    Closed(String),
    /// The harness answered with a result that is not a valid decision for the event.
    #[error("the harness's decision is invalid: {0}")]
    Decision(#[from] DecisionError),
    /// The request itself failed (on HTTP: unreachable, an error status, a body that
    /// broke off); why.
    #[error("the request failed: {0}")]
    Transport(String),
    /// The harness turned our credentials down: the same words as `Transport`, but a
    /// reconnect cannot help, so the handshake fails for good.
    #[error("the request failed: {0}")]
    Refused(String),
}

impl Fault {
    /// A request that did not get through: refused credentials, or anything else.
    fn failed(reason: String, refused: bool) -> Fault {
        if refused {
            Fault::Refused(reason)
        } else {
            Fault::Transport(reason)
        }
    }
}

/// Settings of the client that do not come from the harness.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The transport's settings: the token, how it is sent, the largest message taken.
    pub link: LinkConfig,
    /// Session and agent ids sent in the handshake.
    pub session_id: String,
    /// The handshake's `agent_id`; a run makes one per run, `<framework>-<uuid>`.
    pub agent_id: String,
    /// `agent_info.framework` and `.version` in the handshake.
    pub framework: String,
    /// The handshake's `agent_info.version`; a run sends ahp-wrap's own version.
    pub framework_version: String,
    /// How long to wait for a batch of notifications to fill before sending it.
    pub batch_window: Duration,
}

/// The state of the link, for callers that time out and want to say why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LinkState {
    /// Not yet connected and handshaken: the state at start.
    Connecting,
    /// Handshake done; what it negotiated.
    Ready(Negotiated),
    /// Lost, reconnecting; the last error.
    Down(String),
    /// Gone for good (a stdio harness that exited, an incompatible harness).
    Dead(String),
    /// Gone for good: the harness turned our credentials down at the handshake.
    Refused(String),
}

pub(crate) enum Command {
    Request {
        id: String,
        method: &'static str,
        params: Value,
        reply: oneshot::Sender<Result<Value, Fault>>,
    },
    Notify(Box<Event>),
    Cancel(String),
    Close(oneshot::Sender<()>),
}

/// A handle on a remote harness. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    tx: mpsc::Sender<Command>,
    state: watch::Receiver<LinkState>,
    next_id: Arc<AtomicU64>,
    dropped: Arc<Mutex<u64>>,
}

/// The capabilities we declare: the event types we actually send, plus batching.
pub(crate) fn declared_capabilities() -> Vec<String> {
    let mut caps: Vec<String> = crate::protocol::EventType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    caps.extend(["query".to_owned(), "batch".to_owned()]);
    caps
}

impl Client {
    /// Starts the client actor; it connects and handshakes in the background.
    pub fn start(spec: HarnessSpec, cfg: ClientConfig) -> Client {
        let (tx, rx) = mpsc::channel(4096);
        let (state_tx, state) = watch::channel(LinkState::Connecting);
        let handshake = json!({
            "protocol_version": PROTOCOL_VERSION,
            "agent_info": {
                "framework": cfg.framework,
                "version": cfg.framework_version,
                "capabilities": declared_capabilities(),
            },
            "session_id": cfg.session_id,
            "agent_id": cfg.agent_id,
        });
        let next_id = Arc::new(AtomicU64::new(1));
        tokio::spawn(actor::Actor::new(spec, cfg, handshake, rx, state_tx).run());
        Client {
            tx,
            state,
            next_id,
            dropped: Arc::default(),
        }
    }

    /// Waits until the handshake is done (or has failed for good), at most `wait`.
    pub async fn wait_ready(&self, wait: Duration) -> Result<Negotiated, String> {
        let mut state = self.state.clone();
        let outcome = tokio::time::timeout(wait, async {
            loop {
                match &*state.borrow_and_update() {
                    LinkState::Ready(n) => return Ok(n.clone()),
                    LinkState::Dead(why) | LinkState::Refused(why) => return Err(why.clone()),
                    _ => {}
                }
                if state.changed().await.is_err() {
                    return Err("the client stopped".to_owned());
                }
            }
        })
        .await;
        match outcome {
            Ok(r) => r,
            Err(_) => Err(match &*self.state.borrow() {
                LinkState::Down(why) => why.clone(),
                _ => format!("no handshake answer within {} ms", wait.as_millis()),
            }),
        }
    }

    /// The current link state.
    pub(crate) fn state(&self) -> LinkState {
        self.state.borrow().clone()
    }

    /// Sends a blocking event and waits for the harness's `result`, until `deadline`. The
    /// event says how long that is (`metadata.timeout_ms`), so that a harness holding it
    /// for a person gives up before we do.
    pub async fn event(&self, event: &Event, deadline: Instant) -> Result<Value, Fault> {
        let left = deadline.saturating_duration_since(Instant::now());
        let params = crate::protocol::waiting(event, left);
        self.request("ahp/event", params, deadline).await
    }

    /// Sends an `ahp/query` and waits for its `result`, until `deadline`.
    pub async fn query(
        &self,
        query_type: &str,
        payload: Value,
        session_id: &str,
        agent_id: &str,
        deadline: Instant,
    ) -> Result<Value, Fault> {
        let params = json!({
            "session_id": session_id,
            "agent_id": agent_id,
            "query_type": query_type,
            "payload": payload,
        });
        self.request("ahp/query", params, deadline).await
    }

    /// Queues a notification (sent alone or batched). Never waits.
    pub fn notify(&self, event: Event) {
        if self.tx.try_send(Command::Notify(Box::new(event))).is_err() {
            *self
                .dropped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
            tracing::warn!("harness notification dropped: the client queue is full");
        }
    }

    /// Flushes queued notifications and closes the link, waiting at most `wait`.
    pub async fn close(&self, wait: Duration) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Close(tx)).await.is_ok() {
            let _ = tokio::time::timeout(wait, rx).await;
        }
    }

    async fn request(
        &self,
        method: &'static str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, Fault> {
        let id = format!("ahpw-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (reply, rx) = oneshot::channel();
        let cmd = Command::Request {
            id: id.clone(),
            method,
            params,
            reply,
        };
        let budget = deadline.saturating_duration_since(Instant::now());
        let sent = tokio::time::timeout_at(deadline, self.tx.send(cmd)).await;
        if !matches!(sent, Ok(Ok(()))) {
            return Err(self.timeout_fault(budget));
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(Fault::Closed("the client stopped".into())),
            Err(_) => {
                let _ = self.tx.try_send(Command::Cancel(id));
                Err(self.timeout_fault(budget))
            }
        }
    }

    fn timeout_fault(&self, budget: Duration) -> Fault {
        match self.state() {
            LinkState::Ready(_) => Fault::Timeout((budget.as_secs_f64() * 1000.0).round() as u64),
            LinkState::Connecting => {
                Fault::Unreachable(format!("no handshake within {} ms", budget.as_millis()))
            }
            LinkState::Down(why) | LinkState::Dead(why) | LinkState::Refused(why) => {
                Fault::Unreachable(why)
            }
        }
    }
}
