//! The parent side of the control socket: accept connections, note who sent each (pid,
//! and whether it comes from the agent's tree), and answer each with what the run's
//! [`Handler`] says, or with a refusal that says why.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::FramedRead;

use super::endpoint::{self, TakenOver, Watched};
use super::wire;
use crate::child::tree;
use crate::jsonrpc::{Frame, LineCodec};

/// How long a shim may take to send its whole request once connected.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a path socket is checked for having been removed or replaced.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// The process that sent a hook call, as the kernel vouches for it (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// 0 when the system does not say.
    pub pid: i32,
    /// Whether it comes from the agent's process tree. A valid token from elsewhere was
    /// read from the agent's environment by some other process of the same user: the call
    /// is still answered, but audited as such.
    pub descends_from_agent: bool,
    /// Its parent's pid, when checking where it comes from read it.
    pub parent: Option<i32>,
}

/// One request that passed the checks (user, token, sizes).
#[derive(Debug)]
pub struct Request {
    /// What the caller asks (a hook call, a command to run, an event of its own): which
    /// interceptor's service answers.
    pub kind: wire::Kind,
    /// A framework's name, or an interceptor's.
    pub scope: String,
    /// A hook, a command or an event name.
    pub name: String,
    /// The calling process's working directory.
    pub cwd: PathBuf,
    /// The request's body, which the kind's service reads: a hook's payload as its
    /// framework wrote it, a PATH shim's argv and watched environment (NUL-terminated
    /// items), an inner wrapper's AHP event (JSON).
    pub payload: Vec<u8>,
    /// Who sent it, as the kernel says.
    pub peer: Peer,
}

/// What answers the run's requests.
pub trait Handler: Send + Sync + 'static {
    /// Answers one request; the answer is written back to the caller as it is.
    fn handle(&self, request: Request) -> impl Future<Output = wire::CallerReply> + Send;
}

/// Where the agent's pid goes once it runs, for the peer check.
#[derive(Clone, Default)]
pub struct AgentSlot(Arc<AtomicI32>);

impl AgentSlot {
    /// Records the agent's pid, once it runs: callers are then checked against it for
    /// `Peer::descends_from_agent`.
    pub(crate) fn set(&self, pid: i32) {
        self.0.store(pid, Ordering::SeqCst);
    }
}

/// The listening control socket.
pub struct ControlServer {
    /// What the agent's hooks connect to: `@name` (abstract) or a path.
    pub address: OsString,
    /// The per-run token (random, 32 bytes in hex) every request must carry; callers get
    /// it in `AHP_WRAP_TOKEN`.
    pub token: String,
    listener: UnixListener,
    /// The same address in the agent's network namespace, when it has one.
    extra: Option<UnixListener>,
    watched: Option<Watched>,
    agent: AgentSlot,
}

impl ControlServer {
    /// Listens on an abstract socket, or on `control.sock` inside `dir` where there is
    /// none (see [`super::endpoint`]).
    pub(crate) fn bind(dir: &Path) -> io::Result<ControlServer> {
        let bound = endpoint::bind(dir)?;
        bound.listener.set_nonblocking(true)?;
        Ok(ControlServer {
            address: bound.address,
            token: crate::random_hex(32),
            listener: UnixListener::from_std(bound.listener)?,
            extra: None,
            watched: bound.watched,
            agent: AgentSlot::default(),
        })
    }

    /// Serves `listener` as well (listening already).
    pub(crate) fn also_listen(
        &mut self,
        listener: std::os::unix::net::UnixListener,
    ) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        self.extra = Some(UnixListener::from_std(listener)?);
        Ok(())
    }

    /// A path socket's identity, to check once more when the run ends (the agent may end
    /// between two checks); `None` for an abstract socket, which cannot be replaced.
    pub(crate) fn watched(&self) -> Option<Watched> {
        self.watched.clone()
    }

    /// Where to put the agent's pid once it runs.
    pub(crate) fn agent_slot(&self) -> AgentSlot {
        self.agent.clone()
    }

    /// Serves connections until the future is dropped. Returns only if the path socket was
    /// removed or replaced: then hooks can no longer reach us and the run must end.
    pub(crate) async fn serve<H: Handler>(self, handler: Arc<H>) -> TakenOver {
        let token: Arc<str> = self.token.into();
        let uid = nix::unistd::geteuid().as_raw();
        let me = std::process::id() as i32;
        let mut watch = tokio::time::interval(WATCH_EVERY);
        loop {
            let stream = tokio::select! {
                accepted = accept_either(&self.listener, self.extra.as_ref()) => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!("control socket accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                _ = watch.tick(), if self.watched.is_some() => {
                    if let Some(Err(taken)) = self.watched.as_ref().map(Watched::check) {
                        return taken;
                    }
                    continue;
                }
            };
            let peer = match stream.peer_cred() {
                Ok(cred) if cred.uid() == uid => {
                    let pid = cred.pid().unwrap_or(0);
                    // A connection the floor's bridge made for a process of the tree (the kernel
                    // vouches for the wrapper, which connected): the caller, by the name the
                    // bridge bound it to.
                    #[cfg(target_os = "linux")]
                    let pid = match (pid == me, stream.peer_addr()) {
                        (true, Ok(from)) => from
                            .as_abstract_name()
                            .and_then(crate::child::fds::caller_named)
                            .unwrap_or(pid),
                        _ => pid,
                    };
                    let agent = self.agent.0.load(Ordering::SeqCst);
                    let (descends_from_agent, parent) = match pid > 0 {
                        true => tree::descends_from(pid, agent, me),
                        false => (false, None),
                    };
                    Peer {
                        pid,
                        descends_from_agent,
                        parent,
                    }
                }
                Ok(cred) => {
                    tracing::warn!(
                        uid = cred.uid(),
                        "control socket: refused a peer of another user"
                    );
                    tokio::spawn(refuse(stream, "another user"));
                    continue;
                }
                Err(e) => {
                    tracing::warn!("control socket: cannot check the peer: {e}");
                    continue;
                }
            };
            let handler = handler.clone();
            let token = token.clone();
            tokio::spawn(async move {
                if let Err(e) = connection(stream, &token, &*handler, peer).await {
                    tracing::warn!("control socket: {e} (pid {})", peer.pid);
                }
            });
        }
    }
}

