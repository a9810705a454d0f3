//! Why a policy could not be loaded ([`PolicyError`]), and the failed examples it may carry.

use std::path::PathBuf;

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A policy file (the one named, or one it `extends`) could not be read.
    #[error("read policy file {path}")]
    Io {
        /// The file as named.
        path: PathBuf,
        /// Why reading it failed.
        #[source]
        source: std::io::Error,
    },
    /// A policy is not valid TOML, or not the shape a policy has.
    #[error("parse policy {origin}")]
    Toml {
        /// Where the text came from: a file's path, or the embedded default.
        origin: String,
        /// The parser's error, with its line and column.
        #[source]
        source: toml::de::Error,
    },
    /// The policy's `version` is not one this build reads.
    #[error("unsupported policy version {0} (this build reads version 1)")]
    Version(u32),
    /// An `extends` chain that cannot be followed (a cycle, a name that is no policy).
    #[error("{0}")]
    Extends(String),
    /// A rule that parsed but cannot be compiled (a bad pattern, an unknown condition).
    #[error("rule {rule:?}: {message}")]
    InvalidRule {
        /// The rule's id.
        rule: String,
        /// What is wrong with it.
        message: String,
    },
    /// The policy's own `[[example]]`s that it does not decide as they say.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Examples(Vec<ExampleFailure>),
}

/// One example that did not behave as its rule says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleFailure {
    /// The id of the rule whose example it is.
    pub rule: String,
    /// The example's text (a command, a path, a URL), as the policy file gives it.
    pub example: String,
    /// True for a `match` example that did not match.
    pub should_match: bool,
}

impl std::fmt::Display for ExampleFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (list, does) = if self.should_match {
            ("match", "does not match")
        } else {
            ("no_match", "matches")
        };
        write!(
            f,
            "rule {:?}: {list} example {} {does}",
            self.rule, self.example
        )
    }
}
