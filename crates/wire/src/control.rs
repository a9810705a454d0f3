//! The control socket's private framing: a header line, then raw bytes. The processes that
//! call in never parse JSON; the parent does.
//!
//! ```text
//! request:  AHPW/1 <token> <kind> <scope> <name> <cwd-len> <payload-len>\n<cwd><payload>
//! response: AHPW/1 <exit-code> <stdout-len> <stderr-len>\n<stdout><stderr>
//! refusal:  AHPW/1 refused: <why>\n   (then the parent closes the connection)
//! ```
//!
//! A request's [`Kind`] says what is asked: a framework's hook call (`hook`, scope = the
//! framework, name = the hook), a command about to be executed (`exec`, scope = the
//! interceptor, name = the command), or an event a plug-in sends on its own (`event`,
//! scope = the framework, name = the event). The answer is always what the calling
//! process prints and how it exits.

/// Protocol tag on both header lines.
pub const TAG: &str = "AHPW/1";
/// Longest header line accepted (without its `\n`); both ends read it with the shared line
/// framing (`crate::jsonrpc`).
pub const MAX_HEADER: usize = 1024;
/// Largest hook payload accepted (tool outputs can be big).
pub const MAX_PAYLOAD: usize = 16 * 1024 * 1024;
/// Longest working directory accepted.
pub const MAX_CWD: usize = 4096;
/// Largest rendered answer accepted by a shim.
pub const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// What a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An agent framework's hook call, to be answered in that framework's contract.
    Hook,
    /// A command about to be executed (a PATH shim's), to be allowed, changed or refused.
    Exec,
    /// An event a plug-in inside the agent sends on its own.
    Event,
}

impl Kind {
    /// The word for this kind in a request header: `hook`, `exec` or `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Hook => "hook",
            Kind::Exec => "exec",
            Kind::Event => "event",
        }
    }

    /// The kind a header word names; `None` for any word but `hook`, `exec` or `event`.
    pub(crate) fn parse(s: &str) -> Option<Kind> {
        [Kind::Hook, Kind::Exec, Kind::Event]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// A parsed request header.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// The run's secret, handed to callers in the environment; the parent refuses the
    /// request unless it matches.
    pub token: String,
    /// Whether this is a hook call, a command about to run, or an event.
    pub kind: Kind,
    /// Who the request is for: a framework's name, or an interceptor's.
    pub scope: String,
    /// What is asked about: a hook, a command or an event name.
    pub name: String,
    /// Length in bytes of the caller's working directory, sent right after the header
    /// (at most [`MAX_CWD`]).
    pub cwd_len: usize,
    /// Length in bytes of the payload that follows the working directory (at most
    /// [`MAX_PAYLOAD`]).
    pub payload_len: usize,
}

/// What the calling process prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallerReply {
    /// Bytes the caller writes to its standard output, as is.
    pub stdout: Vec<u8>,
    /// Bytes the caller writes to its standard error, as is.
    pub stderr: Vec<u8>,
    /// The status the caller exits with.
    pub exit_code: i32,
}

/// Names of frameworks and hooks are plain words, so the header stays unambiguous.
pub fn is_word(s: &str) -> bool {
    crate::is_plain_name(s, 64, b"")
}

/// The request header line, `\n` included; the working directory and the payload follow
/// it. Checks nothing: the parent's [`parse_request_header`] does.
pub fn request_header(
    token: &str,
    kind: Kind,
    scope: &str,
    name: &str,
    cwd_len: usize,
    payload_len: usize,
) -> String {
    let kind = kind.as_str();
    format!("{TAG} {token} {kind} {scope} {name} {cwd_len} {payload_len}\n")
}

