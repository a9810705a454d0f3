//! The options of a run (`ahp-wrap [OPTIONS] -- <AGENT>`, also taken by `mcp`), grouped in
//! `--help` by topic.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{AuthScheme, FailMode, FloorArg, HostArgs, Mode, NestedArg, SummaryArg, TelemetryArgs};

/// The options of a run, as `ahp-wrap [OPTIONS] -- <AGENT>` and `ahp-wrap mcp` take them;
/// [`crate::config::Config`] is made from them.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// What decides and how: the harness or the embedded policy, the fail mode, the
    /// deadline, the framework, the PATH shims (shared with `worker`, which passes them on
    /// to each task's run).
    #[command(flatten)]
    pub supervision: Supervision,

    /// Token for the harness (HTTP header or WebSocket query parameter).
    #[arg(
        help_heading = "Harness",
        long,
        env = "AHP_WRAP_HARNESS_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,

    /// How the token is sent.
    #[arg(help_heading = "Harness", long, value_enum, default_value = "bearer")]
    pub auth: AuthScheme,

    /// Append the run's audit records to this file instead of the trail; `none`: keep none.
    ///
    /// Without it, each run appends to a file of its own in the audit trail,
    /// $XDG_STATE_HOME/ahp-wrap/audit/ (~/.local/state/ahp-wrap/audit/); `ahp-wrap audit show`
    /// reads it.
    #[arg(
        help_heading = "Audit",
        long,
        env = "AHP_WRAP_AUDIT_LOG",
        value_name = "PATH|none"
    )]
    pub audit_log: Option<PathBuf>,

    /// How long, and how much, the audit trail keeps: AGE, SIZE or AGE,SIZE.
    ///
    /// Older runs' files are removed whole, oldest first, and listed in the trail's
    /// retired.jsonl. Default: 30d,200MiB.
    #[arg(
        help_heading = "Audit",
        long,
        env = "AHP_WRAP_AUDIT_RETENTION",
        value_name = "AGE,SIZE"
    )]
    pub audit_retention: Option<crate::audit::trail::Retention>,

    /// When to print the run's summary on stderr.
    #[arg(help_heading = "Output", long, value_enum, default_value = "auto")]
    pub summary: SummaryArg,

    /// Also write the summary as Markdown to this file (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(help_heading = "Output", long, value_name = "PATH")]
    pub summary_md: Option<PathBuf>,

    /// Deepest sub-agent nesting allowed when the harness does not say.
    #[arg(help_heading = "Limits", long, default_value_t = 8, value_name = "N")]
    pub max_depth: u32,

    /// Seconds between heartbeat events (0: none).
    #[arg(
        help_heading = "Limits",
        long,
        default_value_t = 30,
        value_name = "SECS"
    )]
    pub heartbeat: u64,

    /// Largest message accepted from the harness, in bytes.
    #[arg(help_heading = "Limits", long, default_value_t = 4 * 1024 * 1024, value_name = "BYTES")]
    pub max_frame: usize,

    /// Seconds a person has to answer an escalated decision on the terminal.
    #[arg(
        help_heading = "Limits",
        long,
        default_value_t = 120,
        value_name = "SECS"
    )]
    pub ask_timeout: u64,

    /// The approvals host of this run (off unless client tokens are given).
    #[command(flatten)]
    pub host: HostArgs,

    /// Log filter (error, warn, info, debug, trace, or tracing directives).
    #[arg(
        help_heading = "Output",
        long,
        env = "AHP_WRAP_LOG",
        default_value = "warn",
        value_name = "FILTER"
    )]
    pub log: String,

    /// Write the log to this file instead of stderr.
    ///
    /// While the agent owns the terminal (our stdin or stdout is one) the log never goes there:
    /// without this option it goes to a new file in $XDG_STATE_HOME/ahp-wrap (else
    /// ~/.local/state/ahp-wrap), and the warnings are repeated at exit.
    #[arg(help_heading = "Output", long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,

    /// No notes before the agent starts, no summary after it.
    ///
    /// Unless --summary always. Warnings and errors are still said; `--log error` also silences
    /// the notes.
    #[arg(help_heading = "Output", short, long)]
    pub quiet: bool,

    /// Exit 122 when the agent never called a hook (for CI).
    ///
    /// Instead of the agent's own code: nothing it did was supervised.
    #[arg(help_heading = "Interception", long)]
    pub require_hooks: bool,

    /// The kernel's floor under the policy (Linux).
    ///
    /// The agent's whole process tree writes only beneath the workspace, the temp directories,
    /// its own state and package caches, never reads the policy's secrets, and cannot signal
    /// the wrapper. `off` runs without it (said and audited).
    #[arg(
        help_heading = "Floor (Linux)",
        long,
        value_enum,
        default_value = "on",
        value_name = "ON|OFF"
    )]
    pub floor: FloorArg,

    /// Exit 125 before the agent starts when the floor is not complete here (for CI).
    ///
    /// Not complete: this kernel cannot enforce every part of it.
    #[arg(help_heading = "Floor (Linux)", long)]
    pub require_floor: bool,

    /// Leave this credential in the agent's environment for this run (repeatable).
    ///
    /// On the floor, variables that carry credentials (`GITHUB_TOKEN`, `NPM_TOKEN`, cloud
    /// keys, values shaped like known tokens) are removed from the agent's environment,
    /// but for what its shim says it needs and what the policy's `[floor.env] keep` names.
    /// `NAME` may hold `*`.
    #[arg(help_heading = "Floor (Linux)", long, value_name = "NAME")]
    pub keep_env: Vec<String>,

    /// Give the agent this credential as a placeholder, its value sent only to HOSTS (repeatable).
    ///
    /// `NAME=HOST[,HOST…]`: the agent's `NAME` holds a placeholder; the egress proxy puts
    /// the real value (the wrapper's own `NAME`) on HTTPS requests to those hosts (`*.domain`
    /// for its subdomains), in their `Authorization` and API-key headers or basic auth, and
    /// refuses it going anywhere else. As a `[[floor.credentials]]` entry of the policy, which
    /// says more (a file or a command as the source, query parameters, bodies).
    #[arg(help_heading = "Floor (Linux)", long, value_name = "NAME=HOSTS")]
    pub credential: Vec<String>,

    /// Let the agent's tree reach this port of this machine's loopback (repeatable).
    ///
    /// Any other port of this machine (a debugger, a database, an admin port) is a decision of
    /// its own: asked of a person, refused where nobody answers. As `[floor.net]
    /// loopback_ports` in the policy; the ports of loopback URLs in the agent's command line
    /// and in its model API's variable (`ANTHROPIC_BASE_URL`, …) need neither.
    #[arg(help_heading = "Floor (Linux)", long, value_name = "PORT")]
    pub loopback_port: Vec<u16>,

    /// Whether a process of the agent's tree may start a sandbox of its own on the floor.
    ///
    /// A user and mount namespace of its own, as bubblewrap, Codex's sandbox and Claude Code's
    /// (`sandbox.enabled`) make: the floor's writes are then refused by read-only mounts
    /// (`Read-only file system`) instead of Landlock (`Permission denied`). `auto` (the
    /// default): when the agent's shim says it starts one. As `[floor] nested_sandboxes`.
    #[arg(
        help_heading = "Floor (Linux)",
        long,
        value_enum,
        value_name = "AUTO|ON|OFF"
    )]
    pub nested_sandboxes: Option<NestedArg>,

    /// The workspace the agent may write (default: the current directory).
    #[arg(help_heading = "Floor (Linux)", long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Claude Code: put its stdio MCP servers behind `ahp-wrap mcp` for this run.
    ///
    /// Their calls are decided and audited by this run, without editing the user's files.
    #[arg(help_heading = "Interception", long)]
    pub wrap_mcp: bool,

    /// Do not shim these commands, or with no value, none.
    ///
    /// Comma-separated, repeatable; with no value, no PATH shims at all.
    #[arg(help_heading = "Interception", long, value_name = "CMD,...", value_delimiter = ',', num_args = 0..)]
    pub no_intercept: Option<Vec<String>>,

    /// Metrics and spans of this run's decisions.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,

    /// The command to run and its arguments, after -- (the agent; for `mcp`, the MCP
    /// server).
    #[arg(
        help_heading = "Arguments",
        trailing_var_arg = true,
        value_name = "AGENT"
    )]
    pub agent: Vec<OsString>,
}

