//! The validated configuration of one wrapped run, built before any I/O.
//!
//! Owns: turning options into a checked `Config` (framework, harness, PATH shims, proxy).
//! Must not touch: anything that runs; it opens no file and no socket.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::RunArgs;
use crate::frameworks::{self, Framework};
use crate::gate::{FailMode, Mode};
use crate::transport::{HarnessSpec, LinkConfig, SpecError};

/// The agent's depth (0 for a top-level agent), in the agent's environment.
pub(crate) const ENV_DEPTH: &str = "AHP_WRAP_DEPTH";
/// The wrapper's session id, in the agent's environment.
pub(crate) const ENV_SESSION: &str = "AHP_WRAP_SESSION";
/// Variables that must not reach the agent.
pub(crate) const SECRET_ENV: [&str; 2] = ["AHP_WRAP_HARNESS_TOKEN", "AHP_WRAP_AUDIT_KEY"];

/// When the run's summary is printed on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryWhen {
    /// When at least one blocking event was decided.
    Auto,
    /// After every run, even one that decided nothing (`--summary always`).
    Always,
    /// Not at all (`--summary never`).
    Never,
}

/// Why the command line cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--workspace` is unusable: the directory as given, and why (missing, not a directory).
    #[error("the workspace {0}: {1}")]
    Workspace(String, String),
    /// Nothing after `--`: there is no agent to run.
    #[error("no agent command given (usage: ahp-wrap [OPTIONS] -- <AGENT> [ARGS]...)")]
    NoAgent,
    /// The `--harness` spec (or `AHP_WRAP_HARNESS`) does not parse.
    #[error("invalid --harness")]
    Harness(#[from] SpecError),
    /// `--framework` names no known framework: the name given, and the known ones, joined
    /// with `, ` (`acp` included).
    #[error("unknown framework {0:?} (known: {1})")]
    UnknownFramework(String, String),
    /// A `--shim` manifest does not load.
    #[error("--shim: {0}")]
    Shim(#[from] frameworks::manifest::ManifestError),
    /// `--policy` and `--harness` together: a policy file is only for the embedded harness.
    #[error("--policy applies to the embedded harness; it cannot be used with --harness")]
    PolicyWithHarness,
    /// `--timeout 0`.
    #[error("--timeout must be more than 0 ms")]
    ZeroTimeout,
    /// `AHP_WRAP_DEPTH` inherited from a parent run is not a number; holds it as found.
    #[error("invalid {ENV_DEPTH} in the environment: {0:?}")]
    Depth(String),
    /// Host tokens given without `--host-listen`, so there is no host to use them.
    #[error(
        "--host-token and --host-token-file need --host-listen http://ADDR (or `ahp-wrap serve`)"
    )]
    HostNoListen,
    /// The approvals host options cannot be used.
    #[error(transparent)]
    Host(#[from] crate::host::HostError),
    /// The MCP server's name (`--name`, else the program's file name) is not a plain word;
    /// holds it.
    #[error("the MCP server name {0:?} is not a plain word (letters, digits, - _ .): give --name")]
    McpName(String),
    /// A `--credential` that is not `NAME=HOST[,HOST…]`; holds it and why.
    #[error("--credential {0:?}: {1}")]
    Credential(String, String),
    /// `--audit-key-file` with `--audit-log none`: there would be nothing to sign.
    #[error("--audit-key-file signs the audit log: it cannot go with --audit-log none")]
    KeyWithoutLog,
    /// A metrics or OTLP export target cannot be used.
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TargetError),
}

/// The default audit trail of a run (see [`crate::audit::trail`]).
#[derive(Debug, Clone)]
pub struct AuditTrail {
    /// The trail's directory: `<state dir>/audit`.
    pub dir: PathBuf,
    /// How long, and how much, the trail keeps (`--audit-retention`, else the default).
    pub retention: crate::audit::trail::Retention,
}

