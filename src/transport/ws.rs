//! `ws(s)://` harness: one text frame per message over a WebSocket.

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use super::{AuthScheme, ConnectError, Incoming, Link, LinkConfig, Outgoing, CHANNEL_DEPTH};

pub(super) async fn connect(url: &url::Url, cfg: &LinkConfig) -> Result<Link, ConnectError> {
    let mut url = url.clone();
    if let Some(token) = &cfg.token {
        let key = match cfg.auth {
            AuthScheme::Bearer => "token",
            AuthScheme::ApiKey => "api_key",
        };
        url.query_pairs_mut().append_pair(key, token);
    }
    let config = WebSocketConfig {
        max_message_size: Some(cfg.max_frame),
        max_frame_size: Some(cfg.max_frame),
        ..WebSocketConfig::default()
    };
    let (stream, _resp) =
        tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), true)
            .await
            .map_err(|e| ConnectError(format!("cannot open the WebSocket: {e}")))?;
    let (mut sink, mut source) = stream.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(CHANNEL_DEPTH);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_DEPTH);

    tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            if sink.send(Message::Text(msg.text)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let max = cfg.max_frame;
    tokio::spawn(async move {
        let reason = loop {
            let incoming = match source.next().await {
                None => break "the WebSocket closed".to_owned(),
                Some(Ok(Message::Text(text))) => Incoming::Frame(text),
                Some(Ok(Message::Binary(_))) => {
                    Incoming::Violation("a binary WebSocket frame (AHP uses text)".into())
                }
                Some(Ok(Message::Close(frame))) => {
                    break match frame {
                        Some(f) => format!("the harness closed the WebSocket ({})", f.reason),
                        None => "the harness closed the WebSocket".to_owned(),
                    }
                }
                Some(Ok(_)) => continue,
                Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(e))) => {
                    // tungstenite cannot resynchronise after an oversized message.
                    let _ = in_tx
                        .send(Incoming::Violation(format!(
                            "a frame over the {max}-byte limit ({e})"
                        )))
                        .await;
                    break "the WebSocket was dropped after an oversized frame".to_owned();
                }
                Some(Err(e)) => break format!("WebSocket error: {e}"),
            };
            if in_tx.send(incoming).await.is_err() {
                return;
            }
        };
        let _ = in_tx.send(Incoming::Closed(reason)).await;
    });
    Ok(Link {
        tx: out_tx,
        rx: in_rx,
    })
}
