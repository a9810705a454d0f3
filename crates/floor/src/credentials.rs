//! Credentials the agent's tree uses without reading them (`[[floor.credentials]]`).
//!
//! A declared credential's real value is read by the wrapper (from its own environment, a
//! file, or a command it runs before the agent starts) and never enters the tree: the tree's
//! variable holds a placeholder instead, unique to the run and shaped like the real token
//! (its known prefix kept, each other letter or digit replaced by a random one of the same
//! kind), so that a tool checking the token's shape still takes it. The egress proxy puts the
//! real value in place of the placeholder on requests to the credential's hosts, over TLS,
//! where the credential may appear (headers, basic auth, query parameters, bodies when
//! declared); a placeholder going anywhere else is refused.
//!
//! Owns: reading the values, the placeholders, and where each may be sent. Must not touch:
//! the connections themselves (the egress proxy), what is audited or said about them.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::hosts::{HostList, PatternError, Target};
use super::spec::{resolve, CredentialSpec};

/// The request headers a credential may appear in when its entry does not say (lowercase):
/// the bearer and basic `Authorization`, GitLab's `Private-Token` and `Job-Token`, and the
/// API-key headers most services read.
pub const DEFAULT_HEADERS: &[&str] = &[
    "authorization",
    "private-token",
    "job-token",
    "x-api-key",
    "x-auth-token",
    "x-access-token",
];

/// How long a `from_command` may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Fewer random characters than this in a shaped placeholder, and the placeholder is a
/// long random one instead (a short token's shape cannot hide enough randomness).
const MIN_RANDOM: usize = 16;

/// One credential of a run: its real value, the placeholder the tree sees in its place, and
/// where the value may be sent. Its `Debug` never shows the value.
pub struct Credential {
    /// The variable the tree sees.
    pub name: String,
    /// What the tree sees in the variable, and what the proxy replaces.
    pub placeholder: String,
    value: String,
    /// Where the value came from, for a person ("the wrapper's GITHUB_TOKEN").
    pub source: String,
    /// The hosts the value may be sent to.
    pub hosts: HostList,
    /// The request headers the value may appear in (lowercase).
    pub headers: Vec<String>,
    /// Whether it may appear in HTTP basic auth.
    pub basic_auth: bool,
    /// The URL query parameters it may appear in.
    pub query: Vec<String>,
    /// Whether it may appear in request bodies.
    pub body: bool,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("hosts", &self.hosts.shown())
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// The real value (for the egress proxy, which puts it on the wire).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether the value may be sent to `target`.
    pub fn bound_to(&self, target: &Target) -> bool {
        self.hosts.matches(target)
    }

    /// Whether `bytes` hold the placeholder.
    pub fn in_bytes(&self, bytes: &[u8]) -> bool {
        memchr::memmem::find(bytes, self.placeholder.as_bytes()).is_some()
    }
}

/// The credentials of a run.
#[derive(Debug, Default)]
pub struct Credentials(Vec<Credential>);

impl Credentials {
    /// Reads the value of each of `specs` (`env` reads the wrapper's environment; `~/` and
    /// relative paths resolve against `home` and `workspace`) and makes its placeholder. An
    /// entry whose source is an unset variable is skipped in silence (the default policy
    /// declares the common ones for when they are set); any other that cannot be read is
    /// skipped and said in the second list.
    pub fn resolve(
        specs: &[CredentialSpec],
        env: &dyn Fn(&str) -> Option<String>,
        (home, workspace): (&Path, &Path),
    ) -> (Credentials, Vec<String>) {
        let mut list = Vec::new();
        let mut problems = Vec::new();
        for spec in specs {
            match one(spec, env, home, workspace) {
                Ok(Some(c)) => list.push(c),
                Ok(None) => {}
                Err(why) => problems.push(format!("credential {}: {why}", spec.env)),
            }
        }
        (Credentials(list), problems)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each credential.
    pub fn iter(&self) -> std::slice::Iter<'_, Credential> {
        self.0.iter()
    }

    /// Keeps only the credentials `keep` says yes to.
    pub fn retain(&mut self, keep: impl FnMut(&Credential) -> bool) {
        self.0.retain(keep);
    }

    /// Whether some credential may be sent to `target`.
    pub fn any_bound_to(&self, target: &Target) -> bool {
        self.0.iter().any(|c| c.bound_to(target))
    }

    /// The first credential whose placeholder `bytes` hold and that may not be sent to
    /// `target` (`None` for a target no credential may be sent to: plain HTTP).
    pub fn foreign_in(&self, bytes: &[u8], target: Option<&Target>) -> Option<&Credential> {
        self.0
            .iter()
            .find(|c| target.is_none_or(|t| !c.bound_to(t)) && c.in_bytes(bytes))
    }
}

