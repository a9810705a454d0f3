//! The engine: two pumps, client → server and server → client, each reading frames with the
//! crate's bounded [`LineCodec`] and handling them strictly in order; and how the proxy ends.
//! Frames the byte scan passes unparsed ([`unwatched::ByteScan`]) are taken from the read buffer as
//! runs, each written on whole without a copy; every other frame is looked at alone.
//!
//! Order: a pump handles one frame at a time, so a held frame holds everything behind it in
//! its direction (requests and notifications alike) until its decision, and nothing is ever
//! forwarded before its decision. The two directions are independent, each pumped by its
//! own task (on a multi-thread runtime, at once): the server's output still flows while a
//! client call waits for the gate. Memory: one frame per direction (at
//! most `max_frame` bytes) and at most `max_in_flight` request ids per direction; a peer
//! that does not read is met with backpressure, never a buffer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

mod cancel;
mod endings;
mod hold;
mod inflight;
mod unwatched;

use super::out::Out;
use super::{Decide, Direction, OnCall, Options, Protocol, Tracked};
use crate::jsonrpc::codec::{FrameReader, Next};
use crate::jsonrpc::{classify, error_response, Frame, Id, LineCodec, LineError, Message};

/// The JSON-RPC error code of every error the proxy itself answers with (MCP's SDKs use it
/// for a closed connection; JSON-RPC reserves -32000..-32099 for implementations).
pub(super) const PROXY_ERROR: i64 = -32000;

/// The four ends the proxy joins. The caller spawns the server (stderr inherited) and owns
/// it: waiting for it, and killing it if it outlives the proxy.
pub struct Streams<CR, CW, SR, SW> {
    /// What the client writes (our stdin).
    pub client_in: CR,
    /// Where the client reads (our stdout).
    pub client_out: CW,
    /// The server's stdin.
    pub server_in: SW,
    /// The server's stdout.
    pub server_out: SR,
}

/// Why the proxy ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The client closed its side (or its last frame was cut off); the server's stdin was
    /// closed and its remaining output passed on for [`Options::drain`].
    ClientClosed,
    /// Reading from or writing to the client failed.
    ClientFault(String),
    /// The server closed its stdout; requests it had not answered got an error.
    ServerClosed,
    /// The server wrote what cannot be passed on, or its stdin broke; requests it had not
    /// answered got an error.
    ServerFault(String),
    /// The shutdown future completed; requests the server had not answered got an error.
    Shutdown,
}

/// Which peer a pump lost, and why when it was not a clean end.
#[derive(Debug)]
struct Gone {
    server: bool,
    fault: Option<String>,
}

type Step = Result<(), Gone>;