/// Why a header line of the control protocol was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The line has the wrong number of fields; names which header (`request` or `answer`).
    #[error("malformed {0} header")]
    Malformed(&'static str),
    /// The first field is not [`TAG`]; holds what was there.
    #[error("unknown protocol tag {0:?}")]
    Tag(String),
    /// The request kind is not `hook`, `exec` or `event`; holds what was there.
    #[error("unknown request kind {0:?}")]
    Kind(String),
    /// The scope or the name is not a plain word (see [`is_word`]).
    #[error("invalid scope or name")]
    Name,
    /// A length or the exit code is not a number; names which field.
    #[error("bad {0}")]
    Number(&'static str),
    /// The working directory or the payload announced is over its limit: what, and the
    /// limit in bytes.
    #[error("{0} over {1} bytes")]
    TooBig(&'static str, usize),
    /// The answer's stdout and stderr together are over [`MAX_ANSWER`].
    #[error("answer over the size limit")]
    AnswerTooBig,
}

/// Parses a request header line (a trailing `\n` is allowed) and checks the tag, the
/// kind, that scope and name are plain words, and the length limits. Does not check the
/// token.
pub fn parse_request_header(line: &str) -> Result<RequestHeader, HeaderError> {
    let parts: Vec<&str> = line.trim_end_matches('\n').split(' ').collect();
    let [tag, token, kind, scope, name, cwd_len, payload_len] = parts[..] else {
        return Err(HeaderError::Malformed("request"));
    };
    if tag != TAG {
        return Err(HeaderError::Tag(tag.to_owned()));
    }
    let kind = Kind::parse(kind).ok_or_else(|| HeaderError::Kind(kind.to_owned()))?;
    if !is_word(scope) || !is_word(name) {
        return Err(HeaderError::Name);
    }
    let number = |text: &str, what| text.parse().map_err(|_| HeaderError::Number(what));
    let cwd_len: usize = number(cwd_len, "cwd length")?;
    let payload_len: usize = number(payload_len, "payload length")?;
    if cwd_len > MAX_CWD {
        return Err(HeaderError::TooBig("cwd", MAX_CWD));
    }
    if payload_len > MAX_PAYLOAD {
        return Err(HeaderError::TooBig("hook payload", MAX_PAYLOAD));
    }
    Ok(RequestHeader {
        token: token.to_owned(),
        kind,
        scope: scope.to_owned(),
        name: name.to_owned(),
        cwd_len,
        payload_len,
    })
}

/// The response header line, `\n` included; stdout and then stderr follow it.
pub fn response_header(exit_code: i32, stdout_len: usize, stderr_len: usize) -> String {
    format!("{TAG} {exit_code} {stdout_len} {stderr_len}\n")
}

/// `(exit_code, stdout_len, stderr_len)`.
pub fn parse_response_header(line: &str) -> Result<(i32, usize, usize), HeaderError> {
    let parts: Vec<&str> = line.trim_end_matches('\n').split(' ').collect();
    let [tag, code, out, err] = parts[..] else {
        return Err(HeaderError::Malformed("answer"));
    };
    if tag != TAG {
        return Err(HeaderError::Tag(tag.to_owned()));
    }
    let code = code.parse().map_err(|_| HeaderError::Number("exit code"))?;
    let out: usize = out
        .parse()
        .map_err(|_| HeaderError::Number("stdout length"))?;
    let err: usize = err
        .parse()
        .map_err(|_| HeaderError::Number("stderr length"))?;
    if out.saturating_add(err) > MAX_ANSWER {
        return Err(HeaderError::AnswerTooBig);
    }
    Ok((code, out, err))
}

/// How a refusal line starts.
pub(crate) const REFUSED: &str = "AHPW/1 refused: ";

/// The line that tells a shim why the parent will not answer it, so that its deny reason
/// names the cause rather than a closed connection.
pub fn refusal(why: &str) -> String {
    format!("{REFUSED}{why}\n")
}

/// The cause in a refusal line, if `line` is one.
pub fn parse_refusal(line: &str) -> Option<&str> {
    line.strip_prefix(REFUSED)
        .map(|why| why.trim_end_matches('\n'))
}

/// Compares two secrets without stopping at the first difference.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_reject_junk() {
        let h = request_header("tok", Kind::Hook, "claude-code", "PreToolUse", 4, 10);
        assert_eq!(
            parse_request_header(&h).unwrap(),
            RequestHeader {
                token: "tok".into(),
                kind: Kind::Hook,
                scope: "claude-code".into(),
                name: "PreToolUse".into(),
                cwd_len: 4,
                payload_len: 10
            }
        );
        for kind in [Kind::Hook, Kind::Exec, Kind::Event] {
            let h = request_header("t", kind, "s", "n", 0, 0);
            assert_eq!(parse_request_header(&h).unwrap().kind, kind);
        }
        assert!(parse_request_header("AHPW/1 t hook f h 1").is_err());
        assert!(parse_request_header("AHPW/2 t hook f h 1 1").is_err());
        assert!(parse_request_header("AHPW/1 t hook f/x h 1 1").is_err());
        assert!(parse_request_header("AHPW/1 t spawn f h 1 1").is_err());
        let big = request_header("t", Kind::Hook, "f", "h", 1, MAX_PAYLOAD + 1);
        assert!(parse_request_header(&big).is_err());
        assert_eq!(
            parse_response_header(&response_header(2, 5, 6)).unwrap(),
            (2, 5, 6)
        );
        assert_eq!(parse_refusal(&refusal("wrong token")), Some("wrong token"));
        assert_eq!(parse_refusal(&response_header(2, 5, 6)), None);
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
