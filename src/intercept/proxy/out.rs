//! One way out of the proxy (the server's stdin, or our stdout), shared by both pumps: each
//! frame is written whole under a lock, and a write that did not finish stops all later ones.

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
}

impl Out {
    pub(super) fn new(w: impl AsyncWrite + Send + 'static) -> Out {
        Out {
            state: tokio::sync::Mutex::new(OutState {
                writer: Some(Box::pin(w)),
                broken: false,
            }),
        }
    }

    pub(super) async fn send(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut guard = self.state.lock().await;
        let s = &mut *guard;
        if s.broken {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "an earlier write did not finish",
            ));
        }
        let Some(w) = s.writer.as_mut() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        // Not cancellation-safe by nature: `broken` stays set if this future is dropped.
        s.broken = true;
        w.write_all(bytes).await?;
        w.flush().await?;
        s.broken = false;
        Ok(())
    }

    /// Closes the stream (dropping it: a child's stdin is closed only then).
    pub(super) async fn close(&self) {
        let mut s = self.state.lock().await;
        if let Some(mut w) = s.writer.take() {
            let _ = w.shutdown().await;
        }
    }
}
