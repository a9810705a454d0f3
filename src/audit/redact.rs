//! Secret redaction: replaces secret-looking strings in payloads with `[REDACTED:<kind>]`.
//!
//! Redaction keeps the text around a secret (`curl -H "Authorization: Bearer
//! [REDACTED:bearer]" https://x`) so the log still says what the agent did. It errs towards
//! hiding: a long random-looking `sk-…` string is redacted even if it is not a key. Plain
//! words (`sk`, `password`, `token`, `max_tokens=100`) are left alone.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// A pattern whose whole match is replaced, with a check that filters false positives.
struct Whole {
    kind: &'static str,
    re: Regex,
    accept: fn(&str) -> bool,
}

fn always(_: &str) -> bool {
    true
}

/// Random tokens have digits; prose joined by hyphens (`sk-learn-…`) does not.
fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

#[allow(
    clippy::expect_used,
    reason = "the redaction patterns are literals of ours"
)]
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("redaction patterns are valid")
}

/// Keys and tokens recognisable by their own shape, wherever they appear.
static WHOLE: LazyLock<Vec<Whole>> = LazyLock::new(|| {
    let w = |kind, pattern: &str, accept| Whole {
        kind,
        re: re(pattern),
        accept,
    };
    vec![
        w(
            "private-key",
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            always,
        ),
        w(
            "jwt",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
            always,
        ),
        // Before `openai-key`, which would also match it.
        w("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", always),
        w("openai-key", r"\bsk-[A-Za-z0-9_-]{20,}", has_digit),
        w("aws-key", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", always),
        w(
            "github-token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
            always,
        ),
        w("slack-token", r"\bxox[baprs]-[A-Za-z0-9-]{10,}", always),
        w("google-key", r"\bAIza[0-9A-Za-z_-]{35}", always),
    ]
});

/// Credentials in HTTP headers: `Authorization: Bearer x`, `Authorization: Basic x`,
/// `X-Api-Key: x`. Group 1 (kept) is the header up to the value, group 3 the value.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b((?:proxy-)?authorization\s*:\s*(bearer|basic|token|bot)\s+|(?:x-api-key|api-key|x-auth-token)\s*:\s*)([^\s"',;]+)"#,
    )
});

/// A bearer token outside a header (`--token-type bearer` is not one: the value needs a
/// digit and some length).
static BEARER: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]{16,}=*)"));

/// `password=…`, `DB_PASSWORD=…`, `--api-key=…`, `?token=…` in command lines and URLs.
/// The name must end in the keyword, so `max_tokens=100` is not a secret.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)\b([a-z0-9_]*?(password|passwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key)[ \t]*=[ \t]*)("[^"]*"|'[^']*'|[^\s"'&;|]+)"#,
    )
});

/// `"password": "…"` inside a string that holds JSON text (a serialized tool input).
static JSON_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)("[a-z0-9_-]*?(password|passwd|secret|token|api[_-]?key|access[_-]?key|authorization)"\s*:\s*)"(?:[^"\\]|\\.)*""#,
    )
});

/// What a keyword found in a name says about the kind of secret.
fn keyword_kind(word: &str) -> &'static str {
    let w = word.to_ascii_lowercase();
    if w.starts_with("pass") {
        "password"
    } else if w.starts_with("secret") {
        "secret"
    } else if w.starts_with("token") {
        "token"
    } else if w.starts_with("auth") {
        "authorization"
    } else {
        "api_key"
    }
}

fn marker(kind: &str) -> String {
    format!("[REDACTED:{kind}]")
}

/// Replaces the matches of `re` in `text`, keeping `text` borrowed if nothing changed.
fn apply(text: &mut Cow<'_, str>, re: &Regex, replace: impl FnMut(&Captures) -> String) {
    let replaced = match re.replace_all(text, replace) {
        Cow::Owned(s) if s != **text => s,
        _ => return,
    };
    *text = Cow::Owned(replaced);
}

/// Whether `text` may hold a secret the patterns above find: each pattern needs one of these
/// words (ASCII case aside), so a text with none is left as it is without compiling or running
/// them (most records: a run that records only its start and end compiles none).
fn may_hold_secret(text: &str) -> bool {
    const NEEDED: [&str; 18] = [
        "key",
        "token",
        "secret",
        "pass",
        "bearer",
        "authorization",
        "eyj",
        "sk-",
        "akia",
        "asia",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "xox",
        "aiza",
    ];
    let lower = text.to_ascii_lowercase();
    NEEDED.iter().any(|w| lower.contains(w))
}

