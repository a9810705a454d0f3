//! The listeners of `ahp-wrap serve`: stdio, a Unix socket, HTTP and WebSocket.

#![allow(clippy::result_large_err)] // tungstenite's handshake callback signature

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request, Response as WsResponse,
};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::codec::FramedRead;

use super::Engine;
use crate::jsonrpc::LineCodec;

/// Where `serve` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Listen {
    /// `stdio`: one client, JSON-RPC lines on stdin and stdout, until EOF.
    Stdio,
    /// `unix:PATH`: a Unix socket at the path (replaced if present, mode 0600), JSON-RPC
    /// lines per connection.
    Unix(PathBuf),
    /// `http://ADDR`: one message per POST to `/ahp` (plus metrics and, when on, the
    /// approvals host); the address without a trailing `/`.
    Http(String),
    /// `ws://ADDR`: WebSocket links (announced as `/ahp`; any path is taken), one JSON-RPC
    /// message per text message; the address without a trailing `/`.
    Ws(String),
}

/// Why a listener could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// The `--listen` value (given here) is none of the four forms.
    #[error("unknown --listen {0:?} (expected stdio, unix:PATH, http://ADDR or ws://ADDR)")]
    Spec(String),
    /// Binding the socket path or address (given here), or reading the bound address, failed.
    #[error("cannot listen on {0}")]
    Bind(String, #[source] std::io::Error),
    /// Accepting or serving failed once listening; the listener's kind (`unix`, `http`, `ws`).
    #[error("{0} listener failed")]
    Serve(&'static str, #[source] std::io::Error),
}

impl Listen {
    /// Reads a `--listen` value: `stdio`, `unix:PATH` (a non-empty path), `http://ADDR` or
    /// `ws://ADDR` (trailing `/` dropped).
    pub(crate) fn parse(s: &str) -> Result<Listen, ListenError> {
        if s == "stdio" {
            return Ok(Listen::Stdio);
        }
        if let Some(p) = s.strip_prefix("unix:").filter(|p| !p.is_empty()) {
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        if let Some(a) = s.strip_prefix("http://") {
            return Ok(Listen::Http(a.trim_end_matches('/').to_owned()));
        }
        if let Some(a) = s.strip_prefix("ws://") {
            return Ok(Listen::Ws(a.trim_end_matches('/').to_owned()));
        }
        Err(ListenError::Spec(s.to_owned()))
    }
}

/// Largest message accepted from a client.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Requests of one WebSocket link decided at the same time (see `ws_connection`).
const MAX_IN_FLIGHT: usize = 256;

/// Serves until the listener fails (or, for stdio, until EOF). `ready` is called with the
/// bound address once listening (for callers that asked for port 0).
/// `host`, when given, adds the approvals page and the Agent Host Protocol endpoint to an
/// HTTP listener.
pub(crate) async fn serve(
    engine: Arc<Engine>,
    listen: Listen,
    token: Option<String>,
    host: Option<Arc<crate::host::Host>>,
    ready: impl FnOnce(String),
) -> Result<(), ListenError> {
    match listen {
        Listen::Stdio => {
            ready("stdio".into());
            lines(engine, tokio::io::stdin(), tokio::io::stdout()).await;
            Ok(())
        }
        Listen::Unix(path) => {
            let _ = std::fs::remove_file(&path);
            let listener = tokio::net::UnixListener::bind(&path)
                .map_err(|e| ListenError::Bind(path.display().to_string(), e))?;
            // Only our user may connect: the socket is the credential.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
            ready(path.display().to_string());
            loop {
                let (stream, _) = listener
                    .accept()
                    .await
                    .map_err(|e| ListenError::Serve("unix", e))?;
                let engine = engine.clone();
                tokio::spawn(async move {
                    let (r, w) = stream.into_split();
                    lines(engine, r, w).await;
                });
            }
        }
        Listen::Http(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|e| ListenError::Bind(addr.clone(), e))?;
            let local = listener
                .local_addr()
                .map_err(|e| ListenError::Bind(addr, e))?;
            let token = token.map(Arc::<str>::from);
            let mut app = axum::Router::new()
                .route("/ahp", axum::routing::post(http_message))
                .layer(axum::extract::DefaultBodyLimit::max(MAX_MESSAGE))
                .with_state((engine, token.clone()))
                .merge(crate::telemetry::router(token));
            if let Some(host) = host {
                app = app.merge(crate::host::router(host));
            }
            ready(format!("http://{local}/ahp"));
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            axum::serve(listener, app)
                .await
                .map_err(|e| ListenError::Serve("http", e))
        }
        Listen::Ws(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|e| ListenError::Bind(addr.clone(), e))?;
            let local = listener
                .local_addr()
                .map_err(|e| ListenError::Bind(addr, e))?;
            ready(format!("ws://{local}/ahp"));
            let token: Option<Arc<str>> = token.map(Arc::from);
            loop {
                let (stream, _) = listener
                    .accept()
                    .await
                    .map_err(|e| ListenError::Serve("ws", e))?;
                let engine = engine.clone();
                let token = token.clone();
                tokio::spawn(async move { ws_connection(engine, stream, token).await });
            }
        }
    }
}

