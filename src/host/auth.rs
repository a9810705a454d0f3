//! Who may use the host: named bearer tokens, each with what it allows (see only, or also
//! answer; every session, or only those under a directory).

use std::path::Path;

use crate::control::wire::same_secret;

/// What a token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    /// May approve or deny escalations (else: may only watch).
    pub approve: bool,
    /// Sees only sessions whose working directory is this directory or below it.
    pub cwd: Option<String>,
}

impl Scope {
    /// As a token file spells it: `approve` or `view`, then `cwd=DIR` when limited.
    pub(crate) fn names(&self) -> Vec<String> {
        let may = if self.approve { "approve" } else { "view" };
        let cwd = self.cwd.iter().map(|d| format!("cwd={d}"));
        std::iter::once(may.to_owned()).chain(cwd).collect()
    }
}

/// One client credential: the name the audit log records, the secret, what it allows.
#[derive(Clone)]
pub(crate) struct Token {
    /// The part before `=`: who answered, in the audit log; unique among the host's tokens.
    pub name: String,
    /// SHA-256 of the secret, hex: compared in constant time whatever the length given.
    digest: String,
    /// What the token allows; `approve` on every session unless its specification limits it.
    pub scope: Scope,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// Why a token specification was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// No `=`, or an empty name or secret; holds what precedes the first `=` (the whole
    /// specification when it has none).
    #[error("host token {0:?} is not NAME=TOKEN[:SCOPE,...]")]
    Syntax(String),
    /// A scope that is not `approve`, `view` or `cwd=` an absolute directory.
    #[error("host token {name:?}: unknown scope {scope:?} (expected approve, view or cwd=DIR)")]
    Scope {
        /// The token's name.
        name: String,
        /// The scope as written.
        scope: String,
    },
    /// The secret is under 16 characters; holds the token's name.
    #[error("host token {0:?}: the secret must be at least 16 characters")]
    Short(String),
    /// Two specifications (command line and file together) share this name.
    #[error("host token {0:?} is given twice")]
    Twice(String),
    /// `--host-token-file` cannot be read; holds its path, as displayed.
    #[error("cannot read the host token file {0}")]
    File(String, #[source] std::io::Error),
}

impl Token {
    /// `NAME=TOKEN[:SCOPE,...]`, SCOPE one of `approve` (the default), `view`, `cwd=DIR`.
    pub(crate) fn parse(spec: &str) -> Result<Token, TokenError> {
        let syntax = || TokenError::Syntax(spec.split('=').next().unwrap_or("").to_owned());
        let (name, rest) = spec.split_once('=').ok_or_else(syntax)?;
        let (secret, scopes) = rest.split_once(':').unwrap_or((rest, ""));
        if name.is_empty() || secret.is_empty() {
            return Err(syntax());
        }
        if secret.len() < 16 {
            return Err(TokenError::Short(name.to_owned()));
        }
        let mut scope = Scope {
            approve: true,
            cwd: None,
        };
        for s in scopes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match s {
                "approve" => scope.approve = true,
                "view" => scope.approve = false,
                _ => match s.strip_prefix("cwd=").filter(|d| d.starts_with('/')) {
                    Some(dir) => scope.cwd = Some(dir.trim_end_matches('/').to_owned()),
                    None => {
                        return Err(TokenError::Scope {
                            name: name.to_owned(),
                            scope: s.to_owned(),
                        })
                    }
                },
            }
        }
        Ok(Token {
            name: name.to_owned(),
            digest: digest(secret),
            scope,
        })
    }

    /// Whether a session in `cwd` is visible with this token.
    pub(crate) fn sees(&self, cwd: &str) -> bool {
        match &self.scope.cwd {
            None => true,
            Some(dir) => {
                cwd == dir || (cwd.starts_with(dir.as_str()) && cwd[dir.len()..].starts_with('/'))
            }
        }
    }
}

/// Every token the host accepts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens(Vec<Token>);

impl Tokens {
    /// From `--host-token` specifications and the lines of `--host-token-file` (blank lines
    /// and `#` comments skipped).
    pub(crate) fn load(specs: &[String], file: Option<&Path>) -> Result<Tokens, TokenError> {
        let mut all: Vec<String> = specs.to_vec();
        if let Some(f) = file {
            let text = std::fs::read_to_string(f)
                .map_err(|e| TokenError::File(f.display().to_string(), e))?;
            all.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_owned),
            );
        }
        let mut tokens: Vec<Token> = Vec::new();
        for spec in &all {
            let t = Token::parse(spec)?;
            if tokens.iter().any(|o| o.name == t.name) {
                return Err(TokenError::Twice(t.name));
            }
            tokens.push(t);
        }
        Ok(Tokens(tokens))
    }

    /// Whether no token was given: the host then refuses to start (`HostOptions::start`).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The token whose secret this is (compared in constant time, every token tried).
    pub(crate) fn check(&self, secret: &str) -> Option<&Token> {
        let given = digest(secret);
        let mut found = None;
        for t in &self.0 {
            if same_secret(&given, &t.digest) && found.is_none() {
                found = Some(t);
            }
        }
        found
    }
}

fn digest(secret: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_with_their_scopes_and_are_checked() {
        let t = Tokens::load(
            &[
                "alice=0123456789abcdef".into(),
                "bob=fedcba9876543210:view,cwd=/srv/team/".into(),
            ],
            None,
        )
        .unwrap();
        let alice = t.check("0123456789abcdef").unwrap();
        assert_eq!(alice.name, "alice");
        assert!(alice.scope.approve && alice.sees("/anywhere"));
        let bob = t.check("fedcba9876543210").unwrap();
        assert!(!bob.scope.approve);
        assert!(bob.sees("/srv/team") && bob.sees("/srv/team/x"));
        assert!(!bob.sees("/srv/teammate") && !bob.sees("/srv"));
        assert_eq!(alice.scope.names(), ["approve"]);
        assert_eq!(bob.scope.names(), ["view", "cwd=/srv/team"]);
        assert!(t.check("0123456789abcdeX").is_none());
        assert!(t.check("").is_none());
    }

    #[test]
    fn bad_specs_are_refused() {
        for bad in [
            "alice",
            "=0123456789abcdef",
            "alice=short",
            "a=0123456789abcdef:root",
        ] {
            assert!(Token::parse(bad).is_err(), "{bad}");
        }
        let twice = ["a=0123456789abcdef".into(), "a=0123456789abcdeg".into()];
        assert!(matches!(
            Tokens::load(&twice, None),
            Err(TokenError::Twice(_))
        ));
    }
}