/// A run, validated.
pub struct Config {
    /// The agent's executable: the first word after `--`.
    pub program: OsString,
    /// The agent's own arguments, after `program`.
    pub args: Vec<OsString>,
    /// The shim that speaks the agent's hooks: `--framework`, else detected from `program`'s
    /// file name (`generic` when none matches, and for `--framework acp`).
    pub framework: &'static dyn Framework,
    /// `--harness` (or `AHP_WRAP_HARNESS`, empty taken as none); `None`: the embedded harness
    /// decides with the policy.
    pub harness: Option<HarnessSpec>,
    /// Credentials and the frame limit for the link to `harness`.
    pub link: LinkConfig,
    /// `--fail-mode`: what a blocking event gets when no valid decision arrives in time.
    pub fail_mode: FailMode,
    /// `--mode`: enforce, or observe (block nothing, record what would have been blocked);
    /// for the embedded harness only.
    pub mode: Mode,
    /// `--policy FILE` for the embedded harness; `None`: the built-in default policy.
    pub policy: Option<PathBuf>,
    /// `--timeout` (never zero): how long a blocking event waits for its decision, and how
    /// long the run waits for the harness to be ready; a smaller `timeout_ms` from the
    /// harness wins.
    pub timeout: Duration,
    /// `--max-depth`: the deepest sub-agent nesting allowed, unless the harness's handshake
    /// gives its own `max_depth`.
    pub max_depth: u32,
    /// Our depth: one more than the wrapper we run under, if any.
    pub depth: u32,
    /// The session id of the wrapper we run under (`AHP_WRAP_SESSION`), sent as
    /// `parent_session_id` when the session starts; `None` for a top-level run.
    pub parent_session: Option<String>,
    /// `--audit-log PATH`: the file the run's records go to, instead of the trail.
    pub audit_log: Option<PathBuf>,
    /// Where the run's records go without `--audit-log`: a file of its own in the trail.
    pub audit_trail: Option<AuditTrail>,
    /// `--audit-log none`: the run keeps no audit file, as asked.
    pub audit_off: bool,
    /// `--audit-key-file`: the key that HMAC-signs the audit log; `None`: the
    /// `AHP_WRAP_AUDIT_KEY` variable if set, else the log is not signed.
    pub audit_key_file: Option<PathBuf>,
    /// Time between heartbeat events (`--heartbeat`, in seconds); `None` (`--heartbeat 0`):
    /// no heartbeats.
    pub heartbeat: Option<Duration>,
    /// `--summary`: when the run's summary is printed on stderr.
    pub summary: SummaryWhen,
    /// Where the run's Markdown summary goes: `--summary-md`, else (the outermost run of a
    /// GitHub Actions step) the job summary file, appended to.
    pub summary_md: Option<MarkdownSummary>,
    /// How long a person has to answer an escalated decision on the terminal
    /// (`--ask-timeout`, in seconds, at least 1).
    pub ask_timeout: Duration,
    /// Exit with [`crate::exit::Exit::NoHooks`] when the agent never called a hook.
    pub require_hooks: bool,
    /// No notes before the run and no automatic summary after it (`--quiet`, `--log error`).
    pub quiet: bool,
    /// The commands intercepted through PATH shims; empty: no PATH shims.
    pub path_shims: std::collections::BTreeSet<String>,
    /// A stream proxy between our stdio and the agent's, instead of its hooks.
    pub proxy: Option<Proxy>,
    /// `--wrap-mcp`: the agent's stdio MCP servers run behind `ahp-wrap mcp --via-run`.
    pub wrap_mcp: bool,
    /// `ahp-wrap mcp --via-run`: the run this one was started in decides.
    pub via_run: bool,
    /// The Agent Host Protocol host (`--host-listen`): escalations go to its clients.
    pub host: Option<crate::host::HostOptions>,
    /// The kernel's floor under the policy.
    pub floor: crate::floor::Mode,
    /// Exit before the agent starts when the floor is not complete here.
    pub require_floor: bool,
    /// `--keep-env`: credentials left in the agent's environment on the floor.
    pub keep_env: Vec<String>,
    /// `--credential NAME=HOSTS`: credentials declared for this run, besides the policy's.
    pub credentials: Vec<crate::floor::spec::CredentialSpec>,
    /// `--loopback-port`: ports of this machine's loopback the tree reaches without a
    /// decision, besides the policy's.
    pub loopback_ports: Vec<u16>,
    /// `--nested-sandboxes`: over the policy's `[floor] nested_sandboxes`.
    pub nested_sandboxes: Option<crate::floor::spec::Nested>,
    /// The workspace: `--workspace`, else the current directory.
    pub workspace: PathBuf,
    /// Metrics and spans (`--metrics-listen`, `--otlp`, the `OTEL_*` variables).
    pub telemetry: crate::telemetry::Options,
}