fn one(
    spec: &CredentialSpec,
    env: &dyn Fn(&str) -> Option<String>,
    home: &Path,
    workspace: &Path,
) -> Result<Option<Credential>, CredentialError> {
    let sources = [
        spec.from_env.is_some(),
        spec.from_file.is_some(),
        spec.from_command.is_some(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        return Err(CredentialError::Sources);
    }
    let hosts = HostList::parse(&spec.hosts)?;
    if spec.hosts.is_empty() {
        return Err(CredentialError::NoHosts);
    }
    let (value, source) = if let Some(file) = &spec.from_file {
        let path = resolve(file, home, workspace);
        let text =
            std::fs::read_to_string(&path).map_err(|e| CredentialError::Read(path.clone(), e))?;
        (text, format!("the file {}", path.display()))
    } else if let Some(argv) = &spec.from_command {
        (run(argv)?, format!("`{}`", argv.join(" ")))
    } else {
        let var = spec.from_env.as_deref().unwrap_or(&spec.env);
        match env(var) {
            Some(v) => (v, format!("the wrapper's {var}")),
            None if spec.from_env.is_none() => return Ok(None),
            None => return Err(CredentialError::Unset(var.to_owned())),
        }
    };
    let value = value.trim().to_owned();
    if value.is_empty() {
        return Err(CredentialError::Empty(source));
    }
    let lower = |list: &Option<Vec<String>>, default: &[&str]| match list {
        Some(l) => l.iter().map(|h| h.to_ascii_lowercase()).collect(),
        None => default.iter().map(|h| (*h).to_owned()).collect(),
    };
    Ok(Some(Credential {
        name: spec.env.clone(),
        placeholder: placeholder(&value),
        value,
        source,
        hosts,
        headers: lower(&spec.headers, DEFAULT_HEADERS),
        basic_auth: spec.basic_auth.unwrap_or(true),
        query: spec.query.clone().unwrap_or_default(),
        body: spec.body.unwrap_or(false),
    }))
}

/// Runs `argv` (no shell), its standard output the value; within [`COMMAND_TIMEOUT`].
fn run(argv: &[String]) -> Result<String, CredentialError> {
    let (program, args) = argv.split_first().ok_or(CredentialError::NoCommand)?;
    let shown = argv.join(" ");
    // Run outside the workspace: a command that reads its directory's configuration (`git
    // credential fill`) would otherwise run what the agent may have left in the repository's.
    let dir = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .filter(|h| h.is_dir())
        .unwrap_or_else(|| "/".into());
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CredentialError::Spawn(shown.clone(), e))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CredentialError::Timeout(shown));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(CredentialError::Command(shown, e)),
        }
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out)
            .map_err(|e| CredentialError::Command(shown.clone(), e))?;
    }
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        return Err(CredentialError::Failed(
            shown,
            status,
            err.trim().to_owned(),
        ));
    }
    Ok(out)
}

