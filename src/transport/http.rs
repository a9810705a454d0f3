//! `http(s)://` harness: one POST per message; response bodies come back as frames.

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::StatusCode;
use tokio::sync::mpsc;

use super::{AuthScheme, ConnectError, Incoming, Link, LinkConfig, Outgoing, CHANNEL_DEPTH};

pub(super) fn connect(url: &url::Url, cfg: &LinkConfig) -> Result<Link, ConnectError> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| ConnectError(format!("cannot set up the HTTP client: {e}")))?;
    let mut auth: Option<(&'static str, HeaderValue)> = None;
    if let Some(token) = &cfg.token {
        let (name, value) = match cfg.auth {
            AuthScheme::Bearer => (AUTHORIZATION.as_str(), format!("Bearer {token}")),
            AuthScheme::ApiKey => ("x-api-key", token.clone()),
        };
        let mut value = HeaderValue::from_str(&value)
            .map_err(|_| ConnectError("the harness token is not a valid header value".into()))?;
        value.set_sensitive(true);
        auth = Some((name, value));
    }
    let (out_tx, mut out_rx) = mpsc::channel::<Outgoing>(CHANNEL_DEPTH);
    let (in_tx, in_rx) = mpsc::channel(CHANNEL_DEPTH);
    let url = url.clone();
    let max = cfg.max_frame;

    tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut req = client
                .post(url.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(msg.text);
            if let Some((name, value)) = &auth {
                req = req.header(*name, value.clone());
            }
            let in_tx = in_tx.clone();
            // Each message is its own exchange: requests pipeline as concurrent POSTs.
            tokio::spawn(async move {
                let result = exchange(req, max).await;
                let incoming = match (result, msg.id) {
                    (Ok(None), _) => return,
                    (Ok(Some(frame)), _) => frame,
                    (Err(e), Some(id)) => Incoming::Failed {
                        id,
                        reason: e.reason,
                        refused: e.refused,
                    },
                    (Err(e), None) => {
                        let reason = e.reason;
                        tracing::warn!("harness notification not delivered: {reason}");
                        return;
                    }
                };
                let _ = in_tx.send(incoming).await;
            });
        }
    });
    Ok(Link {
        tx: out_tx,
        rx: in_rx,
    })
}

/// Why one POST failed; `refused` when the harness turned our credentials down.
struct ExchangeError {
    reason: String,
    refused: bool,
}

impl From<String> for ExchangeError {
    fn from(reason: String) -> ExchangeError {
        ExchangeError {
            reason,
            refused: false,
        }
    }
}

/// One POST: `Ok(None)` for an empty answer (a notification's 202/204), a frame or a
/// violation for a body, `Err` when the message did not get through.
async fn exchange(
    req: reqwest::RequestBuilder,
    max: usize,
) -> Result<Option<Incoming>, ExchangeError> {
    let mut resp = req.send().await.map_err(|e| {
        ExchangeError::from(format!(
            "cannot reach the harness: {}",
            crate::error_chain(&e)
        ))
    })?;
    let status = resp.status();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(ExchangeError {
            reason: format!("the harness refused our credentials (HTTP {status})"),
            refused: true,
        });
    }
    if !status.is_success() {
        return Err(format!("the harness answered HTTP {status}").into());
    }
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Ok(Some(Incoming::Violation(format!(
            "a frame over the {max}-byte limit"
        ))));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("the harness response broke off: {}", crate::error_chain(&e)))?
    {
        if body.len() + chunk.len() > max {
            return Ok(Some(Incoming::Violation(format!(
                "a frame over the {max}-byte limit"
            ))));
        }
        body.extend_from_slice(&chunk);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    Ok(Some(match String::from_utf8(body) {
        Ok(s) => Incoming::Frame(s),
        Err(_) => Incoming::Violation("a frame that is not valid UTF-8".into()),
    }))
}