/// A file the run's Markdown summary is written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownSummary {
    /// `--summary-md PATH`, or the Actions job summary file (`GITHUB_STEP_SUMMARY`).
    pub path: PathBuf,
    /// Added at the end (a job summary other steps write too), not written over.
    pub append: bool,
}

/// The job summary file of a GitHub Actions step, for the outermost run only (a nested run's
/// summary is part of its parent's).
fn actions_step_summary(
    depth: u32,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if depth > 0 || env("GITHUB_ACTIONS").is_none_or(|v| v != "true") {
        return None;
    }
    env("GITHUB_STEP_SUMMARY")
        .filter(|p| !p.is_empty())
        .map(Into::into)
}

/// A stream proxy a run puts between our stdio and the agent's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxy {
    /// The agent is an MCP server, named `name` in tool names.
    Mcp {
        /// `--name`, else the program's file name: a plain word (letters, digits, `-_.`).
        name: String,
    },
    /// The agent speaks the Agent Client Protocol to an editor on our stdio
    /// (`--framework acp`).
    Acp,
}

/// The `--framework` value that puts the ACP stream proxy in front of the agent.
pub(crate) const ACP: &str = "acp";

impl Config {
    /// What runs, as events and ids name it: the framework, or the proxied protocol.
    pub(crate) fn kind(&self) -> &'static str {
        match &self.proxy {
            Some(Proxy::Mcp { .. }) => "mcp",
            Some(Proxy::Acp) => ACP,
            None => self.framework.name(),
        }
    }

    /// An MCP server behind the proxy: PATH shims only where `--intercept` asks for them.
    pub fn for_mcp(args: crate::cli::McpArgs) -> Result<Config, ConfigError> {
        let explicit = args.run.supervision.intercept.clone();
        let no = args.run.no_intercept.clone();
        let mut cfg = Config::from_args(args.run)?;
        let name = match args.name {
            Some(n) => n,
            None => std::path::Path::new(&cfg.program)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| "server".into()),
        };
        if !crate::control::wire::is_word(&name) {
            return Err(ConfigError::McpName(name));
        }
        cfg.path_shims = path_shims(false, &explicit, no.as_deref());
        cfg.proxy = Some(Proxy::Mcp { name });
        cfg.via_run = args.via_run;
        if cfg.via_run {
            // The wrapping run decides and audits: a second writer of its log (named by an
            // inherited AHP_WRAP_AUDIT_LOG, say) would break its chain.
            cfg.audit_log = None;
            cfg.audit_trail = None;
            cfg.harness = None;
        }
        Ok(cfg)
    }
}

