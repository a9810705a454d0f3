//! The policy's `[floor]` section, as written.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The `[floor]` section of a policy. A path is `~/…` (the home directory), absolute, or
/// relative (to the workspace). A field left out keeps the default policy's list, so that a
/// policy of one's own gets the same floor until it says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// `false`: no floor for runs under this policy (as `--floor off`).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Written besides the workspace, the temp directories and the agent's own state.
    /// Created when missing and their parent exists.
    pub writable: Option<Vec<String>>,
    /// The package caches builds need: the tree adds new entries, which stay at the end; a
    /// change to an entry that existed before the run (or its removal) is seen by the tree
    /// only, and kept aside at the end. Created when missing and their parent exists.
    pub caches: Option<Vec<String>>,
    /// Never written, even beneath a writable directory (bound read-only when they exist).
    pub read_only: Option<Vec<String>>,
    /// Never read (an empty, read-only file system or file is mounted over them).
    pub hidden: Option<Vec<String>>,
    /// Protected paths (of `read_only`, or that an agent's shim declares) the agent may
    /// write and create all the same: neither bound read-only nor moved aside at the end.
    pub keep: Option<Vec<String>>,
    /// The network: `[floor.net]`.
    #[serde(default)]
    pub net: NetSpec,
    /// The agent's environment: `[floor.env]`.
    #[serde(default)]
    pub env: EnvSpec,
    /// Path Unix sockets: `[floor.unix]`.
    #[serde(default)]
    pub unix: UnixSpec,
    /// Credentials the tree uses without reading them: `[[floor.credentials]]`.
    pub credentials: Option<Vec<CredentialSpec>>,
    /// The kinds of run files ([`super::runfiles`]: `npmrc`, `envrc`, an agent's framework
    /// name for its instruction files, `git`) the tree may create and change: left in place at
    /// the end of the run, and still said.
    pub run_files: Option<Vec<String>>,
    /// Whether a process of the tree may start a sandbox of its own (a user and mount
    /// namespace: bubblewrap, Codex's and Claude Code's sandboxes): `auto` (the default) when
    /// the agent's shim says the agent will, for its command line and settings.
    pub nested_sandboxes: Option<Nested>,
}

/// `[floor] nested_sandboxes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Nested {
    /// When the agent's shim says the agent starts a sandbox of its own.
    Auto,
    /// Always: the floor's writes refused by read-only mounts.
    On,
    /// Never: by Landlock (no namespace of the tree's own can mount).
    Off,
}

impl std::str::FromStr for Nested {
    type Err = NotNested;
    fn from_str(s: &str) -> Result<Nested, NotNested> {
        match s {
            "auto" => Ok(Nested::Auto),
            "on" => Ok(Nested::On),
            "off" => Ok(Nested::Off),
            _ => Err(NotNested(s.to_owned())),
        }
    }
}

/// A `nested` setting that is none of auto, on and off (as written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: auto, on or off")]
pub struct NotNested(pub String);

/// One `[[floor.credentials]]` entry: a token the agent's tree gets as a placeholder, which
/// the egress proxy replaces with the real value on requests to the credential's hosts
/// (over TLS only). See [`credentials`](super::credentials).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialSpec {
    /// The variable the agent's tree sees (holding the placeholder).
    pub env: String,
    /// The hosts the real value may be sent to (as in `[floor.net]`: `host`, `*.domain`).
    pub hosts: Vec<String>,
    /// Where the real value comes from: a variable of the wrapper's environment (the
    /// default: `env` itself; the entry is skipped when it is not set).
    pub from_env: Option<String>,
    /// Where the real value comes from: a file (`~/…`, absolute, or relative to the
    /// workspace), its text trimmed.
    pub from_file: Option<String>,
    /// Where the real value comes from: a command the wrapper runs before the agent starts
    /// (`["gh", "auth", "token"]`), its output trimmed.
    pub from_command: Option<Vec<String>>,
    /// The request headers the value may appear in (the default:
    /// [`DEFAULT_HEADERS`](super::credentials::DEFAULT_HEADERS)).
    pub headers: Option<Vec<String>>,
    /// Whether it may appear in HTTP basic auth (`Authorization: Basic`, a URL's
    /// `user:token@`); the default: yes.
    pub basic_auth: Option<bool>,
    /// The URL query parameters it may appear in (the default: none).
    pub query: Option<Vec<String>>,
    /// Whether it may appear in request bodies (the default: no).
    pub body: Option<bool>,
}

