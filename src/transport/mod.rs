//! Harness transports: one file per kind, all presenting the same message link.
//!
//! Owns: reaching a harness (spawning a stdio one, connecting, HTTP/WebSocket auth) and
//! carrying whole messages both ways. Must not touch: what a message means (JSON-RPC
//! classification is `jsonrpc`/`protocol`, deadlines and fail mode are `client`); stream
//! links read lines only through the shared codec ([`crate::jsonrpc::LineCodec`]).
//!
//! A [`Link`] carries whole JSON-RPC messages as text. Stream transports (stdio, Unix
//! socket, WebSocket) keep one connection; HTTP posts one message per request and feeds the
//! response bodies back into the same inbox, so the client above never knows the difference.

mod http;
mod stdio;
mod unix;
mod ws;

use std::path::PathBuf;

use tokio::sync::mpsc;

/// Where the harness is, as given with `--harness`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HarnessSpec {
    /// `stdio:<command line>`: we spawn it and speak newline-delimited JSON on its stdio.
    Stdio {
        /// The command line split as a shell would (`shell_words`): program first, never
        /// empty.
        argv: Vec<String>,
    },
    /// `unix:<path>`: newline-delimited JSON on a Unix stream socket.
    Unix(PathBuf),
    /// `http://…` or `https://…`: one POST per message.
    Http(url::Url),
    /// `ws://…` or `wss://…`: one text frame per message.
    Ws(url::Url),
}

/// Why a `--harness` value is not usable.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// `stdio:` with no command after it; the whole `--harness` value.
    #[error("empty stdio command line in {0:?}")]
    EmptyCommand(String),
    /// The `stdio:` command line does not split (e.g. an unclosed quote); the whole value
    /// and the splitter's error.
    #[error("cannot split the stdio command line {0:?}: {1}")]
    Split(String, shell_words::ParseError),
    /// `unix:` with no path after it; the whole value.
    #[error("empty Unix socket path in {0:?}")]
    EmptyPath(String),
    /// An `http(s)://` or `ws(s)://` value that is no valid URL; the value and the parser's
    /// error.
    #[error("invalid URL {0:?}: {1}")]
    Url(String, url::ParseError),
    /// None of the four prefixes; the whole value.
    #[error("unknown harness kind in {0:?} (expected stdio:, unix:, http(s):// or ws(s)://)")]
    Unknown(String),
}

impl HarnessSpec {
    /// Parses a `--harness` value.
    pub(crate) fn parse(spec: &str) -> Result<HarnessSpec, SpecError> {
        if let Some(cmd) = spec.strip_prefix("stdio:") {
            let argv = shell_words::split(cmd).map_err(|e| SpecError::Split(spec.to_owned(), e))?;
            if argv.is_empty() {
                return Err(SpecError::EmptyCommand(spec.to_owned()));
            }
            return Ok(HarnessSpec::Stdio { argv });
        }
        if let Some(path) = spec.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(SpecError::EmptyPath(spec.to_owned()));
            }
            return Ok(HarnessSpec::Unix(PathBuf::from(path)));
        }
        let scheme = spec.split_once("://").map(|(s, _)| s);
        match scheme {
            Some("http" | "https" | "ws" | "wss") => {
                let mut url =
                    url::Url::parse(spec).map_err(|e| SpecError::Url(spec.to_owned(), e))?;
                if url.path().is_empty() || url.path() == "/" {
                    url.set_path("/ahp");
                }
                Ok(if url.scheme().starts_with("http") {
                    HarnessSpec::Http(url)
                } else {
                    HarnessSpec::Ws(url)
                })
            }
            _ => Err(SpecError::Unknown(spec.to_owned())),
        }
    }

    /// Whether a lost link is worth reconnecting (a stdio harness that exited is gone).
    pub(crate) fn reconnects(&self) -> bool {
        !matches!(self, HarnessSpec::Stdio { .. })
    }

    /// A short description for logs and audit records (no credentials).
    pub(crate) fn describe(&self) -> String {
        match self {
            HarnessSpec::Stdio { argv } => format!("stdio:{}", argv.join(" ")),
            HarnessSpec::Unix(p) => format!("unix:{}", p.display()),
            HarnessSpec::Http(u) | HarnessSpec::Ws(u) => {
                let mut u = u.clone();
                u.set_query(None);
                let _ = u.set_password(None);
                u.to_string()
            }
        }
    }
}

/// How the harness token is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthScheme {
    /// `Authorization: Bearer <token>` on HTTP, `?token=` on WebSocket.
    Bearer,
    /// `X-API-Key: <token>` on HTTP, `?api_key=` on WebSocket.
    ApiKey,
}

/// Everything a transport needs besides the spec.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// The harness token (`--token` or `AHP_WRAP_HARNESS_TOKEN`, empty taken as none): sent
    /// on HTTP and WebSocket links only; `None` sends no credentials.
    pub token: Option<String>,
    /// How `token` is presented (`--auth`, default bearer).
    pub auth: AuthScheme,
    /// The largest message we accept from the harness, in bytes.
    pub max_frame: usize,
}

