//! The control socket's private framing: a header line, then raw bytes. Shims never parse
//! JSON; the parent does.
//!
//! ```text
//! request:  AHPW/1 <token> <framework> <hook> <cwd-len> <payload-len>\n<cwd><payload>
//! response: AHPW/1 <exit-code> <stdout-len> <stderr-len>\n<stdout><stderr>
//! refusal:  AHPW/1 refused: <why>\n   (then the parent closes the connection)
//! ```

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

/// A parsed request header.
#[derive(Debug, PartialEq, Eq)]
pub struct RequestHeader {
    pub token: String,
    pub framework: String,
    pub hook: String,
    pub cwd_len: usize,
    pub payload_len: usize,
}

/// Names of frameworks and hooks are plain words, so the header stays unambiguous.
pub fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

pub fn request_header(
    token: &str,
    framework: &str,
    hook: &str,
    cwd_len: usize,
    payload_len: usize,
) -> String {
    format!("{TAG} {token} {framework} {hook} {cwd_len} {payload_len}\n")
}

pub fn parse_request_header(line: &str) -> Result<RequestHeader, String> {
    let parts: Vec<&str> = line.trim_end_matches('\n').split(' ').collect();
    let [tag, token, framework, hook, cwd_len, payload_len] = parts[..] else {
        return Err("malformed request header".into());
    };
    if tag != TAG {
        return Err(format!("unknown protocol tag {tag:?}"));
    }
    if !is_word(framework) || !is_word(hook) {
        return Err("invalid framework or hook name".into());
    }
    let cwd_len: usize = cwd_len.parse().map_err(|_| "bad cwd length")?;
    let payload_len: usize = payload_len.parse().map_err(|_| "bad payload length")?;
    if cwd_len > MAX_CWD {
        return Err(format!("cwd over {MAX_CWD} bytes"));
    }
    if payload_len > MAX_PAYLOAD {
        return Err(format!("hook payload over {MAX_PAYLOAD} bytes"));
    }
    Ok(RequestHeader {
        token: token.to_owned(),
        framework: framework.to_owned(),
        hook: hook.to_owned(),
        cwd_len,
        payload_len,
    })
}

pub fn response_header(exit_code: i32, stdout_len: usize, stderr_len: usize) -> String {
    format!("{TAG} {exit_code} {stdout_len} {stderr_len}\n")
}

/// `(exit_code, stdout_len, stderr_len)`.
pub fn parse_response_header(line: &str) -> Result<(i32, usize, usize), String> {
    let parts: Vec<&str> = line.trim_end_matches('\n').split(' ').collect();
    let [tag, code, out, err] = parts[..] else {
        return Err("malformed answer header".into());
    };
    if tag != TAG {
        return Err(format!("unknown protocol tag {tag:?}"));
    }
    let code = code.parse().map_err(|_| "bad exit code")?;
    let out: usize = out.parse().map_err(|_| "bad stdout length")?;
    let err: usize = err.parse().map_err(|_| "bad stderr length")?;
    if out.saturating_add(err) > MAX_ANSWER {
        return Err("answer over the size limit".into());
    }
    Ok((code, out, err))
}

/// How a refusal line starts.
pub const REFUSED: &str = "AHPW/1 refused: ";

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
        let h = request_header("tok", "claude-code", "PreToolUse", 4, 10);
        assert_eq!(
            parse_request_header(&h).unwrap(),
            RequestHeader {
                token: "tok".into(),
                framework: "claude-code".into(),
                hook: "PreToolUse".into(),
                cwd_len: 4,
                payload_len: 10
            }
        );
        assert!(parse_request_header("AHPW/1 t f h 1").is_err());
        assert!(parse_request_header("AHPW/2 t f h 1 1").is_err());
        assert!(parse_request_header("AHPW/1 t f/x h 1 1").is_err());
        assert!(parse_request_header(&request_header("t", "f", "h", 1, MAX_PAYLOAD + 1)).is_err());
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
