//! The host's options, checked before any I/O ([`HostOptions::from_args`]), then the host
//! they describe ([`HostOptions::start`]: reads the token file, listens).

use std::path::PathBuf;
use std::sync::Arc;

use super::auth::{Token, TokenError, Tokens};
use super::notify::Webhook;
use super::Host;

/// Why the host options cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `--host-listen` is not `http://` followed by an address; holds it as given.
    #[error("--host-listen {0:?}: expected http://ADDR (like 127.0.0.1:7800)")]
    Listen(String),
    /// `--host-listen` without any token, or a token file with none in it.
    #[error("the approvals host needs at least one client token (--host-token or --host-token-file): unauthenticated clients are refused")]
    NoTokens,
    /// A token specification is malformed, or the token file cannot be read.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// `--notify-webhook` given with no token, so there is no host to link to.
    #[error("--notify-webhook needs the approvals host (--host-token or --host-token-file)")]
    WebhookWithoutHost,
    /// The host's own listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for (`--host-listen` without `http://`).
        addr: String,
        /// The bind's error.
        #[source]
        cause: std::io::Error,
    },
}

/// The host's options as the command line gives them (`--host-listen`, `--host-token`,
/// `--host-token-file`, `--notify-webhook`, `--public-url`), before they are checked.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostRequest {
    /// `--host-listen`, still with its `http://` prefix; `None`: no listener of its own.
    pub listen: Option<String>,
    /// Each `--host-token` as given: `NAME=TOKEN[:SCOPE,...]`.
    pub tokens: Vec<String>,
    /// `--host-token-file`: one token specification a line, `#` comments.
    pub token_file: Option<PathBuf>,
    /// `--notify-webhook`: where each escalation is posted; empty counts as none.
    pub webhook: Option<String>,
    /// `--public-url`: the page's address for the webhook's link; `None`: where it listens.
    pub public_url: Option<String>,
}

/// The host, as asked for.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Its own listener (`--host-listen`), as ADDR.
    pub listen: Option<String>,
    specs: Vec<String>,
    file: Option<PathBuf>,
    webhook: Option<String>,
    public_url: Option<String>,
}

impl HostOptions {
    /// `None` when no host was asked for. Token specifications are checked here; the
    /// token file is read by [`HostOptions::start`].
    pub(crate) fn from_args(args: &HostRequest) -> Result<Option<HostOptions>, HostError> {
        let tokens = !args.tokens.is_empty() || args.token_file.is_some();
        if !tokens {
            if args.listen.is_some() {
                return Err(HostError::NoTokens);
            }
            if args.webhook.is_some() {
                return Err(HostError::WebhookWithoutHost);
            }
            return Ok(None);
        }
        for spec in &args.tokens {
            Token::parse(spec)?;
        }
        let listen = match &args.listen {
            None => None,
            Some(l) => match l.strip_prefix("http://") {
                Some(a) if !a.is_empty() => Some(a.trim_end_matches('/').to_owned()),
                _ => return Err(HostError::Listen(l.clone())),
            },
        };
        Ok(Some(HostOptions {
            listen,
            specs: args.tokens.clone(),
            file: args.token_file.clone(),
            webhook: args.webhook.clone().filter(|u| !u.is_empty()),
            public_url: args.public_url.clone(),
        }))
    }

    /// The host. `page` is where the page is served, for the webhook's link when no
    /// --public-url says otherwise.
    pub(crate) fn start(&self, page: Option<String>) -> Result<Arc<Host>, HostError> {
        let tokens = Tokens::load(&self.specs, self.file.as_deref())?;
        if tokens.is_empty() {
            return Err(HostError::NoTokens);
        }
        let link = self.public_url.clone().or(page);
        let webhook = self.webhook.clone().map(|url| Webhook::new(url, link));
        Ok(Host::new(tokens, webhook))
    }

    /// Starts the host. With `--host-listen` it gets a listener of its own: bound here,
    /// served in the background, and its page is there (returned, for the caller to say);
    /// without, `page` is where the caller serves it.
    pub(crate) async fn listen(
        &self,
        page: Option<String>,
    ) -> Result<(Arc<Host>, Option<String>), HostError> {
        let Some(addr) = &self.listen else {
            return Ok((self.start(page)?, None));
        };
        let bind = |cause| HostError::Bind {
            addr: addr.clone(),
            cause,
        };
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind)?;
        let own = format!("http://{}/", listener.local_addr().map_err(bind)?);
        let host = self.start(Some(own.clone()))?;
        tokio::spawn(super::serve_on(host.clone(), listener));
        Ok((host, Some(own)))
    }
}
