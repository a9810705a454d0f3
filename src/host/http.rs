//! The host's HTTP side: the approvals page (HTML, JS and CSS compiled into the binary) at
//! `/`, and the Agent Host Protocol WebSocket endpoint at `/host` that the page, like any
//! other client, talks to.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::broadcast::error::RecvError;

use super::wire::Connection;
use super::Host;

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");

/// Largest message accepted from a client.
const MAX_MESSAGE: usize = 1024 * 1024;

/// The page and the endpoint, to merge into a router served with connect info
/// (`into_make_service_with_connect_info::<SocketAddr>`).
pub(crate) fn router(host: Arc<Host>) -> Router {
    let page = |body: &'static str, kind: &'static str| {
        get(move || async move {
            (
                [
                    ("content-type", kind),
                    ("cache-control", "no-store"),
                    ("x-frame-options", "DENY"),
                    (
                        "content-security-policy",
                        "default-src 'self'; connect-src 'self' ws: wss:",
                    ),
                ],
                body,
            )
        })
    };
    Router::new()
        .route("/", page(INDEX, "text/html; charset=utf-8"))
        .route("/app.js", page(SCRIPT, "text/javascript; charset=utf-8"))
        .route("/app.css", page(STYLE, "text/css; charset=utf-8"))
        .route("/host", get(upgrade).with_state(host))
}

/// Serves the page and the endpoint on a bound listener.
pub(crate) async fn serve_on(
    host: Arc<Host>,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let app = router(host).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app).await
}

async fn upgrade(
    State(host): State<Arc<Host>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ws: WebSocketUpgrade,
) -> Response {
    ws.max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| connection(host, socket, peer.to_string()))
        .into_response()
}

/// One client, until it leaves or falls too far behind.
async fn connection(host: Arc<Host>, mut socket: WebSocket, peer: String) {
    let mut updates = host.updates();
    let mut conn = Connection::new(host, peer);
    loop {
        tokio::select! {
            msg = socket.recv() => {
                let text = match msg {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                    Some(Ok(_)) => continue,
                };
                if let Some(answer) = conn.handle(&text) {
                    if socket.send(Message::Text(answer)).await.is_err() {
                        return;
                    }
                }
            }
            update = updates.recv() => {
                let out = match update {
                    Ok(out) => out,
                    // Too far behind to be told everything: it must reconnect and take
                    // new snapshots.
                    Err(RecvError::Lagged(_) | RecvError::Closed) => return,
                };
                if let Some(text) = conn.forward(&out) {
                    if socket.send(Message::Text(text.to_string())).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}