/// Why a declared credential cannot be had.
#[derive(Debug, thiserror::Error)]
enum CredentialError {
    /// More than one of its sources is given.
    #[error("give one of from_env, from_file and from_command")]
    Sources,
    /// A host pattern is not one.
    #[error(transparent)]
    Hosts(#[from] PatternError),
    /// No host is named.
    #[error("`hosts` names no host it may be sent to")]
    NoHosts,
    /// Its file cannot be read.
    #[error("cannot read {}: {}", .0.display(), .1)]
    Read(std::path::PathBuf, #[source] std::io::Error),
    /// Its variable (`from_env`) is not set.
    #[error("the wrapper's {0} is not set")]
    Unset(String),
    /// Its source (as said) gives an empty value.
    #[error("{0} is empty")]
    Empty(String),
    /// `from_command` is an empty list.
    #[error("from_command is empty")]
    NoCommand,
    /// The command (as shown) cannot be started.
    #[error("cannot run `{0}`: {1}")]
    Spawn(String, #[source] std::io::Error),
    /// The command ran past [`COMMAND_TIMEOUT`].
    #[error("`{0}` ran for more than {COMMAND_TIMEOUT:?}")]
    Timeout(String),
    /// Waiting for the command or reading its output failed.
    #[error("`{0}`: {1}")]
    Command(String, #[source] std::io::Error),
    /// The command failed: its status and standard error.
    #[error("`{0}` failed ({1}): {2}")]
    Failed(String, std::process::ExitStatus, String),
}

/// A placeholder for `real`: its known prefix (`ghp_`, `glpat-`, `npm_`…) kept, each other
/// ASCII letter or digit replaced by a random one of the same kind, the rest kept; a long
/// random one when that leaves too little randomness.
pub(crate) fn placeholder(real: &str) -> String {
    let prefix = super::secrets::token_prefix(real).unwrap_or("");
    let rest = &real[prefix.len()..];
    let random = rest.chars().filter(char::is_ascii_alphanumeric).count();
    loop {
        let made = match random >= MIN_RANDOM {
            true => format!("{prefix}{}", shaped(rest)),
            false => format!("ahp-wrap-placeholder-{}", crate::random_hex(16)),
        };
        if made != real {
            return made;
        }
    }
}

/// `text` with each ASCII letter or digit replaced by a random one of the same kind.
fn shaped(text: &str) -> String {
    let mut bytes = vec![0u8; text.len()];
    getrandom::getrandom(&mut bytes).unwrap_or_default();
    text.chars()
        .zip(bytes)
        .map(|(c, r)| {
            let pick = |from: u8, n: u8| char::from(from + r % n);
            match c {
                '0'..='9' => pick(b'0', 10),
                'a'..='z' => pick(b'a', 26),
                'A'..='Z' => pick(b'A', 26),
                other => other,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(env: &str, hosts: &[&str]) -> CredentialSpec {
        CredentialSpec::new(env, hosts.iter().map(|h| (*h).to_owned()).collect())
    }

    #[test]
    fn a_placeholder_keeps_the_tokens_shape_and_nothing_of_its_value() {
        let real = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5";
        let p = placeholder(real);
        assert_ne!(p, real);
        assert!(p.starts_with("ghp_"), "{p}");
        assert_eq!(p.len(), real.len());
        for (a, b) in real.chars().zip(p.chars()) {
            assert_eq!(a.is_ascii_digit(), b.is_ascii_digit());
            assert_eq!(a.is_ascii_lowercase(), b.is_ascii_lowercase());
            assert_eq!(a.is_ascii_uppercase(), b.is_ascii_uppercase());
        }
        assert_ne!(placeholder(real), p, "unique per run");
        // Too short to hide randomness in its shape: a long random one.
        let short = placeholder("abc123");
        assert!(short.starts_with("ahp-wrap-placeholder-") && short.len() > 40);
    }

    #[test]
    fn an_unset_variable_is_skipped_and_a_bad_entry_said() {
        let env =
            |name: &str| (name == "SET_TOKEN").then(|| " value-of-the-token-123456 \n".into());
        let mut from_missing_file = spec("FILE_TOKEN", &["forge.test"]);
        from_missing_file.from_file = Some("/nonexistent/token".into());
        let specs = [
            spec("SET_TOKEN", &["forge.test", "*.forge.test"]),
            spec("UNSET_TOKEN", &["forge.test"]),
            from_missing_file,
            spec("NO_HOSTS", &[]),
        ];
        let (creds, problems) =
            Credentials::resolve(&specs, &env, (Path::new("/h"), Path::new("/w")));
        let names: Vec<&str> = creds.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["SET_TOKEN"]);
        let c = creds.iter().next().unwrap();
        assert_eq!(c.value(), "value-of-the-token-123456");
        assert!(!format!("{c:?}").contains("value-of"), "{c:?}");
        // A file that cannot be read, and an entry without hosts (set or not), are said.
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("FILE_TOKEN: cannot read"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("NO_HOSTS: `hosts` names no host"),
            "{problems:?}"
        );
        let forge = Target::parse("api.forge.test").unwrap();
        let other = Target::parse("other.test").unwrap();
        assert!(creds.any_bound_to(&forge) && !creds.any_bound_to(&other));
        let carrying = format!("Bearer {}", c.placeholder);
        assert!(creds
            .foreign_in(carrying.as_bytes(), Some(&forge))
            .is_none());
        assert!(creds
            .foreign_in(carrying.as_bytes(), Some(&other))
            .is_some());
        assert!(creds.foreign_in(carrying.as_bytes(), None).is_some());
        assert!(creds.foreign_in(b"Bearer x", Some(&other)).is_none());
    }

    #[test]
    fn a_command_gives_the_value_and_a_failing_one_is_said() {
        let env = |_: &str| None;
        let mut ok = spec("CMD_TOKEN", &["forge.test"]);
        ok.from_command = Some(vec!["printf".into(), "from-a-command-0123456789".into()]);
        let mut failing = spec("BAD_TOKEN", &["forge.test"]);
        failing.from_command = Some(vec!["false".into()]);
        let (creds, problems) =
            Credentials::resolve(&[ok, failing], &env, (Path::new("/"), Path::new("/")));
        assert_eq!(
            creds.iter().next().unwrap().value(),
            "from-a-command-0123456789"
        );
        assert!(problems[0].contains("`false` failed"), "{problems:?}");
    }
}
