//! The parent side of the control socket: accept shim connections, note who sent each
//! (pid, and whether it comes from the agent's tree), and answer each with what the hook
//! service renders, or with a refusal that says why.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::os::unix::fs::DirBuilderExt;
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
use crate::frameworks::Rendered;
use crate::jsonrpc::{Frame, LineCodec};

/// How long a shim may take to send its whole request once connected.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a path socket is checked for having been removed or replaced.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// A private (0700) directory for one run, removed when dropped.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a fresh private directory under `$XDG_RUNTIME_DIR` or the temp dir.
    ///
    /// As root, a base that only root can write to comes first (`$XDG_RUNTIME_DIR`, then
    /// `/run`): some agents read a configuration file only when nobody else could have
    /// written to it or to any directory above it (Gemini CLI's system settings), which a
    /// world-writable `/tmp` never passes. A framework can rely on that with
    /// [`only_root_can_write`].
    pub fn create() -> io::Result<RunDir> {
        let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_dir());
        let root_only = nix::unistd::geteuid().is_root().then(|| {
            runtime_dir
                .iter()
                .map(PathBuf::as_path)
                .chain([Path::new("/run")])
                .find(|p| p.is_dir() && only_root_can_write(p))
                .map(Path::to_path_buf)
        });
        let base = root_only
            .flatten()
            .or(runtime_dir)
            .unwrap_or_else(std::env::temp_dir);
        let path = base.join(format!("ahp-wrap-{}", crate::random_hex(8)));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(RunDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether `path` and every directory above it are owned by root and writable by no one
/// else (no group or other write bit).
pub fn only_root_can_write(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The process that sent a hook call, as the kernel vouches for it (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// 0 when the system does not say.
    pub pid: i32,
    /// Whether it comes from the agent's process tree. A valid token from elsewhere was
    /// read from the agent's environment by some other process of the same user: the call
    /// is still answered, but audited as such.
    pub descends_from_agent: bool,
}

/// Something that answers one hook call.
pub trait HookHandler: Send + Sync + 'static {
    fn handle(
        &self,
        framework: String,
        hook: String,
        cwd: PathBuf,
        payload: Vec<u8>,
        peer: Peer,
    ) -> impl Future<Output = Rendered> + Send;
}

/// Where the agent's pid goes once it runs, for the peer check.
#[derive(Clone, Default)]
pub struct AgentSlot(Arc<AtomicI32>);

impl AgentSlot {
    pub fn set(&self, pid: i32) {
        self.0.store(pid, Ordering::SeqCst);
    }
}

/// The listening control socket.
pub struct ControlServer {
    /// What the agent's hooks connect to: `@name` (abstract) or a path.
    pub address: OsString,
    pub token: String,
    listener: UnixListener,
    watched: Option<Watched>,
    agent: AgentSlot,
}

impl ControlServer {
    /// Listens on an abstract socket, or on `control.sock` inside `dir` where there is
    /// none (see [`super::endpoint`]).
    pub fn bind(dir: &RunDir) -> io::Result<ControlServer> {
        let bound = endpoint::bind(dir.path())?;
        bound.listener.set_nonblocking(true)?;
        Ok(ControlServer {
            address: bound.address,
            token: crate::random_hex(32),
            listener: UnixListener::from_std(bound.listener)?,
            watched: bound.watched,
            agent: AgentSlot::default(),
        })
    }

    /// A path socket's identity, to check once more when the run ends (the agent may end
    /// between two checks); `None` for an abstract socket, which cannot be replaced.
    pub fn watched(&self) -> Option<Watched> {
        self.watched.clone()
    }

    /// Where to put the agent's pid once it runs.
    pub fn agent_slot(&self) -> AgentSlot {
        self.agent.clone()
    }

    /// Serves connections until the future is dropped. Returns only if the path socket was
    /// removed or replaced: then hooks can no longer reach us and the run must end.
    pub async fn serve<H: HookHandler>(self, handler: Arc<H>) -> TakenOver {
        let token: Arc<str> = self.token.into();
        let uid = nix::unistd::geteuid().as_raw();
        let me = std::process::id() as i32;
        let mut watch = tokio::time::interval(WATCH_EVERY);
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
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
                    let agent = self.agent.0.load(Ordering::SeqCst);
                    Peer {
                        pid,
                        descends_from_agent: pid > 0 && tree::descends_from(pid, agent, me),
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

/// Tells a shim why it gets no answer, so its deny reason says so.
async fn refuse(mut stream: UnixStream, why: &str) {
    let _ = stream.write_all(wire::refusal(why).as_bytes()).await;
}

/// One shim's request: its header, working directory and hook payload.
struct Request {
    header: wire::RequestHeader,
    cwd: Vec<u8>,
    payload: Vec<u8>,
}

async fn connection<H: HookHandler>(
    stream: UnixStream,
    token: &str,
    handler: &H,
    peer: Peer,
) -> Result<(), String> {
    let (read, mut write) = stream.into_split();
    let Request {
        header,
        cwd,
        payload,
    } = tokio::time::timeout(REQUEST_TIMEOUT, read_request(read, &mut write, token))
        .await
        .map_err(|_| "a shim did not send its request in time".to_owned())??;
    let cwd = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&cwd));
    let rendered = handler
        .handle(header.framework, header.hook, cwd, payload, peer)
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
        .map_err(|e| format!("answering a shim: {e}"))?;
    Ok(())
}

/// Reads one request: the header line through the shared line codec, then the bytes the
/// header announces (the first of which may already sit in the codec's buffer). A wrong
/// token is refused on `write`.
async fn read_request(
    read: OwnedReadHalf,
    write: &mut OwnedWriteHalf,
    token: &str,
) -> Result<Request, String> {
    let mut lines = FramedRead::new(read, LineCodec::new(wire::MAX_HEADER));
    let line = match lines.next().await {
        Some(Ok(frame)) => frame
            .and_then(Frame::whole)
            .map_err(|e| format!("a bad request header ({e})"))?,
        Some(Err(e)) => return Err(format!("reading a request: {e}")),
        None => return Err("a shim closed the connection before its request".into()),
    };
    let text = line
        .text()
        .map_err(|_| "a request header that is not UTF-8")?;
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
        return Err("refused a request with a wrong token".to_owned());
    }
    let mut cwd = vec![0; header.cwd_len];
    body.read_exact(&mut cwd)
        .await
        .map_err(|e| format!("reading a request: {e}"))?;
    let mut payload = vec![0; header.payload_len];
    body.read_exact(&mut payload)
        .await
        .map_err(|e| format!("reading a request: {e}"))?;
    Ok(Request {
        header,
        cwd,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_root_can_write_checks_every_ancestor() {
        // /tmp is world-writable (sticky), so nothing below it passes.
        assert!(!only_root_can_write(&std::env::temp_dir().join("x")));
        assert!(!only_root_can_write(Path::new("/nonexistent/dir")));
        let dir = RunDir::create().unwrap();
        assert_eq!(
            only_root_can_write(dir.path()),
            nix::unistd::geteuid().is_root() && !dir.path().starts_with(std::env::temp_dir()),
        );
    }
}
