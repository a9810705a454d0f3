//! The calling side of the control socket, blocking (no async runtime), shared by every
//! process that calls in: the hook executable, PATH shims and plug-in relays.
//! It reaches the wrapper named in its environment, makes sure the listener *is* that
//! wrapper before anything leaves, and reads the answer within a deadline.

use std::io::{self, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::wire::{self, CallerReply, Kind};
use super::{endpoint, ENV_BUDGET, ENV_PARENT_PID, ENV_SOCKET, ENV_TOKEN};
use crate::jsonrpc::framing::{self, LineError};

/// Budget when the wrapper did not say.
const DEFAULT_BUDGET_MS: u64 = 30_000;

/// Why a call to the wrapper got no answer: the caller's fail-closed answer names it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// `AHP_WRAP_SOCKET` is not set: the caller was not started under a run.
    #[error("the hook is not running under ahp-wrap (AHP_WRAP_SOCKET is not set)")]
    NoSocket,
    /// `AHP_WRAP_TOKEN` is not set; the parent takes no request without the run's token.
    #[error("the hook has no wrapper token (AHP_WRAP_TOKEN is not set)")]
    NoToken,
    /// `AHP_WRAP_PARENT_PID` is not set (or is not a number), so the listener cannot be
    /// checked; nothing was sent.
    #[error("the hook does not know its wrapper's pid (AHP_WRAP_PARENT_PID is not set)")]
    NoParent,
    /// The budget (`AHP_WRAP_HOOK_TIMEOUT_MS`, else 30 s) ran out before the call could
    /// go on.
    #[error("the hook's time ran out")]
    OutOfTime,
    /// The name to send is not a plain word, which a request header cannot carry.
    #[error("the {kind} name {name:?} is not a plain word")]
    NotAWord {
        /// The request's kind as the header spells it: `hook`, `exec` or `event`.
        kind: &'static str,
        /// The name refused.
        name: String,
    },
    /// Connecting to the control socket failed.
    #[error("the wrapper cannot be reached at {socket}: {cause}")]
    Unreachable {
        /// The socket's address as the environment gives it (`@name` or a path).
        socket: String,
        /// The connect error.
        cause: io::Error,
    },
    /// Whoever listens on the address is not the wrapper; nothing was sent.
    #[error(transparent)]
    NotTheWrapper(#[from] endpoint::ListenerError),
    /// Setting the socket's write or read timeout failed.
    #[error("{0}")]
    Socket(io::Error),
    /// Writing the request failed, and no refusal was waiting to be read.
    #[error("the wrapper did not take the hook call: {0}")]
    NotTaken(io::Error),
    /// The parent sent a refusal line instead of an answer; its cause.
    #[error("the wrapper answered \"refused: {0}\"")]
    Refused(String),
    /// Reading the answer timed out; the whole call's budget, in ms.
    #[error("the wrapper gave no answer within {0} ms")]
    NoAnswer(u64),
    /// Reading the answer failed, other than by timing out.
    #[error("the wrapper's answer broke off: {0}")]
    BrokeOff(io::Error),
    /// The connection ended before a whole answer header line.
    #[error("the wrapper closed the connection without an answer")]
    Closed,
    /// The answer's header line was over the size limit.
    #[error("the wrapper answered with {0}")]
    BadLine(LineError),
    /// The answer's header line is not UTF-8.
    #[error("the wrapper's answer is garbled")]
    Garbled,
    /// The answer's header line is not a valid response header.
    #[error(transparent)]
    Header(#[from] wire::HeaderError),
}

/// The wrapper as the environment names it, and how long a call may take.
pub(crate) struct Caller {
    socket: std::ffi::OsString,
    token: String,
    /// The wrapper's pid; read when needed, so that an unreachable socket is named first.
    parent: Option<i32>,
    /// Milliseconds a call may take, start to answer.
    pub budget_ms: u64,
    /// When the time runs out (counted from [`Caller::from_env`]).
    pub deadline: Instant,
}

impl Caller {
    /// Reads the wrapper's address, token, pid and time budget from the environment.
    pub(crate) fn from_env() -> Result<Caller, CallError> {
        let budget_ms = std::env::var(ENV_BUDGET)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_BUDGET_MS);
        let deadline = Instant::now() + Duration::from_millis(budget_ms);
        let socket = std::env::var_os(ENV_SOCKET).ok_or(CallError::NoSocket)?;
        let token = std::env::var(ENV_TOKEN).map_err(|_| CallError::NoToken)?;
        let parent = std::env::var(ENV_PARENT_PID)
            .ok()
            .and_then(|v| v.parse().ok());
        Ok(Caller {
            socket,
            token,
            parent,
            budget_ms,
            deadline,
        })
    }

    /// The time left before the deadline; an error once it has passed.
    pub(crate) fn left(&self) -> Result<Duration, CallError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(CallError::OutOfTime)
        } else {
            Ok(left)
        }
    }

    /// Sends one request and waits for its answer. An error names the cause (unreachable,
    /// refused, timed out, garbled), for the caller's own fail-closed answer.
    pub(crate) fn call(
        &self,
        kind: Kind,
        scope: &str,
        name: &str,
        cwd: &Path,
        payload: &[u8],
    ) -> Result<CallerReply, CallError> {
        if !wire::is_word(name) {
            return Err(CallError::NotAWord {
                kind: kind.as_str(),
                name: name.to_owned(),
            });
        }
        let cwd = cwd.as_os_str().as_bytes();
        let mut stream =
            endpoint::connect(&self.socket).map_err(|cause| CallError::Unreachable {
                socket: PathBuf::from(&self.socket).display().to_string(),
                cause,
            })?;
        // Before the payload leaves: whoever answers must be the wrapper itself.
        let parent = self.parent.ok_or(CallError::NoParent)?;
        endpoint::check_listener(&stream, parent)?;
        let header = wire::request_header(&self.token, kind, scope, name, cwd.len(), payload.len());
        stream
            .set_write_timeout(Some(self.left()?))
            .map_err(CallError::Socket)?;
        let mut request = Vec::with_capacity(header.len() + cwd.len() + payload.len());
        request.extend_from_slice(header.as_bytes());
        request.extend_from_slice(cwd);
        request.extend_from_slice(payload);
        // On failure, a refusal may still be waiting to be read: it names the cause better.
        let sent = stream.write_all(&request).map_err(CallError::NotTaken);
        stream
            .set_read_timeout(Some(self.left()?))
            .map_err(CallError::Socket)?;
        self.read_answer(BufReader::new(stream), sent)
    }

    /// Reads the answer (or a refusal) after the request was sent, or failed to be.
    fn read_answer(
        &self,
        mut reader: BufReader<std::os::unix::net::UnixStream>,
        sent: Result<(), CallError>,
    ) -> Result<CallerReply, CallError> {
        let budget = self.budget_ms;
        let timed_out = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                CallError::NoAnswer(budget)
            }
            _ => CallError::BrokeOff(e),
        };
        let mut line = Vec::new();
        let read = framing::read_line(&mut reader, wire::MAX_HEADER, &mut line);
        // Even a cut line may be a refusal: the parent closes right after it.
        if let Some(why) = framing::text(&line).ok().and_then(wire::parse_refusal) {
            return Err(CallError::Refused(why.to_owned()));
        }
        sent?;
        match read.map_err(timed_out)?.check(wire::MAX_HEADER) {
            Ok(true) => {}
            Ok(false) | Err(LineError::Cut) => return Err(CallError::Closed),
            Err(e) => return Err(CallError::BadLine(e)),
        }
        let line = framing::text(&line).map_err(|_| CallError::Garbled)?;
        let (exit_code, out_len, err_len) = wire::parse_response_header(line)?;
        let mut stdout = vec![0; out_len];
        let mut stderr = vec![0; err_len];
        reader.read_exact(&mut stdout).map_err(timed_out)?;
        reader.read_exact(&mut stderr).map_err(timed_out)?;
        Ok(CallerReply {
            stdout,
            stderr,
            exit_code,
        })
    }
}