/// The next connection on either listener.
async fn accept_either(
    first: &UnixListener,
    second: Option<&UnixListener>,
) -> io::Result<(tokio::net::UnixStream, tokio::net::unix::SocketAddr)> {
    match second {
        None => first.accept().await,
        Some(second) => tokio::select! {
            a = first.accept() => a,
            a = second.accept() => a,
        },
    }
}

/// Tells a shim why it gets no answer, so its deny reason says so.
async fn refuse(mut stream: UnixStream, why: &str) {
    let _ = stream.write_all(wire::refusal(why).as_bytes()).await;
}

/// One request as read: its header, working directory and payload.
struct Raw {
    header: wire::RequestHeader,
    cwd: Vec<u8>,
    payload: Vec<u8>,
}

/// Why one connection to the control socket was dropped (logged; the caller fails closed).
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error("a shim did not send its request in time")]
    Late,
    #[error("a bad request header ({0})")]
    BadLine(crate::jsonrpc::framing::LineError),
    #[error("reading a request: {0}")]
    Read(io::Error),
    #[error("a shim closed the connection before its request")]
    Closed,
    #[error("a request header that is not UTF-8")]
    NotUtf8,
    #[error(transparent)]
    Header(#[from] wire::HeaderError),
    #[error("refused a request with a wrong token")]
    WrongToken,
    #[error("answering a shim: {0}")]
    Answer(io::Error),
}

async fn connection<H: Handler>(
    stream: UnixStream,
    token: &str,
    handler: &H,
    peer: Peer,
) -> Result<(), ConnectionError> {
    let (read, mut write) = stream.into_split();
    let Raw {
        header,
        cwd,
        payload,
    } = tokio::time::timeout(REQUEST_TIMEOUT, read_request(read, &mut write, token))
        .await
        .map_err(|_| ConnectionError::Late)??;
    let cwd = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&cwd));
    let rendered = handler
        .handle(Request {
            kind: header.kind,
            scope: header.scope,
            name: header.name,
            cwd,
            payload,
            peer,
        })
        .await;
    let head = wire::response_header(
        rendered.exit_code,
        rendered.stdout.len(),
        rendered.stderr.len(),
    );
    let mut answer = Vec::with_capacity(head.len() + rendered.stdout.len() + rendered.stderr.len());
    answer.extend_from_slice(head.as_bytes());
    answer.extend_from_slice(&rendered.stdout);
    answer.extend_from_slice(&rendered.stderr);
    write
        .write_all(&answer)
        .await
        .map_err(ConnectionError::Answer)?;
    Ok(())
}

/// Reads one request: the header line through the shared line codec, then the bytes the
/// header announces (the first of which may already sit in the codec's buffer). A wrong
/// token is refused on `write`.
async fn read_request(
    read: OwnedReadHalf,
    write: &mut OwnedWriteHalf,
    token: &str,
) -> Result<Raw, ConnectionError> {
    let mut lines = FramedRead::new(read, LineCodec::new(wire::MAX_HEADER));
    let line = match lines.next().await {
        Some(Ok(frame)) => frame
            .and_then(Frame::whole)
            .map_err(ConnectionError::BadLine)?,
        Some(Err(e)) => return Err(ConnectionError::Read(e)),
        None => return Err(ConnectionError::Closed),
    };
    let text = line.text().map_err(|_| ConnectionError::NotUtf8)?;
    let header = wire::parse_request_header(text)?;
    let parts = lines.into_parts();
    let buffered: &[u8] = &parts.read_buf;
    let mut body = buffered.chain(parts.io);
    if !wire::same_secret(&header.token, token) {
        let _ = write
            .write_all(wire::refusal("wrong token").as_bytes())
            .await;
        // Take what the shim still sends, so that it reads the refusal rather than
        // failing on a broken pipe.
        let rest = header.cwd_len as u64 + header.payload_len as u64;
        let _ = tokio::io::copy(&mut (&mut body).take(rest), &mut tokio::io::sink()).await;
        return Err(ConnectionError::WrongToken);
    }
    let mut cwd = vec![0; header.cwd_len];
    body.read_exact(&mut cwd)
        .await
        .map_err(ConnectionError::Read)?;
    let mut payload = vec![0; header.payload_len];
    body.read_exact(&mut payload)
        .await
        .map_err(ConnectionError::Read)?;
    Ok(Raw {
        header,
        cwd,
        payload,
    })
}