impl CredentialSpec {
    /// An entry for the variable `env`, sent to `hosts`, everything else the defaults (its
    /// value the wrapper's own `env`).
    pub fn new(env: &str, hosts: Vec<String>) -> CredentialSpec {
        CredentialSpec {
            env: env.to_owned(),
            hosts,
            from_env: None,
            from_file: None,
            from_command: None,
            headers: None,
            basic_auth: None,
            query: None,
            body: None,
        }
    }
}

/// The `[floor.unix]` section: the path Unix sockets (tmux's, Docker's, D-Bus's, an
/// ssh-agent's) the agent's tree may connect to although none of its processes bound them.
/// Decided with the network part: without `[floor.net]`, they are not decided.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnixSpec {
    /// Socket paths, or directories whose sockets all are (`~/…`, absolute, or relative to
    /// the workspace). A field left out keeps the default policy's list.
    pub allow: Option<Vec<String>>,
}

impl UnixSpec {
    /// The `allow` list, resolved.
    pub fn allow(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.allow.as_deref(), home, workspace)
    }
}

/// The `[floor.env]` section: credentials in the wrapper's environment are not passed on to
/// the agent's tree ([`secrets`](super::secrets) says which). A field left out keeps the
/// default policy's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSpec {
    /// `false`: the agent inherits every variable.
    pub remove_credentials: Option<bool>,
    /// Names (with `*` for any run of characters) left in place although they look like
    /// credentials, besides what the agent's shim says it needs.
    pub keep: Option<Vec<String>>,
}

impl EnvSpec {
    /// `self`, with each field left out taken from `default`.
    pub(crate) fn or(self, default: &EnvSpec) -> EnvSpec {
        EnvSpec {
            remove_credentials: self.remove_credentials.or(default.remove_credentials),
            keep: self.keep.or_else(|| default.keep.clone()),
        }
    }

    /// Whether credentials are removed from the agent's environment.
    pub fn removes(&self) -> bool {
        self.remove_credentials.unwrap_or(true)
    }
}

/// The `[floor.net]` section: the agent's tree reaches the network only through the
/// wrapper's egress proxy, which asks the gate about each new connection. A field left out
/// keeps the default policy's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetSpec {
    /// `false`: the tree keeps the machine's network (said as a gap before the agent starts).
    pub enabled: Option<bool>,
    /// Whether the tree may connect to this machine's loopback services (local dev servers,
    /// a local model server) directly, over TCP: each port a decision (the ports of
    /// `loopback_ports`, and those the run was started with, without one). `false`: never.
    /// DNS on loopback is never reachable.
    pub loopback: Option<bool>,
    /// The TCP ports of this machine's loopback the tree reaches without a decision of its
    /// own (any other port is a `net` decision, with the `unknown` treatment): a database or
    /// a dev server of the person's, named here.
    pub loopback_ports: Option<Vec<u16>>,
    /// Hosts the proxy lets through without the `unknown` treatment (besides the agent's own
    /// model API, which its shim declares): `host`, `*.domain` (its subdomains), an address
    /// or a network (`10.1.0.0/16`). The gate is still asked.
    pub allow: Option<Vec<String>>,
    /// Hosts the proxy always refuses, whatever the gate says (same forms as `allow`).
    pub deny: Option<Vec<String>>,
    /// What becomes of a host neither list names: `allow` (ask the gate), `ask` (a person
    /// answers) or `block`.
    pub unknown: Option<Unknown>,
    /// What becomes of a TCP listener of the tree (a dev server, a login's callback):
    /// `loopback` (published on this machine's loopback, the gate asked), `none` (it stays
    /// inside the tree's namespace, refused and audited) or `all` (published on every
    /// address of this machine when the tree listens on every address of its own).
    pub publish: Option<Publishing>,
}

/// Where the tree's listeners are published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Publishing {
    /// On this machine's loopback.
    #[default]
    Loopback,
    /// Nowhere.
    None,
    /// As the tree listened: its wildcard address becomes this machine's.
    All,
}

/// The treatment of a host neither `allow` nor `deny` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unknown {
    /// The gate decides, as for any tool call.
    Allow,
    /// A person answers (the terminal or the approvals page), else the fail mode.
    Ask,
    /// Refused.
    Block,
}

impl NetSpec {
    /// `self`, with each field left out taken from `default`.
    pub fn or(self, default: &NetSpec) -> NetSpec {
        NetSpec {
            enabled: self.enabled.or(default.enabled),
            loopback: self.loopback.or(default.loopback),
            loopback_ports: self
                .loopback_ports
                .or_else(|| default.loopback_ports.clone()),
            allow: self.allow.or_else(|| default.allow.clone()),
            deny: self.deny.or_else(|| default.deny.clone()),
            unknown: self.unknown.or(default.unknown),
            publish: self.publish.or(default.publish),
        }
    }

