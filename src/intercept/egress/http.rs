//! The proxy's HTTP side that is not a decision: the answers it writes itself (a refusal,
//! a bad request) and an absolute-form request forwarded in origin form.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Body, Refusal};

impl Refusal {
    pub(super) fn response(&self) -> Response<Body> {
        let (status, text) = match self.decided {
            true => (
                StatusCode::FORBIDDEN,
                format!("ahp-wrap refused this connection: {}\n", self.reason),
            ),
            false => (
                StatusCode::BAD_GATEWAY,
                format!("ahp-wrap could not connect: {}\n", self.reason),
            ),
        };
        let mut resp = plain(status, &text);
        if let Ok(v) = hyper::header::HeaderValue::from_str(&self.reason.replace(['\r', '\n'], " "))
        {
            resp.headers_mut().insert("x-ahp-wrap-refusal", v);
        }
        resp
    }
}

pub(super) fn empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

pub(super) fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let body = Full::new(Bytes::from(text.to_owned()))
        .map_err(|never| match never {})
        .boxed();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Sends an absolute-form request to `upstream` in origin form, and streams the answer back.
pub(super) async fn forward(
    mut req: Request<hyper::body::Incoming>,
    upstream: TcpStream,
) -> Result<Response<Body>, String> {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    if !req.headers().contains_key(hyper::header::HOST) {
        if let Some(a) = req
            .uri()
            .authority()
            .and_then(|a| hyper::header::HeaderValue::from_str(a.as_str()).ok())
        {
            req.headers_mut().insert(hyper::header::HOST, a);
        }
    }
    *req.uri_mut() = path
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| e.to_string())?;
    req.headers_mut().remove("proxy-connection");
    req.headers_mut().remove("proxy-authorization");
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    Ok(resp.map(|b| b.boxed()))
}