impl Config {
    /// Checks a run's command line and builds the run from it: the agent, its framework
    /// (named or detected), the harness, and the audit, summary, host, floor and telemetry
    /// settings. Reads what a parent run hands on (`AHP_WRAP_DEPTH`, `AHP_WRAP_SESSION`), and
    /// loads the `--shim` manifests.
    pub fn from_args(args: RunArgs) -> Result<Config, ConfigError> {
        let audit_off = args.audit_log.as_deref() == Some(std::path::Path::new("none"));
        if args.supervision.audit_key_file.is_some() && audit_off {
            return Err(ConfigError::KeyWithoutLog);
        }
        let audit_log = args.audit_log.filter(|_| !audit_off);
        let audit_trail = match (&audit_log, audit_off) {
            (None, false) => crate::audit::trail::default_dir().map(|dir| AuditTrail {
                dir,
                retention: args.audit_retention.unwrap_or_default(),
            }),
            _ => None,
        };
        let mut agent = args.agent.into_iter();
        let program = agent.next().ok_or(ConfigError::NoAgent)?;
        frameworks::load_shims(&args.supervision.shim)?;
        let acp = args.supervision.framework.as_deref() == Some(ACP);
        let framework = match &args.supervision.framework {
            // An ACP agent is reached through its stream, not through hooks.
            Some(name) if name == ACP => frameworks::generic(),
            Some(name) => frameworks::find(name).ok_or_else(|| {
                let mut known: Vec<&str> = frameworks::all().iter().map(|f| f.name()).collect();
                known.push(ACP);
                ConfigError::UnknownFramework(name.clone(), known.join(", "))
            })?,
            None => frameworks::detect(std::path::Path::new(&program)),
        };
        let harness = args
            .supervision
            .harness
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(HarnessSpec::parse)
            .transpose()?;
        if harness.is_some() && args.supervision.policy.is_some() {
            return Err(ConfigError::PolicyWithHarness);
        }
        if args.supervision.timeout == 0 {
            return Err(ConfigError::ZeroTimeout);
        }
        let host = crate::host::HostOptions::from_args(&args.host.request())?;
        if host.as_ref().is_some_and(|h| h.listen.is_none()) {
            return Err(ConfigError::HostNoListen);
        }
        let telemetry = args.telemetry.options("run", false)?;
        let depth = match std::env::var(ENV_DEPTH) {
            Ok(v) => v
                .trim()
                .parse::<u32>()
                .map_err(|_| ConfigError::Depth(v.clone()))?
                .saturating_add(1),
            Err(_) => 0,
        };
        Ok(Config {
            program,
            args: agent.collect(),
            framework,
            harness,
            link: LinkConfig {
                token: args.token.filter(|t| !t.is_empty()),
                auth: args.auth.into(),
                max_frame: args.max_frame.max(1024),
            },
            fail_mode: args.supervision.fail_mode.into(),
            mode: args.supervision.mode.into(),
            policy: args.supervision.policy,
            timeout: Duration::from_millis(args.supervision.timeout),
            max_depth: args.max_depth,
            depth,
            parent_session: std::env::var(ENV_SESSION).ok(),
            audit_log,
            audit_trail,
            audit_off,
            audit_key_file: args.supervision.audit_key_file,
            summary: match args.summary {
                crate::cli::SummaryArg::Auto => SummaryWhen::Auto,
                crate::cli::SummaryArg::Always => SummaryWhen::Always,
                crate::cli::SummaryArg::Never => SummaryWhen::Never,
            },
            summary_md: match args.summary_md {
                Some(path) => Some(MarkdownSummary {
                    path,
                    append: false,
                }),
                None => actions_step_summary(depth, |k| std::env::var_os(k))
                    .map(|path| MarkdownSummary { path, append: true }),
            },
            heartbeat: (args.heartbeat > 0).then(|| Duration::from_secs(args.heartbeat)),
            ask_timeout: Duration::from_secs(args.ask_timeout.max(1)),
            require_hooks: args.require_hooks,
            quiet: args.quiet || matches!(args.log.trim(), "error" | "off"),
            path_shims: path_shims(
                framework.path_shims() && !acp,
                &args.supervision.intercept,
                args.no_intercept.as_deref(),
            ),
            proxy: acp.then_some(Proxy::Acp),
            wrap_mcp: args.wrap_mcp,
            via_run: false,
            host,
            floor: args.floor.into(),
            require_floor: args.require_floor,
            keep_env: args.keep_env,
            loopback_ports: args.loopback_port,
            nested_sandboxes: args.nested_sandboxes.map(|n| match n {
                crate::cli::NestedArg::Auto => crate::floor::spec::Nested::Auto,
                crate::cli::NestedArg::On => crate::floor::spec::Nested::On,
                crate::cli::NestedArg::Off => crate::floor::spec::Nested::Off,
            }),
            credentials: args
                .credential
                .iter()
                .map(|c| credential_arg(c))
                .collect::<Result<_, _>>()?,
            workspace: workspace(args.workspace)?,
            telemetry,
        })
    }
}