    /// Whether the network part of the floor is asked for.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// Whether loopback TCP reaches this machine's services.
    pub fn loopback(&self) -> bool {
        self.loopback.unwrap_or(true)
    }

    /// Where the tree's listeners are published.
    pub fn publish(&self) -> Publishing {
        self.publish.unwrap_or(Publishing::Loopback)
    }
}

fn yes() -> bool {
    true
}

impl Spec {
    /// `self`, with each field left out taken from `default`.
    pub fn or(self, default: &Spec) -> Spec {
        Spec {
            enabled: self.enabled,
            writable: self.writable.or_else(|| default.writable.clone()),
            caches: self.caches.or_else(|| default.caches.clone()),
            read_only: self.read_only.or_else(|| default.read_only.clone()),
            hidden: self.hidden.or_else(|| default.hidden.clone()),
            keep: self.keep.or_else(|| default.keep.clone()),
            net: self.net.or(&default.net),
            env: self.env.or(&default.env),
            unix: UnixSpec {
                allow: self.unix.allow.or_else(|| default.unix.allow.clone()),
            },
            credentials: self.credentials.or_else(|| default.credentials.clone()),
            run_files: self.run_files.or_else(|| default.run_files.clone()),
            nested_sandboxes: self.nested_sandboxes.or(default.nested_sandboxes),
        }
    }

    /// The `writable` list, resolved.
    pub(crate) fn writable(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.writable.as_deref(), home, workspace)
    }

    /// The `caches` list, resolved.
    pub(crate) fn caches(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.caches.as_deref(), home, workspace)
    }

    /// The `read_only` list, resolved.
    pub(crate) fn read_only(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.read_only.as_deref(), home, workspace)
    }

    /// The `hidden` list, resolved.
    pub(crate) fn hidden(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.hidden.as_deref(), home, workspace)
    }

    /// The `keep` list, resolved.
    pub fn keep(&self, home: &Path, workspace: &Path) -> Vec<PathBuf> {
        expand(self.keep.as_deref(), home, workspace)
    }
}

/// `~/x` against `home`, `/x` as it is, `x` against `workspace`.
pub fn resolve(pattern: &str, home: &Path, workspace: &Path) -> PathBuf {
    if pattern == "~" {
        home.to_owned()
    } else if let Some(rest) = pattern.strip_prefix("~/") {
        home.join(rest)
    } else {
        workspace.join(pattern)
    }
}

fn expand(list: Option<&[String]>, home: &Path, workspace: &Path) -> Vec<PathBuf> {
    list.unwrap_or_default()
        .iter()
        .map(|p| resolve(p, home, workspace))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_against_home_or_the_workspace() {
        let (home, ws) = (Path::new("/h"), Path::new("/h/p"));
        assert_eq!(resolve("~/.ssh", home, ws), PathBuf::from("/h/.ssh"));
        assert_eq!(resolve("/etc/x", home, ws), PathBuf::from("/etc/x"));
        assert_eq!(
            resolve(".git/hooks", home, ws),
            PathBuf::from("/h/p/.git/hooks")
        );
        assert_eq!(resolve("~", home, ws), PathBuf::from("/h"));
    }

    #[test]
    fn a_field_left_out_keeps_the_default() {
        let default = Spec {
            enabled: true,
            writable: Some(vec!["~/.rustup/tmp".into()]),
            caches: Some(vec!["~/.cache".into()]),
            read_only: Some(vec![".git/hooks".into()]),
            hidden: Some(vec!["~/.ssh".into()]),
            keep: None,
            env: EnvSpec::default(),
            unix: UnixSpec::default(),
            net: NetSpec {
                allow: Some(vec!["crates.io".into()]),
                unknown: Some(Unknown::Allow),
                ..NetSpec::default()
            },
            credentials: None,
            run_files: None,
            nested_sandboxes: None,
        };
        let own: Spec = toml::from_str("hidden = [\"~/.secret\"]").unwrap();
        let merged = own.or(&default);
        assert_eq!(merged.hidden, Some(vec!["~/.secret".to_owned()]));
        assert_eq!(merged.writable, default.writable);
        assert_eq!(merged.caches, default.caches);
        assert!(merged.enabled);
        assert_eq!(merged.net.allow, default.net.allow);
        assert!(toml::from_str::<Spec>("nope = 1").is_err());
        let own: Spec = toml::from_str("[net]\nunknown = \"block\"").unwrap();
        let merged = own.or(&default);
        assert_eq!(merged.net.unknown, Some(Unknown::Block));
        assert_eq!(merged.net.allow, default.net.allow);
        assert!(toml::from_str::<Spec>("[net]\nunknown = \"maybe\"").is_err());
    }
}