/// A message to send; `id` is set for requests, so that an HTTP failure can be pinned
/// on the request it belongs to.
#[derive(Debug)]
pub(crate) struct Outgoing {
    /// The request's JSON-RPC id (the client's own, `ahpw-<kind>-<n>`); `None`
    /// for a notification, whose HTTP failure is only logged.
    pub id: Option<String>,
    /// The whole JSON-RPC message, serialized, without a trailing newline (stream
    /// transports add it).
    pub text: String,
}

/// What arrives from the harness side of a link.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// One whole message.
    Frame(String),
    /// The harness broke the framing (oversized frame, invalid UTF-8, binary frame); the
    /// link is still usable.
    Violation(String),
    /// Request `id` could not be delivered or answered (HTTP only); `refused` when the
    /// harness turned our credentials down (retrying cannot help).
    Failed {
        /// The failed request's id, as [`Outgoing::id`] gave it.
        id: String,
        /// Why, for the person (unreachable, an HTTP status, a body that broke off).
        reason: String,
        /// The harness answered 401 or 403.
        refused: bool,
    },
    /// The link is gone, and why.
    Closed(String),
}

/// A connected link.
pub(crate) struct Link {
    /// Messages to the harness; dropping it ends the link's writer (a stdio harness then
    /// sees EOF on its stdin).
    pub tx: mpsc::Sender<Outgoing>,
    /// Frames, violations, failures and the close, from the harness side.
    pub rx: mpsc::Receiver<Incoming>,
}

/// Why a link could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConnectError(pub String);

/// Opens a link to the harness.
pub(crate) async fn connect(spec: &HarnessSpec, cfg: &LinkConfig) -> Result<Link, ConnectError> {
    match spec {
        HarnessSpec::Stdio { argv } => stdio::connect(argv, cfg),
        HarnessSpec::Unix(path) => unix::connect(path, cfg).await,
        HarnessSpec::Http(url) => http::connect(url, cfg),
        HarnessSpec::Ws(url) => ws::connect(url, cfg).await,
    }
}

/// Depth of the channels between a transport's tasks and the client.
const CHANNEL_DEPTH: usize = 1024;

/// Reads newline-delimited frames from `reader` into `tx` until EOF or an error; returns
/// why it stopped (`None` when the receiver went away). Frames over `max` bytes and invalid
/// UTF-8 are reported as violations and skipped, so one bad frame cannot take the link
/// down, and memory stays bounded by `max` whatever the harness sends.
async fn pump_lines<R>(reader: R, max: usize, tx: &mpsc::Sender<Incoming>) -> Option<String>
where
    R: tokio::io::AsyncRead + Unpin,
{
    use futures_util::StreamExt;

    let codec = crate::jsonrpc::LineCodec::new(max);
    let mut frames = tokio_util::codec::FramedRead::with_capacity(reader, codec, 64 * 1024);
    loop {
        let msg = match frames.next().await {
            None => return Some("end of stream".into()),
            Some(Err(e)) => return Some(format!("read error: {e}")),
            Some(Ok(Err(e))) => Incoming::Violation(e.to_string()),
            Some(Ok(Ok(frame))) if frame.is_blank() => continue,
            Some(Ok(Ok(frame))) => {
                if frame.is_cut() {
                    // Taken as it is (a whole message is judged by its JSON); the end of
                    // the stream follows.
                    tracing::debug!("the harness ended its last frame without a newline");
                }
                match frame.text() {
                    Ok(s) => Incoming::Frame(s.to_owned()),
                    Err(e) => Incoming::Violation(e.to_string()),
                }
            }
        };
        if tx.send(msg).await.is_err() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(
            HarnessSpec::parse("stdio:python3 'my harness.py' -v").unwrap(),
            HarnessSpec::Stdio {
                argv: vec!["python3".into(), "my harness.py".into(), "-v".into()]
            }
        );
        assert_eq!(
            HarnessSpec::parse("unix:/run/h.sock").unwrap(),
            HarnessSpec::Unix("/run/h.sock".into())
        );
        let HarnessSpec::Http(u) = HarnessSpec::parse("http://127.0.0.1:7700").unwrap() else {
            panic!()
        };
        assert_eq!(u.as_str(), "http://127.0.0.1:7700/ahp");
        let HarnessSpec::Ws(u) = HarnessSpec::parse("wss://h.example/custom").unwrap() else {
            panic!()
        };
        assert_eq!(u.path(), "/custom");
        assert!(HarnessSpec::parse("stdio:").is_err());
        assert!(HarnessSpec::parse("ftp://x").is_err());
        assert!(HarnessSpec::parse("harness.py").is_err());
    }

    #[tokio::test]
    async fn line_pump_reports_oversized_and_bad_utf8_frames_and_goes_on() {
        let (tx, mut rx) = mpsc::channel(16);
        let input: &[u8] = b"{\"a\":1}\r\n\n0123456789ABCDEF\n\xff\xfe\n{\"b\":2}\n";
        let end = pump_lines(input, 10, &tx).await;
        assert_eq!(end.as_deref(), Some("end of stream"));
        drop(tx);
        let mut got = Vec::new();
        while let Some(m) = rx.recv().await {
            got.push(m);
        }
        assert_eq!(
            got,
            [
                Incoming::Frame("{\"a\":1}".into()),
                Incoming::Violation("a frame over the 10-byte limit".into()),
                Incoming::Violation("a frame that is not valid UTF-8".into()),
                Incoming::Frame("{\"b\":2}".into()),
            ]
        );
    }
}