/// The options of a run that a `worker` takes too and gives each task's run: declared once,
/// and written back as arguments by [`Supervision::to_args`].
#[derive(Debug, Clone, Args)]
pub struct Supervision {
    // Help text, not rustdoc: its brackets are not links, its angle brackets not tags.
    #[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
    /// The harness (stdio:CMD, unix:PATH, http(s)://…, ws(s)://…); default: the embedded policy.
    ///
    /// stdio: a command line the wrapper starts; unix: a socket path; http(s) and ws(s):
    /// host[:port][/path].
    #[arg(
        help_heading = "Harness",
        long,
        env = "AHP_WRAP_HARNESS",
        value_name = "SPEC"
    )]
    pub harness: Option<String>,

    /// What a blocking event gets when no valid decision arrives in time.
    #[arg(help_heading = "Harness", long, value_enum, default_value = "closed")]
    pub fail_mode: FailMode,

    /// Policy file (TOML) for the embedded harness.
    ///
    /// Default: the built-in policy (`ahp-wrap policy default` prints it).
    #[arg(help_heading = "Policy", long, value_name = "FILE")]
    pub policy: Option<PathBuf>,

    /// enforce, or observe: block nothing, record what would have been blocked.
    ///
    /// For the embedded policy; a harness of your own decides for itself.
    #[arg(help_heading = "Policy", long, value_enum, default_value = "enforce")]
    pub mode: Mode,

    /// Deadline for one blocking event, in milliseconds.
    ///
    /// The harness's own timeout_ms wins when it is smaller.
    #[arg(
        help_heading = "Harness",
        long,
        default_value_t = 10_000,
        value_name = "MS"
    )]
    pub timeout: u64,

    /// The agent's framework (default: from its executable name).
    ///
    /// Known names: claude-code (or claude), codex, gemini, qwen, droid, copilot, opencode,
    /// kilo, acp, path, generic, or a shim manifest's. An executable no shim knows is generic.
    #[arg(help_heading = "Interception", long, value_name = "NAME")]
    pub framework: Option<String>,

    /// Load a shim manifest: an agent's hooks described in TOML (repeatable).
    ///
    /// Loaded beside the built-in shims and those in $XDG_CONFIG_HOME/ahp-
    /// wrap/shims; one that does not load stops the run.
    #[arg(help_heading = "Interception", long = "shim", value_name = "FILE")]
    pub shim: Vec<PathBuf>,

    /// Key file for HMAC-signing the audit log (the trail's file, or --audit-log's).
    ///
    /// Else the AHP_WRAP_AUDIT_KEY variable, if set; at least 16 bytes.
    #[arg(help_heading = "Audit", long, value_name = "PATH")]
    pub audit_key_file: Option<PathBuf>,

    /// Also check these commands through PATH shims (turns them on for any framework).
    ///
    /// Comma-separated, repeatable. PATH shims are on by default for generic and path.
    #[arg(
        help_heading = "Interception",
        long,
        value_name = "CMD,...",
        value_delimiter = ','
    )]
    pub intercept: Vec<String>,
}

