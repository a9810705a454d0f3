//! A harness built on the reference AHP implementation (the `a3s-ahp` crate), served over
//! stdio, a Unix socket, HTTP or WebSocket. The interop tests run `ahp-wrap` against it;
//! it is also a starting point for a Rust harness.
//!
//! ```text
//! ref_harness stdio | unix <path> | http <addr> | ws <addr>
//! ```
//!
//! Policy: a blocking event whose payload mentions `BLOCK_ME` is blocked; everything else
//! is allowed. With `REF_HARNESS_LOG=<file>`, every event received (blocking or not) is
//! appended to that file as one JSON line.

use std::io::Write;
use std::sync::Arc;

use a3s_ahp::server::EventHandler;
use a3s_ahp::transport::http::HttpServer;
use a3s_ahp::transport::websocket::WebSocketServer;
use a3s_ahp::{AhpEvent, AhpNotification, AhpRequest, AhpServer, Decision};
use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Policy;

fn log(kind: &str, event: &AhpEvent) {
    if let Ok(path) = std::env::var("REF_HARNESS_LOG") {
        let line = serde_json::json!({"kind": kind, "event": event});
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write per line: events arrive on several threads, and `writeln!` writes
            // the line and its newline separately, so lines could interleave.
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

#[async_trait]
impl EventHandler for Policy {
    async fn handle_event(&self, event: &AhpEvent) -> a3s_ahp::Result<Decision> {
        log("request", event);
        if event.payload.to_string().contains("BLOCK_ME") {
            return Ok(Decision::Block {
                reason: "reference harness: payload mentions BLOCK_ME".into(),
                metadata: None,
            });
        }
        Ok(Decision::Allow {
            modified_payload: None,
            metadata: None,
        })
    }

    async fn handle_notification(&self, event: &AhpEvent) -> a3s_ahp::Result<()> {
        log("notification", event);
        Ok(())
    }
}

/// The reference server's own line handling (as in `AhpServer::run_stdio`), on a socket.
#[allow(
    clippy::expect_used,
    reason = "a response of the reference crate's types always serialises"
)]
async fn serve_unix(server: Arc<AhpServer>, path: &str) -> std::io::Result<()> {
    let listener = tokio::net::UnixListener::bind(path)?;
    loop {
        let (stream, _) = listener.accept().await?;
        let server = server.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(request) = serde_json::from_str::<AhpRequest>(&line) {
                    let response = server.handle_request(request).await;
                    let mut out = serde_json::to_string(&response).expect("serializes");
                    out.push('\n');
                    if write.write_all(out.as_bytes()).await.is_err() {
                        break;
                    }
                } else if let Ok(n) = serde_json::from_str::<AhpNotification>(&line) {
                    let _ = server.handle_notification(n).await;
                }
            }
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = Arc::new(AhpServer::new(Arc::new(Policy)));
    match args.first().map(String::as_str) {
        Some("stdio") => server.run_stdio().await?,
        Some("unix") => serve_unix(server, &args[1]).await?,
        Some("http") => {
            HttpServer::new(server)
                .run(args[1].parse::<std::net::SocketAddr>()?)
                .await?
        }
        Some("ws") => {
            WebSocketServer::new(server)
                .run(args[1].parse::<std::net::SocketAddr>()?)
                .await?
        }
        _ => return Err("usage: ref_harness stdio | unix <path> | http <addr> | ws <addr>".into()),
    }
    Ok(())
}