/// Which commands the run shims on the agent's `PATH`: the default set when `by_default`
/// (a framework without hooks), plus `--intercept` (which turns shims on for any
/// framework), minus `--no-intercept` (or, with no value, every one).
fn path_shims(
    by_default: bool,
    intercept: &[String],
    no_intercept: Option<&[String]>,
) -> std::collections::BTreeSet<String> {
    let without = no_intercept.unwrap_or_default();
    if no_intercept.is_some_and(<[String]>::is_empty) {
        return Default::default();
    }
    let mut set = if by_default {
        crate::intercept::pathshim::commands(&[], without)
    } else {
        Default::default()
    };
    set.extend(intercept.iter().filter(|c| !without.contains(c)).cloned());
    set
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("program", &self.program)
            .field("framework", &self.framework.name())
            .field("harness", &self.harness.as_ref().map(HarnessSpec::describe))
            .field("fail_mode", &self.fail_mode)
            .field("timeout", &self.timeout)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

/// `--workspace DIR` (an existing directory, made absolute), else the current directory.
/// `--credential NAME=HOST[,HOST…]`: an entry of the wrapper's own `NAME` for those hosts.
fn credential_arg(arg: &str) -> Result<crate::floor::spec::CredentialSpec, ConfigError> {
    let bad = |why: &str| ConfigError::Credential(arg.to_owned(), why.to_owned());
    let (name, hosts) = arg
        .split_once('=')
        .ok_or_else(|| bad("give NAME=HOST[,HOST...]"))?;
    let hosts: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    if name.is_empty() || hosts.is_empty() {
        return Err(bad("give NAME=HOST[,HOST...]"));
    }
    crate::floor::hosts::HostList::parse(&hosts).map_err(|e| bad(&e.to_string()))?;
    if std::env::var_os(name).is_none() {
        return Err(bad(&format!("the variable {name} is not set")));
    }
    Ok(crate::floor::spec::CredentialSpec {
        from_env: Some(name.to_owned()),
        ..crate::floor::spec::CredentialSpec::new(name, hosts)
    })
}

fn workspace(dir: Option<PathBuf>) -> Result<PathBuf, ConfigError> {
    let bad =
        |d: &std::path::Path, why: String| ConfigError::Workspace(d.display().to_string(), why);
    match dir {
        Some(d) => match std::fs::canonicalize(&d) {
            Ok(abs) if abs.is_dir() => Ok(abs),
            Ok(_) => Err(bad(&d, "not a directory".into())),
            Err(e) => Err(bad(&d, e.to_string())),
        },
        None => std::env::current_dir().map_err(|e| bad(std::path::Path::new("."), e.to_string())),
    }
}

impl From<crate::cli::FloorArg> for crate::floor::Mode {
    fn from(floor: crate::cli::FloorArg) -> Self {
        match floor {
            crate::cli::FloorArg::On => crate::floor::Mode::On,
            crate::cli::FloorArg::Off => crate::floor::Mode::Off,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::actions_step_summary;
    use std::ffi::OsString;

    #[test]
    fn only_the_outermost_run_of_an_actions_step_writes_its_job_summary() {
        let actions = |k: &str| match k {
            "GITHUB_ACTIONS" => Some(OsString::from("true")),
            "GITHUB_STEP_SUMMARY" => Some(OsString::from("/runner/_temp/step_summary")),
            _ => None,
        };
        assert_eq!(
            actions_step_summary(0, actions),
            Some("/runner/_temp/step_summary".into())
        );
        assert_eq!(actions_step_summary(1, actions), None);
        let elsewhere = |k: &str| (k == "GITHUB_STEP_SUMMARY").then(|| OsString::from("/x"));
        assert_eq!(actions_step_summary(0, elsewhere), None);
    }
}