/// Redacts secrets in one string; borrows when there is nothing to redact.
pub(crate) fn redact_str(input: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(input);
    if !may_hold_secret(input) {
        return text;
    }
    for pattern in WHOLE.iter() {
        apply(&mut text, &pattern.re, |c| {
            if (pattern.accept)(&c[0]) {
                marker(pattern.kind)
            } else {
                c[0].to_owned()
            }
        });
    }
    apply(&mut text, &HEADER, |c| {
        let kind = match c.get(2).map(|m| m.as_str().to_ascii_lowercase()) {
            Some(scheme) if scheme == "basic" => "basic-auth",
            Some(scheme) if scheme == "bearer" => "bearer",
            Some(_) => "token",
            None if c[1].to_ascii_lowercase().contains("key") => "api_key",
            None => "token",
        };
        format!("{}{}", &c[1], marker(kind))
    });
    apply(&mut text, &BEARER, |c| {
        if has_digit(&c[2]) {
            format!("{}{}", &c[1], marker("bearer"))
        } else {
            c[0].to_owned()
        }
    });
    apply(&mut text, &ASSIGNMENT, |c| {
        format!("{}{}", &c[1], marker(keyword_kind(&c[2])))
    });
    apply(&mut text, &JSON_TEXT, |c| {
        format!("{}\"{}\"", &c[1], marker(keyword_kind(&c[2])))
    });
    text
}

/// The kind of secret a JSON object key names, if any: the key, lowercased and without `-`
/// and `_`, ends in a secret word (`access_token`, `X-Api-Key`, `client_secret`), so that
/// `max_tokens` or `secret_name` are not secrets.
fn secret_key_kind(key: &str) -> Option<&'static str> {
    let norm: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    const ENDINGS: [(&str, &str); 8] = [
        ("password", "password"),
        ("passwd", "password"),
        ("secret", "secret"),
        ("secretkey", "secret"),
        ("token", "token"),
        ("apikey", "api_key"),
        ("accesskey", "api_key"),
        ("authorization", "authorization"),
    ];
    ENDINGS
        .iter()
        .find(|(ending, _)| norm.ends_with(ending))
        .map(|(_, kind)| *kind)
}

