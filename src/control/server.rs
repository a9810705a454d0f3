//! The parent side of the control socket: accept shim connections and answer each with
//! what the hook service renders.

use std::future::Future;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::wire;
use crate::frameworks::Rendered;

/// How long a shim may take to send its whole request once connected.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Something that answers one hook call.
pub trait HookHandler: Send + Sync + 'static {
    fn handle(
        &self,
        framework: String,
        hook: String,
        cwd: PathBuf,
        payload: Vec<u8>,
    ) -> impl Future<Output = Rendered> + Send;
}

/// The listening control socket.
pub struct ControlServer {
    pub socket: PathBuf,
    pub token: String,
    listener: UnixListener,
}

impl ControlServer {
    /// Listens on `control.sock` inside `dir`.
    pub fn bind(dir: &RunDir) -> io::Result<ControlServer> {
        let socket = dir.path().join("control.sock");
        let listener = UnixListener::bind(&socket)?;
        Ok(ControlServer {
            socket,
            token: crate::random_hex(32),
            listener,
        })
    }

    /// Serves connections until the future is dropped.
    pub async fn serve<H: HookHandler>(self, handler: Arc<H>) {
        let token: Arc<str> = self.token.into();
        let uid = nix::unistd::geteuid().as_raw();
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("control socket accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            match stream.peer_cred() {
                Ok(cred) if cred.uid() == uid => {}
                Ok(cred) => {
                    tracing::warn!(
                        uid = cred.uid(),
                        "control socket: refused a peer of another user"
                    );
                    continue;
                }
                Err(e) => {
                    tracing::warn!("control socket: cannot check the peer: {e}");
                    continue;
                }
            }
            let handler = handler.clone();
            let token = token.clone();
            tokio::spawn(async move {
                if let Err(e) = connection(stream, &token, &*handler).await {
                    tracing::warn!("control socket: {e}");
                }
            });
        }
    }
}

async fn connection<H: HookHandler>(
    stream: UnixStream,
    token: &str,
    handler: &H,
) -> Result<(), String> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let request = tokio::time::timeout(REQUEST_TIMEOUT, async {
        let mut line = Vec::new();
        (&mut reader)
            .take(wire::MAX_HEADER as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| format!("reading a request: {e}"))?;
        let line = String::from_utf8(line).map_err(|_| "a request header that is not UTF-8")?;
        let header = wire::parse_request_header(&line)?;
        if !wire::same_secret(&header.token, token) {
            return Err("refused a request with a wrong token".to_owned());
        }
        let mut cwd = vec![0; header.cwd_len];
        reader
            .read_exact(&mut cwd)
            .await
            .map_err(|e| format!("reading a request: {e}"))?;
        let mut payload = vec![0; header.payload_len];
        reader
            .read_exact(&mut payload)
            .await
            .map_err(|e| format!("reading a request: {e}"))?;
        Ok::<_, String>((header, cwd, payload))
    })
    .await
    .map_err(|_| "a shim did not send its request in time".to_owned())??;
    let (header, cwd, payload) = request;
    let cwd = PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&cwd));
    let rendered = handler
        .handle(header.framework, header.hook, cwd, payload)
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
