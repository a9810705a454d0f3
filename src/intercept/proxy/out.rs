//! One way out of the proxy (the server's stdin, or our stdout), shared by both pumps: each
//! frame is written whole under a lock, and a write that did not finish stops all later ones.
//! Frames passed through while more are already read may be queued and written together
//! (one system call for many small frames); anything else is written at once, after them.

use std::pin::Pin;

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// One way out, shared by both pumps: each frame is written whole under the lock.
pub(super) struct Out {
    state: tokio::sync::Mutex<OutState>,
}

struct OutState {
    /// `None` once closed.
    writer: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// A write did not finish (it failed, or its future was dropped): the peer may hold
    /// half a frame, so nothing more is written.
    broken: bool,
    /// Whole frames queued, in order, not yet written.
    queued: Vec<u8>,
}

/// Past this many queued bytes, the queue is written out.
const QUEUE_LIMIT: usize = 64 * 1024;

impl Out {
    pub(super) fn new(w: impl AsyncWrite + Send + 'static) -> Out {
        Out {
            state: tokio::sync::Mutex::new(OutState {
                writer: Some(Box::pin(w)),
                broken: false,
                queued: Vec::new(),
            }),
        }
    }

    /// Writes `bytes` now (after whatever is queued).
    pub(super) async fn send(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut s = self.state.lock().await;
        if s.queued.is_empty() {
            // Nothing before it: written from where it is, without a copy.
            return s.write(bytes).await;
        }
        s.queued.extend_from_slice(bytes);
        s.write_queued().await
    }

    /// Queues `bytes`, written with the next [`Out::send`] or [`Out::flush`] (or now, past
    /// [`QUEUE_LIMIT`]).
    pub(super) async fn queue(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut s = self.state.lock().await;
        s.queued.extend_from_slice(bytes);
        if s.queued.len() >= QUEUE_LIMIT {
            return s.write_queued().await;
        }
        Ok(())
    }

    /// Writes what is queued.
    pub(super) async fn flush(&self) -> std::io::Result<()> {
        let mut s = self.state.lock().await;
        if s.queued.is_empty() {
            return Ok(());
        }
        s.write_queued().await
    }

    /// Closes the stream (dropping it: a child's stdin is closed only then).
    pub(super) async fn close(&self) {
        let mut s = self.state.lock().await;
        if !s.queued.is_empty() {
            let _ = s.write_queued().await;
        }
        if let Some(mut w) = s.writer.take() {
            let _ = w.shutdown().await;
        }
    }
}

impl OutState {
    /// Writes the queue whole, then flushes; clears it either way.
    async fn write_queued(&mut self) -> std::io::Result<()> {
        let bytes = std::mem::take(&mut self.queued);
        let written = self.write(&bytes).await;
        // The buffer is kept for the next frames (its capacity, not its bytes).
        self.queued = bytes;
        self.queued.clear();
        written
    }

    /// Writes `bytes` whole, then flushes.
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "an earlier write did not finish",
            ));
        }
        let Some(w) = self.writer.as_mut() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        // Not cancellation-safe by nature: `broken` stays set if this future is dropped.
        self.broken = true;
        w.write_all(bytes).await?;
        w.flush().await?;
        self.broken = false;
        Ok(())
    }
}
