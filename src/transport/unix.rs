//! `unix:` harness: newline-delimited JSON over a Unix stream socket.

use std::path::Path;

use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::{pump_lines, ConnectError, Incoming, Link, LinkConfig, Outgoing, CHANNEL_DEPTH};

pub(super) async fn connect(path: &Path, cfg: &LinkConfig) -> Result<Link, ConnectError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|e| ConnectError(format!("cannot connect to {}: {e}", path.display())))?;
    let (read, mut write) = stream.into_split();
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(CHANNEL_DEPTH);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_DEPTH);

    tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.text.into_bytes();
            line.push(b'\n');
            if write.write_all(&line).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    let max = cfg.max_frame;
    tokio::spawn(async move {
        if let Some(why) = pump_lines(read, max, &in_tx).await {
            let _ = in_tx
                .send(Incoming::Closed(format!(
                    "the harness socket closed ({why})"
                )))
                .await;
        }
    });
    Ok(Link {
        tx: out_tx,
        rx: in_rx,
    })
}