/// Redacts a JSON value in place: secret-looking strings anywhere, and every scalar value of
/// a key named like a secret. Object keys themselves are kept.
pub(crate) fn redact_value(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(r) = redact_str(s) {
                *s = r;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_value),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match (secret_key_kind(key), &*v) {
                    // An already redacted value stays as it is (redaction is idempotent).
                    (Some(_), Value::String(s)) if s.starts_with("[REDACTED:") => {}
                    (Some(kind), Value::String(_) | Value::Number(_) | Value::Bool(_)) => {
                        *v = Value::String(marker(kind));
                    }
                    _ => redact_value(v),
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(s: &str) -> String {
        redact_str(s).into_owned()
    }

    /// Every pattern needs a word of the pre-check: a text it lets through unread would
    /// otherwise leak.
    #[test]
    fn the_pre_check_lets_every_secret_shape_reach_the_patterns() {
        let secrets = [
            "-----BEGIN OPENSSH PRIVATE KEY-----\nabc",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.x",
            "sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx1",
            "AKIAIOSFODNN7EXAMPLE",
            "ASIAIOSFODNN7EXAMPLE",
            "ghp_0123456789abcdefghijABCDEFGHIJ0123",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "xoxb-1234567890-abcdef",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "Authorization: Basic dXNlcjpwYXNz",
            "X-Auth-Token: abcdef",
            "bearer abcdefghij0123456789",
            "DB_PASSWD=hunter2",
            "client_secret=abc",
            "ACCESS_KEY=abc",
            r#"{"authorization": "x"}"#,
        ];
        for s in secrets {
            assert!(may_hold_secret(s), "{s}");
            assert_ne!(r(s), s, "{s} is redacted");
        }
        assert!(!may_hold_secret(r#"{"command":["true"],"cwd":"/tmp"}"#));
        assert!(!may_hold_secret(
            "none of its actions went through the policy"
        ));
    }

    #[test]
    fn each_key_shape_is_redacted_in_place() {
        let cases = [
            (
                "export OPENAI_API_KEY sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx; next",
                "export OPENAI_API_KEY [REDACTED:openai-key]; next",
            ),
            (
                "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-_123 end",
                "key [REDACTED:anthropic-key] end",
            ),
            ("aws AKIAIOSFODNN7EXAMPLE x", "aws [REDACTED:aws-key] x"),
            (
                "gh ghp_0123456789abcdefghijABCDEFGHIJ0123 x",
                "gh [REDACTED:github-token] x",
            ),
            (
                "gho_0123456789abcdefghijABCDEFGHIJ0123",
                "[REDACTED:github-token]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "[REDACTED:github-token]",
            ),
            ("slack xoxb-1234567890-abcdef x", "slack [REDACTED:slack-token] x"),
            ("xoxp-1234567890-abcdef", "[REDACTED:slack-token]"),
            (
                "g AIzaSyA1234567890abcdefghijklmnopqrstuv x",
                "g [REDACTED:google-key] x",
            ),
            (
                "t eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U x",
                "t [REDACTED:jwt] x",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(r(input), want, "input: {input}");
        }
    }

    #[test]
    fn headers_keep_the_header_and_lose_the_credential() {
        assert_eq!(
            r(r#"curl -H "Authorization: Bearer abc123def456ghi789" https://x"#),
            r#"curl -H "Authorization: Bearer [REDACTED:bearer]" https://x"#
        );
        assert_eq!(
            r("authorization: basic dXNlcjpwYXNz"),
            "authorization: basic [REDACTED:basic-auth]"
        );
        assert_eq!(
            r("curl -H 'X-Api-Key: 12345abcdef' u"),
            "curl -H 'X-Api-Key: [REDACTED:api_key]' u"
        );
        assert_eq!(
            r("token is bearer AbCdEf0123456789xyz."),
            "token is bearer [REDACTED:bearer]"
        );
    }

    #[test]
    fn pem_private_keys_are_redacted_whole_even_when_cut_short() {
        let pem = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAbC=\n-----END RSA PRIVATE KEY-----\nafter";
        assert_eq!(r(pem), "before\n[REDACTED:private-key]\nafter");
        let cut = "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk";
        assert_eq!(r(cut), "x [REDACTED:private-key]");
        let public = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----";
        assert_eq!(r(public), public);
    }

    #[test]
    fn assignments_in_command_lines_keep_the_name() {
        assert_eq!(
            r("mysql --password=hunter2 -u root"),
            "mysql --password=[REDACTED:password] -u root"
        );
        assert_eq!(
            r("DB_PASSWD='a b c' GITHUB_TOKEN=xyz ./run"),
            "DB_PASSWD=[REDACTED:password] GITHUB_TOKEN=[REDACTED:token] ./run"
        );
        assert_eq!(
            r("curl 'https://x/api?token=abc&x=1' secret = s3"),
            "curl 'https://x/api?token=[REDACTED:token]&x=1' secret = [REDACTED:secret]"
        );
        assert_eq!(r("--api-key=k1"), "--api-key=[REDACTED:api_key]");
    }

    #[test]
    fn json_text_inside_a_string_is_redacted() {
        assert_eq!(
            r(r#"{"user":"bob","password":"p\"w","n":1}"#),
            r#"{"user":"bob","password":"[REDACTED:password]","n":1}"#
        );
    }

    #[test]
    fn non_secrets_are_left_intact() {
        let keep = [
            "sk is a prefix; ask-me-anything-about-this-thing",
            "pip install sk-learn-is-not-the-name-of-scikit",
            "please enter your password when asked",
            "edit /etc/passwd and /etc/shadow",
            "a token bucket; the secret of success",
            "llm --max_tokens=100 --tokens=5",
            "the bearer of bad news, the bearer instrumentality",
            "AKIA is how AWS ids start",
            "Authorization header is required",
            "ghp_short",
            "eyJ alone is not a JWT",
        ];
        for s in keep {
            assert!(matches!(redact_str(s), Cow::Borrowed(_)), "changed: {s}");
        }
    }

    #[test]
    fn json_values_of_secret_keys_are_redacted_and_others_kept() {
        let mut v = json!({
            "tool_name": "http",
            "arguments": {
                "headers": {"Authorization": "Bearer x", "X-Api-Key": "k", "Accept": "*/*"},
                "body": {"client_secret": "s", "access_token": "t", "password": 1234,
                         "max_tokens": 100, "token_count": 3, "secret_name": "prod"},
                "command": "echo sk-0123456789abcdefghijKLMN",
                "list": ["AKIAIOSFODNN7EXAMPLE", "plain"],
                "apiKey": null
            }
        });
        redact_value(&mut v);
        let want = json!({
            "tool_name": "http",
            "arguments": {
                "headers": {"Authorization": "[REDACTED:authorization]",
                            "X-Api-Key": "[REDACTED:api_key]", "Accept": "*/*"},
                "body": {"client_secret": "[REDACTED:secret]", "access_token": "[REDACTED:token]",
                         "password": "[REDACTED:password]",
                         "max_tokens": 100, "token_count": 3, "secret_name": "prod"},
                "command": "echo [REDACTED:openai-key]",
                "list": ["[REDACTED:aws-key]", "plain"],
                "apiKey": null
            }
        });
        assert_eq!(v, want);
        // Idempotent: a second pass changes nothing.
        let mut again = v.clone();
        redact_value(&mut again);
        assert_eq!(again, v);
    }
}