/// Runs the proxy until one side ends (or `shutdown` completes), then ends the other side:
/// the client's end closes the server's stdin; the server's end answers every request it
/// left unanswered with a JSON-RPC error (the fail mode of a proxy: nothing it did not
/// answer is ever reported as done). Each direction is pumped by its own task, so that on
/// a multi-thread runtime both directions run at once.
pub async fn run<P, G, CR, CW, SR, SW>(
    protocol: Arc<P>,
    gate: Arc<G>,
    streams: Streams<CR, CW, SR, SW>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> Ended
where
    P: Protocol,
    G: Decide,
    CR: AsyncRead + Unpin + Send + 'static,
    CW: AsyncWrite + Send + 'static,
    SR: AsyncRead + Unpin + Send + 'static,
    SW: AsyncWrite + Send + 'static,
{
    let scans = [
        unwatched::ByteScan::new(protocol.methods(Direction::ToServer)),
        unwatched::ByteScan::new(protocol.methods(Direction::ToClient)),
    ];
    let counters = [Direction::ToServer, Direction::ToClient]
        .map(|dir| crate::telemetry::proxy_counters(protocol.name(), dir.name()));
    let engine = Arc::new(Engine {
        counters,
        protocol,
        gate,
        options,
        outs: [Out::new(streams.server_in), Out::new(streams.client_out)],
        pending: [Mutex::default(), Mutex::default()],
        batching: [AtomicBool::new(false), AtomicBool::new(false)],
        cancels: cancel::Cancels::default(),
        scans,
    });
    let mut to_server = Pump::start(&engine, Direction::ToServer, streams.client_in);
    let mut to_client = Pump::start(&engine, Direction::ToClient, streams.server_out);
    tokio::pin!(shutdown);
    let ended = endings::ends(&engine, &mut to_server, &mut to_client, shutdown).await;
    // Whole frames a stopped pump had queued for the client still go out.
    let _ = engine.outs[Direction::ToClient.index()].flush().await;
    ended
}

/// One direction's pump, as a task of its own; stopped when dropped.
struct Pump {
    task: tokio::task::JoinHandle<Gone>,
}

impl Pump {
    fn start<P: Protocol, G: Decide>(
        engine: &Arc<Engine<P, G>>,
        dir: Direction,
        reader: impl AsyncRead + Unpin + Send + 'static,
    ) -> Pump {
        let engine = engine.clone();
        Pump {
            task: tokio::spawn(async move { engine.pump(dir, reader).await }),
        }
    }

    /// Waits for the pump to end by itself. A pump that panicked is taken for a server
    /// fault: every request left open is then answered with an error.
    async fn ended(&mut self) -> Gone {
        match (&mut self.task).await {
            Ok(gone) => gone,
            Err(e) => Gone {
                server: true,
                fault: Some(format!("the proxy's pump failed ({e})")),
            },
        }
    }

    /// Stops the pump and waits until it has.
    async fn stop(&mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A request sent one way and not yet answered.
#[derive(Debug)]
struct InFlight {
    id: Id,
    /// Still waiting for its decision: not forwarded yet.
    held: bool,
    tracked: Option<Tracked>,
}

/// Requests in flight in one direction, keyed by the id as JSON (`1` and `"1"` differ).
type Pending = Mutex<HashMap<String, InFlight>>;

struct Engine<P, G> {
    protocol: Arc<P>,
    gate: Arc<G>,
    options: Options,
    /// Indexed by [`Direction::index`]: where frames travelling that way are written.
    outs: [Out; 2],
    /// Indexed by [`Direction::index`]: requests that travelled that way.
    pending: [Pending; 2],
    /// Indexed by [`Direction::index`]: whether the frame being handled has more read
    /// behind it, so that passing it on may be queued (see [`Out::queue`]).
    batching: [AtomicBool; 2],
    /// Held calls a peer may still cancel, by scope.
    cancels: cancel::Cancels,
    /// Indexed by [`Direction::index`]: the byte scan that passes frames unparsed.
    scans: [Option<unwatched::ByteScan>; 2],
    /// Indexed by [`Direction::index`]: frames and bytes read, when metrics are on.
    counters: [Option<crate::telemetry::FrameCounters>; 2],
}

impl<P: Protocol, G: Decide> Engine<P, G> {
    /// Reads frames travelling `dir` and handles each in turn, until a peer is gone.
    async fn pump(&self, dir: Direction, reader: impl AsyncRead + Unpin) -> Gone {
        let from_server = dir == Direction::ToClient;
        // Large reads: a stream of small frames costs one system call per buffer, not per
        // frame.
        let codec = LineCodec::new(self.options.max_frame);
        let mut frames = FrameReader::new(reader, codec, READ_CAPACITY);
        // The frames the byte scan passes, taken as runs (see `unwatched::ByteScan`).
        let scan = self.scans[dir.index()].as_ref();
        let run = |whole: &[u8]| scan.map_or(0, |q| q.passing_run(whole));
        loop {
            let step = match frames.next(run).await {
                None => Err(Gone {
                    server: from_server,
                    fault: None,
                }),
                Some(Err(e)) => Err(Gone {
                    server: from_server,
                    fault: Some(format!("reading failed: {e}")),
                }),
                Some(Ok(read)) => {
                    if let Some(counters) = &self.counters[dir.index()] {
                        match &read {
                            Next::Run(run) => {
                                counters.frames(memchr::memchr_iter(b'\n', run).count(), run.len())
                            }
                            Next::Frame(Ok(frame)) if !frame.is_cut() => {
                                counters.frames(1, frame.raw().len());
                            }
                            Next::Frame(_) => {}
                        }
                    }
                    // More whole frames already read behind whole ones: pass-through ones
                    // may be written together, once these are handled. (Never after a
                    // frame that ends the stream: what follows it must go out at once.)
                    let whole = matches!(&read, Next::Run(_))
                        || matches!(&read, Next::Frame(Ok(f)) if !f.is_cut());
                    let more = whole && memchr_newline(frames.buffered());
                    self.batching[dir.index()].store(more, Ordering::Relaxed);
                    match read {
                        Next::Run(run) => self.forward(dir, &run).await,
                        Next::Frame(Err(e)) => self.unreadable(dir, e).await,
                        Next::Frame(Ok(frame)) if frame.is_cut() => {
                            self.unreadable(dir, LineError::Cut).await
                        }
                        Next::Frame(Ok(frame)) => self.frame(dir, frame).await,
                    }
                }
            };
            let step = match step {
                Ok(()) if !self.batching[dir.index()].load(Ordering::Relaxed) => {
                    self.flush(dir).await
                }
                step => step,
            };
            if let Err(gone) = step {
                // Whole frames queued before the end still go out.
                self.batching[dir.index()].store(false, Ordering::Relaxed);
                let _ = self.flush(dir).await;
                return gone;
            }
        }
    }

    /// A frame that cannot be read whole. From the client: an oversized one is refused (its
    /// id is unknown, so the error has a null id) and the stream goes on; a cut last frame is
    /// dropped (never forwarded half-written: a server might still act on it) and ends it.
    /// From the server: either ends the proxy, since a caller would wait for it forever.
    async fn unreadable(&self, dir: Direction, e: LineError) -> Step {
        let from_server = dir == Direction::ToClient;
        match e {
            LineError::TooLong { .. } if !from_server => {
                let line = error_response(
                    &Value::Null,
                    PROXY_ERROR,
                    &format!("ahp-wrap: {e} was not passed on to the server"),
                );
                self.answer(Direction::ToClient, line).await
            }
            _ => Err(Gone {
                server: from_server,
                fault: from_server.then(|| format!("{} wrote {e}", self.protocol.server_label())),
            }),
        }
    }

    /// One whole frame: passed on as it is unless the protocol holds or watches it.
    async fn frame(&self, dir: Direction, frame: Frame) -> Step {
        if frame.is_blank() {
            return self.forward(dir, frame.raw()).await;
        }
        if let Some(step) = self.unwatched(dir, &frame).await {
            return step;
        }
        let Ok(value) = serde_json::from_slice::<Value>(frame.content()) else {
            // Not JSON (a banner, a log line): passed on as it is.
            return self.forward(dir, frame.raw()).await;
        };
        if let Value::Array(items) = &value {
            return self.batch(dir, &frame, items).await;
        }
        // Only a call `classify` will refuse needs this look (it builds the gate's event).
        let risky = malformed_call(&value) && self.would_hold(dir, &value);
        match classify(value) {
            Ok(Message::Request { id, method, params }) => {
                self.call(dir, frame, Some(id), method, params).await
            }
            Ok(Message::Notification { method, params }) => {
                self.call(dir, frame, None, method, params).await
            }
            Ok(Message::Response { id, outcome }) => {
                let answered = self.take_answered(dir.back(), &id);
                self.forward(dir, frame.raw()).await?;
                if let Some(tracked) = answered {
                    if let Some(ev) = self.protocol.answered(dir.back(), tracked, &outcome) {
                        self.gate.notify(ev).await;
                    }
                }
                Ok(())
            }
            // Not a JSON-RPC message we can read: passed on, unless the protocol would have
            // held it (e.g. a tools/call with an object for an id): then it never goes out.
            Err(e) if risky => {
                self.refuse(dir, &Value::Null, &format!("ahp-wrap: {e}"))
                    .await
            }
            Err(_) => self.forward(dir, frame.raw()).await,
        }
    }

    /// Whether `value` looks like a call the protocol would hold.
    fn would_hold(&self, dir: Direction, value: &Value) -> bool {
        let Some(method) = value.get("method").and_then(Value::as_str) else {
            return false;
        };
        let request = value.get("id").is_some();
        matches!(
            self.protocol
                .call(dir, method, value.get("params"), request),
            OnCall::Hold(_)
        )
    }

    /// A batch (JSON-RPC 2.0 allows them; MCP dropped them in 2025-06-18): passed on as it
    /// is, untracked, unless one of its calls would be held: then all of it is refused.
    async fn batch(&self, dir: Direction, frame: &Frame, items: &[Value]) -> Step {
        if items.iter().any(|v| self.would_hold(dir, v)) {
            let why = "ahp-wrap: a batch holding a call that needs a decision is refused; \
                       send the calls one by one";
            return self.refuse(dir, &Value::Null, why).await;
        }
        self.forward(dir, frame.raw()).await
    }

    /// A request (`id` set) or a notification travelling `dir`.
    async fn call(
        &self,
        dir: Direction,
        frame: Frame,
        id: Option<Id>,
        method: String,
        params: Option<Value>,
    ) -> Step {
        let on = self
            .protocol
            .call(dir, &method, params.as_ref(), id.is_some());
        let (tracked, notify) = match on {
            OnCall::Hold(held) => return self.hold(dir, frame, id, &method, params, held).await,
            OnCall::Cancel(scope) => {
                let n = self.cancels.cancel(&scope);
                if n > 0 {
                    tracing::info!(%scope, "{method}: {n} pending decision(s) cut short");
                }
                (None, None)
            }
            OnCall::Pass => (None, None),
            OnCall::Watch(t) => (Some(t), None),
            OnCall::Notify(ev) => (None, Some(ev)),
        };
        if let Some(id) = id {
            if self.register(dir, &id, false, tracked).is_err() {
                return self.refuse_busy(dir, &id).await;
            }
        }
        self.forward(dir, frame.raw()).await?;
        if let Some(ev) = notify {
            self.gate.notify(ev).await;
        }
        Ok(())
    }

    async fn refuse_busy(&self, dir: Direction, id: &Id) -> Step {
        let why = format!(
            "ahp-wrap: more than {} requests in flight; this one was not passed on",
            self.options.max_in_flight
        );
        self.refuse(dir, &id.to_value(), &why).await
    }

    /// Answers the sender of a frame travelling `dir` with an error; nothing is forwarded.
    async fn refuse(&self, dir: Direction, id: &Value, why: &str) -> Step {
        self.answer(dir.back(), error_response(id, PROXY_ERROR, why))
            .await
    }

    /// Passes a frame on, the way it travels.
    async fn forward(&self, dir: Direction, bytes: &[u8]) -> Step {
        self.write(
            dir,
            bytes,
            self.batching[dir.index()].load(Ordering::Relaxed),
        )
        .await
    }

    /// Writes `bytes` the way `dir` goes, or queues them (see [`Out::queue`]).
    async fn write(&self, dir: Direction, bytes: &[u8], queue: bool) -> Step {
        let out = &self.outs[dir.index()];
        let written = if queue {
            out.queue(bytes).await
        } else {
            out.send(bytes).await
        };
        written.map_err(|e| Gone {
            server: dir == Direction::ToServer,
            fault: Some(format!("writing failed: {e}")),
        })
    }

    /// Writes what was queued towards `dir`.
    async fn flush(&self, dir: Direction) -> Step {
        self.outs[dir.index()].flush().await.map_err(|e| Gone {
            server: dir == Direction::ToServer,
            fault: Some(format!("writing failed: {e}")),
        })
    }

    /// Writes a message of our own (a line without its `\n`) towards `to`, at once (after
    /// whatever is queued): it may be the last thing written that way.
    async fn answer(&self, to: Direction, mut line: String) -> Step {
        line.push('\n');
        self.write(to, line.as_bytes(), false).await
    }
}

/// Whether `value` names a method but is not a call `classify` accepts (no `"jsonrpc":
/// "2.0"`, or an id that is neither a string nor a number).
fn malformed_call(value: &Value) -> bool {
    let bad_id = value
        .get("id")
        .is_some_and(|id| !(id.is_string() || id.is_number()));
    value.get("method").is_some_and(Value::is_string)
        && (bad_id || value.get("jsonrpc").and_then(Value::as_str) != Some("2.0"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps hold no invariant a panic could break halfway.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `buf` holds a newline: another whole frame is already read.
fn memchr_newline(buf: &[u8]) -> bool {
    memchr::memchr(b'\n', buf).is_some()
}

/// How much one read of a peer's stream asks for (at least). With frames passed on in runs,
/// a quarter of the 1 MiB the proxy asks for its pipes: 64 KiB reads made the pass-through
/// 8–18 % slower (BENCHMARKS.md, the fifth pass); 1 MiB reads did no better than these.
const READ_CAPACITY: usize = 256 * 1024;
