//! Credentials in the environment: which of the wrapper's variables the agent's tree must not
//! inherit on the floor. A token the user exported for their own tools (`GITHUB_TOKEN`,
//! `NPM_TOKEN`, a cloud key) would otherwise reach the model through a plain `env`.
//!
//! A variable is a credential by its name (a part `TOKEN`, `SECRET`, `PASSWORD`,
//! `CREDENTIALS`…, a last part `KEY` or `PAT`, or a name the cloud providers and registries
//! use) or by its value (the prefixes of known token formats, a URL with a password). Kept:
//! the wrapper's own (`AHP_WRAP_*`), and what the agent itself needs and the policy keeps
//! (patterns with `*`).
//!
//! Owns: the decision by name and value. Must not touch: the environment itself (the run
//! removes what this names when it starts the agent) or what is said about it.

use std::ffi::OsStr;

/// Parts of a name that make it a credential wherever they stand.
const PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "PRIVATE",
];

/// Last parts of a name that make it a credential (`GPG_KEY`, `MYSQL_PWD`, `GITLAB_PAT`).
const LAST: &[&str] = &["KEY", "PWD", "PAT", "AUTH"];

/// Names the cloud providers and registries use that the parts above miss.
const NAMES: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AZURE_STORAGE_CONNECTION_STRING",
    "SENTRY_DSN",
    "SLACK_WEBHOOK_URL",
];

/// Names that look like credentials and are not (the shell's working directory, a
/// tokenizer's setting, a socket).
const NOT: &[&str] = &[
    "PWD",
    "OLDPWD",
    "TOKENIZERS_PARALLELISM",
    "SSH_AUTH_SOCK",
    "GPG_TTY",
];

/// Prefixes of known token formats (GitHub, GitLab, Slack, AWS, OpenAI and Anthropic,
/// Stripe, Google, Hugging Face, npm, PyPI).
const PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xapp-",
    "AKIA",
    "ASIA",
    "sk-",
    "sk_live_",
    "rk_live_",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
];

/// Whether the variable `name`, holding `value`, carries a credential.
pub fn is_credential(name: &str, value: &OsStr) -> bool {
    let upper = name.to_ascii_uppercase();
    if NOT.contains(&upper.as_str()) {
        return false;
    }
    let parts: Vec<&str> = upper.split('_').filter(|p| !p.is_empty()).collect();
    let by_name = NAMES.contains(&upper.as_str())
        || parts.iter().any(|p| PARTS.contains(p))
        || parts.last().is_some_and(|p| LAST.contains(p));
    by_name || looks_like_token(&value.to_string_lossy())
}

/// The known token format `value` starts with (`ghp_`, `glpat-`, `npm_`…), if any.
pub(crate) fn token_prefix(value: &str) -> Option<&'static str> {
    // The longest first: `sk_live_` before `sk-`, `github_pat_` before nothing shorter.
    PREFIXES
        .iter()
        .filter(|p| value.starts_with(*p))
        .max_by_key(|p| p.len())
        .copied()
}

/// Whether `value` starts like a known token (long enough to be one), or is a URL with a
/// password in it.
fn looks_like_token(value: &str) -> bool {
    let value = value.trim();
    let token = PREFIXES
        .iter()
        .any(|p| value.starts_with(p) && value.len() >= p.len() + 16 && !value.contains(' '));
    let url_password = value.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split('/').next().unwrap_or_default();
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    });
    token || url_password
}

/// Whether `name` matches `pattern`: a name, or one with `*` for any run of characters.
pub fn matches(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty(); // no `*`: the whole name
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The names among `vars` to take out of the agent's environment: credentials that neither
/// the wrapper owns nor `keep` names, sorted.
pub(crate) fn to_remove<'a, I>(vars: I, keep: &[String]) -> Vec<String>
where
    I: IntoIterator<Item = (&'a OsStr, &'a OsStr)>,
{
    let mut names: Vec<String> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let name = name.to_str()?;
            let removed = !name.starts_with("AHP_WRAP_")
                && is_credential(name, value)
                && !keep.iter().any(|k| matches(k, name));
            removed.then(|| name.to_owned())
        })
        .collect();
    names.sort();
    names
}