/// Newline-delimited JSON on one stream; answers in order of arrival. A client that sends
/// a line over the limit is dropped; a line that is not UTF-8 is skipped.
async fn lines<R, W>(engine: Arc<Engine>, read: R, mut write: W)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut frames = FramedRead::new(read, LineCodec::new(MAX_MESSAGE));
    while let Some(next) = frames.next().await {
        let frame = match next {
            Ok(Ok(frame)) => frame,
            Ok(Err(e)) => {
                tracing::warn!("serve: dropped a client that sent {e}");
                return;
            }
            Err(_) => return,
        };
        let Ok(text) = frame.text() else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        if let Some(mut answer) = engine.handle(text).await {
            answer.push('\n');
            if write.write_all(answer.as_bytes()).await.is_err() || write.flush().await.is_err() {
                return;
            }
        }
    }
}

fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    [bearer, key]
        .into_iter()
        .flatten()
        .any(|t| crate::control::wire::same_secret(t, token))
}

async fn http_message(
    State((engine, token)): State<(Arc<Engine>, Option<Arc<str>>)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(token) = &token {
        if !authorized(&headers, token) {
            return (StatusCode::UNAUTHORIZED, "missing or wrong credentials").into_response();
        }
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return (StatusCode::BAD_REQUEST, "the body is not UTF-8").into_response();
    };
    match engine.handle(text).await {
        Some(answer) => ([("content-type", "application/json")], answer).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

async fn ws_connection(
    engine: Arc<Engine>,
    stream: tokio::net::TcpStream,
    token: Option<Arc<str>>,
) {
    let check = |req: &Request, resp: WsResponse| -> Result<WsResponse, ErrorResponse> {
        let Some(token) = &token else {
            return Ok(resp);
        };
        let query = req.uri().query().unwrap_or("");
        let ok = url::form_urlencoded::parse(query.as_bytes()).any(|(k, v)| {
            (k == "token" || k == "api_key") && crate::control::wire::same_secret(&v, token)
        }) || authorized(req.headers(), token);
        if ok {
            Ok(resp)
        } else {
            let mut denied = ErrorResponse::new(Some("missing or wrong credentials".into()));
            *denied.status_mut() = StatusCode::UNAUTHORIZED;
            Err(denied)
        }
    };
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
        max_message_size: Some(MAX_MESSAGE),
        ..Default::default()
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config)).await
    else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    // Each message is answered by its own task, so that one event waiting for a person
    // does not hold up the others on this link; answers go out as they come.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
    // At most this many requests of one link are decided at once; past it, reading the
    // link waits (backpressure), so a peer cannot make us hold unbounded work.
    let in_flight = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let writer = tokio::spawn(async move {
        while let Some(answer) = rx.recv().await {
            if sink.send(Message::Text(answer)).await.is_err() {
                return;
            }
        }
    });
    while let Some(Ok(msg)) = source.next().await {
        let Message::Text(text) = msg else {
            continue;
        };
        // Notifications are handled in order (a session's start before its events).
        let request = serde_json::from_str::<serde_json::Value>(&text)
            .is_ok_and(|v| v.get("id").is_some_and(|id| !id.is_null()));
        if !request {
            if let Some(answer) = engine.handle(&text).await {
                let _ = tx.send(answer).await;
            }
            continue;
        }
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let (engine, tx) = (engine.clone(), tx.clone());
        tokio::spawn(async move {
            let _permit = permit;
            if let Some(answer) = engine.handle(&text).await {
                let _ = tx.send(answer).await;
            }
        });
    }
    drop(tx);
    let _ = writer.await;
}