impl Supervision {
    /// These options as a run's command line takes them.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let name = |v: Option<clap::builder::PossibleValue>| {
            OsString::from(v.map(|p| p.get_name().to_owned()).unwrap_or_default())
        };
        let mut out: Vec<OsString> = vec![
            "--mode".into(),
            name(self.mode.to_possible_value()),
            "--fail-mode".into(),
            name(self.fail_mode.to_possible_value()),
            "--timeout".into(),
            self.timeout.to_string().into(),
        ];
        let mut pass = |flag: &str, v: Option<OsString>| {
            if let Some(v) = v {
                out.push(flag.into());
                out.push(v);
            }
        };
        pass("--harness", self.harness.clone().map(Into::into));
        pass("--policy", self.policy.clone().map(Into::into));
        pass("--framework", self.framework.clone().map(Into::into));
        for file in &self.shim {
            pass("--shim", Some(file.into()));
        }
        pass(
            "--audit-key-file",
            self.audit_key_file.clone().map(Into::into),
        );
        for cmd in &self.intercept {
            pass("--intercept", Some(cmd.into()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    fn supervision(args: &[&str]) -> super::Supervision {
        let cli =
            Cli::try_parse_from(["ahp-wrap"].iter().chain(args).chain(&["--", "agent"])).unwrap();
        cli.run.supervision
    }

    /// A worker gives each task's run its options as arguments: they must mean there what
    /// they meant to the worker.
    #[test]
    fn the_options_written_back_parse_to_the_same_options() {
        let given = supervision(&[
            "--harness=stdio:policy-server",
            "--policy=p.toml",
            "--mode=observe",
            "--fail-mode=open",
            "--timeout=2500",
            "--framework=codex",
            "--audit-key-file=k",
            "--intercept=git,cp",
        ]);
        let args = given.to_args();
        let strs: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        let again = supervision(&strs);
        assert_eq!(format!("{again:?}"), format!("{given:?}"));
        let defaults = supervision(&[]);
        let strs: Vec<String> = defaults
            .to_args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            strs,
            [
                "--mode",
                "enforce",
                "--fail-mode",
                "closed",
                "--timeout",
                "10000"
            ]
        );
    }
}