/// What the agent keeps and loses of this process's environment: `keep` is its shim's
/// needs, the policy's `keep` and the run's own (`--keep-env`), in that order, each once;
/// returns it with the names removed.
pub fn of_this_environment(keep: impl IntoIterator<Item = String>) -> (Vec<String>, Vec<String>) {
    let mut kept: Vec<String> = Vec::new();
    for k in keep {
        if !kept.contains(&k) {
            kept.push(k);
        }
    }
    let vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    let vars = vars.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()));
    let removed = to_remove(vars, &kept);
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(name: &str, value: &str) -> bool {
        is_credential(name, OsStr::new(value))
    }

    #[test]
    fn credentials_are_known_by_name() {
        for name in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "NPM_TOKEN",
            "NODE_AUTH_TOKEN",
            "CARGO_REGISTRY_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AZURE_CLIENT_SECRET",
            "OPENAI_API_KEY",
            "TWINE_PASSWORD",
            "MYSQL_PWD",
            "GITLAB_PAT",
            "DOCKER_AUTH",
            "SSH_PRIVATE_KEY_FILE",
            "my_api_key",
        ] {
            assert!(credential(name, "x"), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "PWD",
            "OLDPWD",
            "TOKENIZERS_PARALLELISM",
            "SSH_AUTH_SOCK",
            "KEYMAP",
            "MAX_TOKENS_LIMIT",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            "LANG",
        ] {
            assert!(!credential(name, "x"), "{name}");
        }
    }

    #[test]
    fn credentials_are_known_by_value() {
        assert!(credential(
            "DEPLOY_CFG",
            "ghp_0123456789abcdefghijABCDEFGHIJ0123"
        ));
        assert!(credential("X", "github_pat_11ABCDEFG0123456789_abcdef"));
        assert!(credential("X", "AKIAIOSFODNN7EXAMPLE1"));
        assert!(credential("X", "sk-ant-api03-0123456789abcdef"));
        assert!(credential(
            "DATABASE_URL",
            "postgres://app:hunter2@db:5432/app"
        ));
        assert!(!credential("DATABASE_URL", "postgres://db:5432/app"));
        assert!(!credential("URL", "https://user@example.com/x"));
        assert!(!credential("MODE", "sk-"), "too short to be a token");
        assert!(!credential("EDITOR", "vim"));
    }

    #[test]
    fn patterns_keep_names() {
        assert!(matches("GITHUB_TOKEN", "GITHUB_TOKEN"));
        assert!(!matches("GITHUB_TOKEN", "GITHUB_TOKENS"));
        assert!(matches("*_API_KEY", "OPENAI_API_KEY"));
        assert!(matches("AWS_*", "AWS_SESSION_TOKEN"));
        assert!(matches("A*_*KEY", "AB_CKEY"));
        assert!(!matches("*_API_KEY", "OPENAI_KEY"));
        assert!(matches("*", "ANY"));
    }

    #[test]
    fn what_is_removed_is_a_credential_neither_ours_nor_kept() {
        let vars = [
            ("GITHUB_TOKEN", "ghp_x"),
            ("NPM_TOKEN", "x"),
            ("ANTHROPIC_API_KEY", "x"),
            ("AHP_WRAP_TOKEN", "x"),
            ("HOME", "/h"),
            ("NOTE", "glpat-0123456789abcdefghij"),
        ];
        let vars = vars.iter().map(|(k, v)| (OsStr::new(k), OsStr::new(v)));
        let removed = to_remove(vars, &["*_API_KEY".to_owned(), "NPM_TOKEN".to_owned()]);
        assert_eq!(removed, vec!["GITHUB_TOKEN", "NOTE"]);
    }
}
