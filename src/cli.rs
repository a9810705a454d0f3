//! The command line, as clap sees it. [`crate::config`] turns it into a validated config.
//!
//! Owns: options, their help and defaults. Must not touch: validation or any behaviour
//! (that is `config` and the modules it configures).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod fleet;
mod quick;
mod run;
pub(crate) use fleet::{AbortArgs, AmqpArgs, SubmitArgs, TaskCommand, WorkerArgs};
pub(crate) use run::RunArgs;

/// Run an AI agent CLI under an Agent Harness Protocol (AHP) harness.
///
/// Every tool call, prompt and session step of the agent is sent to the harness as an AHP
/// event, and the harness's decision is enforced before the agent may act. With no
/// --harness, the embedded default policy answers.
#[derive(Debug, Parser)]
#[command(
    name = "ahp-wrap",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    override_usage = "ahp-wrap [OPTIONS] -- <AGENT> [ARGS]...\n       ahp-wrap <COMMAND> [OPTIONS]",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// The subcommand given; `None` means run the agent named after the options.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The run's options and the agent's command line; they conflict with a subcommand,
    /// so they are left at their defaults when `command` is `Some`.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Examples and the framework names, after the options.
const AFTER_HELP: &str = "\
Examples:
  ahp-wrap -- claude -p \"fix the failing test\"          the default policy decides each tool call
  ahp-wrap --policy ci.toml --require-hooks -- codex exec \"...\"
  ahp-wrap --harness ws://policy.internal:7700/ahp -- gemini -p \"...\"
  ahp-wrap --mode observe --audit-log run.jsonl -- claude   block nothing, record what would be
  ahp-wrap -- aider                                       no hooks: PATH shims and the floor
  ahp-wrap policy default > my-policy.toml                start a policy of your own

Frameworks (--framework, else from the agent's executable name): claude-code (claude), codex,
gemini, qwen, droid, copilot, opencode, kilo, acp (an ACP agent), path (PATH shims only),
generic, and the shim manifests loaded (--shim FILE, $XDG_CONFIG_HOME/ahp-wrap/shims).

Exit codes: the agent's own; 125 ahp-wrap refused or failed; 122 --require-hooks and no hook
was called; 127 agent not found; 126 agent not executable.

Each command's options: ahp-wrap <COMMAND> --help. Every option in full: man ahp-wrap
(installed by install.sh; else ahp-wrap man | man -l -).";

/// The subcommands, `ahp-wrap <COMMAND>`; each variant's doc is its help.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the embedded policy as a standalone AHP 2.4 harness.
    Serve(ServeArgs),
    /// Run an MCP server behind a supervising proxy.
    ///
    /// Put `ahp-wrap mcp -- <server command>` where a client's MCP configuration names the
    /// server. Every `tools/call` is decided
    /// before the server sees it; everything else passes through unchanged.
    #[command(override_usage = "ahp-wrap mcp [OPTIONS] -- <SERVER> [ARGS]...")]
    Mcp(Box<McpArgs>),
    /// Print, check or try out policy files, or show the floor.
    Policy {
        /// What to do with the policy: default, check, floor, eval or explain.
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Show, verify or summarize audit logs.
    Audit {
        /// What to do with the audit log: verify, show or summary.
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Be an HCP worker: run a RabbitMQ queue's tasks under supervision.
    ///
    /// Takes the tasks of one capability from a RabbitMQ queue and runs each as a run of
    /// its own.
    Worker(Box<WorkerArgs>),
    /// Submit HCP tasks to workers, or abort them.
    Task {
        /// `submit` a task and follow it, or `abort` one.
        #[command(subcommand)]
        command: TaskCommand,
    },
    /// Print a shell completion script.
    ///
    /// For bash, zsh, fish, elvish or powershell. install.sh installs them; by hand: `ahp-wrap completions bash >
    /// ~/.local/share/bash-completion/completions/ahp-wrap`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `ahp-wrap man | man -l -`.
    Man,
    /// Check what a run here would get: agents, hooks, the floor.
    ///
    /// Each supported agent on PATH (its version, and whether its shim is proven on it),
    /// whether its hooks could be injected, the user's shim manifests, what of the floor the
    /// kernel enforces, where logs go. Exit 0 when every agent found is on the version its shim is proven on and its hooks
    /// could be injected, and every shim manifest of the user's loads; 1 otherwise (agents
    /// not installed do not count).
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Apply what the floor kept aside, from the record a run named.
    ///
    /// The instructions an agent wrote into one of its mixed state files (`~/.claude.json`'s
    /// MCP servers, say), which a run did not merge; or a protected path its tree created
    /// (`~/.claude/CLAUDE.md`), which the run moved aside. The records are kept under
    /// $XDG_STATE_HOME/ahp-wrap/quarantine/. Prints each change, applies them to the state file (atomically), or puts the path
    /// back (unless something is there now), and removes the record. `--dry-run` only
    /// prints.
    Restore {
        /// The record the run named.
        file: std::path::PathBuf,
        /// Print the changes without applying them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Put the workspace back as it was when the last run in it started.
    ///
    /// From the run's checkpoints: restores each file the run changed or deleted, byte for byte with its mode (a
    /// symbolic link as it was), atomically per file, and deletes the files it created.
    /// Refuses, listing them, when a file changed after the run ended (it would be lost)
    /// unless `--force`.
    Undo(UndoArgs),
    /// Show what a run changed in the workspace, call by call.
    ///
    /// After each tool call, the files it created, changed (a diff for text) and deleted.
    /// Paged on a terminal.
    Changes(ChangesArgs),
    /// Prepare the machine (or a container) once for what runs need.
    ///
    /// `gemini`: the system settings file Gemini CLI reads our hooks from for users who are
    /// not root (/etc/ahp-wrap/gemini/settings.json); `apparmor`: the profile that lets this
    /// ahp-wrap make user namespaces where Ubuntu restricts them (/etc/apparmor.d/ahp-wrap).
    /// Each names the executables beside this one, which must be writable by root alone
    /// (install system-wide first). Run it again after an upgrade or a move: a run says when.
    /// `--remove` removes it; without a name, everything set up for this install.
    /// `container-profile` (any user; it changes nothing here): the container engine's own
    /// default seccomp profile (`--from FILE`, else the one found here) with the system calls
    /// the floor's namespaces need allowed, for `--security-opt seccomp=FILE`
    /// (docs/floor.md, "In a container").
    Setup {
        /// What to set up: gemini, apparmor or container-profile.
        #[arg(required_unless_present = "remove", value_name = "NAME")]
        framework: Option<String>,
        /// Remove the file instead.
        #[arg(long, conflicts_with_all = ["from", "output"])]
        remove: bool,
        /// container-profile: the engine's default profile to start from.
        #[arg(long, value_name = "FILE")]
        from: Option<std::path::PathBuf>,
        /// container-profile: where to write it (else standard output).
        #[arg(long, short, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Check shim manifests: an agent's hook system described in TOML.
    Shim {
        /// What to do with a manifest (only `check` so far).
        #[command(subcommand)]
        command: ShimCommand,
    },
    /// What an agent's hook system calls (not for people).
    ///
    /// Relays the hook payload (stdin) to the wrapper and prints the decision in the
    /// framework's own form.
    Hook {
        /// The framework (generic, claude-code, ...).
        framework: String,
        /// The hook or event name.
        hook: String,
    },
}

/// `ahp-wrap shim <COMMAND>`: work on shim manifests (shims/README.md in the sources).
#[derive(Debug, Subcommand)]
pub enum ShimCommand {
    /// Load a manifest and try it on the payloads recorded from the real agent.
    ///
    /// Refuses a manifest that does not load, with its line and field; then maps each
    /// recorded payload (`samples/<Event>.json` beside the manifest, or in --samples) to its
    /// AHP event and renders each decision that event can get. Exit 0 when all is well, 1
    /// otherwise.
    Check {
        /// The manifest.
        file: PathBuf,
        /// Where the recorded payloads are (default: `samples/` beside the manifest).
        #[arg(long, value_name = "DIR")]
        samples: Option<PathBuf>,
    },
}

/// `ahp-wrap policy <COMMAND>`: print, check and try out policy files, and show the floor.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the built-in default policy (a commented TOML file to start your own from).
    Default,
    /// Parse and validate a policy file and run its examples.
    Check {
        /// The policy file (TOML).
        file: PathBuf,
    },
    /// Print the effective floor for this machine and agent: what the kernel enforces and
    /// lacks, and every path it is told (nothing is created or changed). Exit 0 when the
    /// floor is complete here, 1 when a part is missing.
    Floor {
        /// The policy file (default: the built-in default policy).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// The agent's framework, for its own state and protected files (default: generic).
        #[arg(long, value_name = "NAME")]
        framework: Option<String>,
        /// The workspace (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Read an AHP event on stdin; print the decision and the rule that made it.
    ///
    /// The event is JSON: `{"event_type": "pre_action", "payload": {"tool_name": "Bash",
    /// "arguments": {"command": "rm -rf ~"}, "context": {"working_directory": "/home/me/p"}}}`
    /// (the params of an `ahp/event`; a whole JSON-RPC message is accepted too). Exit code:
    /// 0 allowed (or modified), 1 blocked, 3 escalated to a person, 2 the event or the policy
    /// cannot be read.
    Eval {
        /// The policy file (default: the built-in default policy).
        file: Option<PathBuf>,
    },
    /// Why an event gets its decision: the rule that decided, every rule that matched, and
    /// the rules that came closest, each condition said held or not.
    ///
    /// Reads the event as `policy eval` does (`ahp-wrap policy eval --help` shows its JSON)
    /// and exits as it does: 0 allowed (or modified), 1 blocked, 3 escalated, 2 unreadable.
    Explain {
        /// The policy file (default: the built-in default policy).
        file: Option<PathBuf>,
    },
}

/// `ahp-wrap audit <COMMAND>`: verify, show and summarize audit logs.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain. Exit codes: 0 intact; 1 tampered (edited, dropped, reordered,
    /// forged, cut in the middle, or an acknowledged record cut or replaced); 2 cannot
    /// verify (unreadable, or keyed and no key); 3 only the last record is incomplete and
    /// nothing acknowledges it (a crash mid-write, or a cut of the very end); 4 a record was
    /// cut and a later run recovered and went on (a crash or an edit: cannot be told).
    Verify {
        /// The audit log file (hash-chained JSON lines).
        path: PathBuf,
        /// The key of a keyed log (else the AHP_WRAP_AUDIT_KEY variable, if set).
        #[arg(long, value_name = "PATH")]
        key_file: Option<PathBuf>,
    },
    /// Show what runs decided: the trail's last run by default.
    ///
    /// Each decision's time (UTC), verdict, rule and what was asked, with its reason below;
    /// paged when long. The trail is $XDG_STATE_HOME/ahp-wrap/audit/
    /// (~/.local/state/ahp-wrap/audit/).
    Show(crate::audit::show::Show),
    /// Count decisions and list what was blocked.
    Summary {
        /// The audit log file (hash-chained JSON lines).
        path: PathBuf,
        /// Markdown instead of text (for CI job summaries).
        #[arg(long)]
        markdown: bool,
    },
}

/// The options of `ahp-wrap serve`: where to listen, the policy, and what the handshake
/// advertises.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// stdio, unix:PATH, http://ADDR or ws://ADDR (ADDR like 127.0.0.1:7700; port 0 picks
    /// one, printed on stderr).
    #[arg(long, default_value = "stdio", value_name = "WHERE")]
    pub listen: String,

    /// Policy file (TOML); default: the built-in default policy.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,

    /// enforce, or observe (block nothing, record what would have been blocked).
    #[arg(long, value_enum, default_value = "enforce")]
    pub mode: Mode,

    /// Token clients must present on HTTP (Authorization: Bearer or X-API-Key) and
    /// WebSocket (?token= or ?api_key=).
    #[arg(
        long,
        env = "AHP_WRAP_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,

    /// Append an audit record for every event and decision to this file.
    #[arg(long, value_name = "PATH")]
    pub audit_log: Option<PathBuf>,

    /// Key for HMAC-signing the audit log (else AHP_WRAP_AUDIT_KEY).
    #[arg(long, value_name = "PATH")]
    pub audit_key_file: Option<PathBuf>,

    /// timeout_ms advertised in the handshake.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub timeout: u64,

    /// max_depth advertised (and enforced) in the handshake.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub max_depth: u32,

    /// batch_size advertised (and enforced) in the handshake.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub batch_size: usize,

    /// With the approvals host on: seconds a person has to answer an escalation before it
    /// falls to --fail-mode (default: 1 s less than --timeout, so that the wrapper hears
    /// the answer before its own deadline).
    #[arg(long, value_name = "SECS")]
    pub approval_timeout: Option<u64>,

    /// With the approvals host on: what an escalation nobody answered in time becomes.
    #[arg(long, value_enum, default_value = "closed")]
    pub fail_mode: FailMode,

    /// The approvals host (off unless client tokens are given).
    #[command(flatten)]
    pub host: HostArgs,

    /// Metrics and spans of the events served.
    #[command(flatten)]
    pub telemetry: TelemetryArgs,

    /// Log filter.
    #[arg(
        long,
        env = "AHP_WRAP_LOG",
        default_value = "warn",
        value_name = "FILTER"
    )]
    pub log: String,
}

/// The Agent Host Protocol host: live sessions and pending escalations, answered from the
/// approvals page or any Agent Host Protocol client. It is on when tokens are given.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Approvals")]
pub struct HostArgs {
    /// Serve the approvals page on http://ADDR.
    ///
    /// Also the Agent Host Protocol's endpoint, at ws://…/host. With `serve --listen`, its own
    /// listener serves both as well.
    #[arg(long, value_name = "http://ADDR")]
    pub host_listen: Option<String>,

    /// A client token of the approvals page (prefer --host-token-file).
    ///
    /// NAME=TOKEN[:SCOPE,...], repeatable; TOKEN at least 16 characters. SCOPE: approve (the
    /// default: see and answer), view (see only), cwd=DIR (only sessions in DIR or below). NAME
    /// is what the audit log records as who answered. A command line is visible to other users.
    #[arg(long = "host-token", value_name = "NAME=TOKEN[:SCOPE,...]")]
    pub host_tokens: Vec<String>,

    /// A file of client tokens, one NAME=TOKEN[:SCOPE,...] per line (# comments).
    #[arg(long, value_name = "PATH")]
    pub host_token_file: Option<PathBuf>,

    /// Post each escalation to this URL as Slack-compatible JSON ({"text": ...}).
    #[arg(long, value_name = "URL")]
    pub notify_webhook: Option<String>,

    /// The approvals page's address as people reach it.
    ///
    /// For the webhook's link; default: the address it listens on.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

impl HostArgs {
    /// The host's options, as the host module takes them.
    pub(crate) fn request(&self) -> crate::host::HostRequest {
        crate::host::HostRequest {
            listen: self.host_listen.clone(),
            tokens: self.host_tokens.clone(),
            token_file: self.host_token_file.clone(),
            webhook: self.notify_webhook.clone(),
            public_url: self.public_url.clone(),
        }
    }
}

/// Live views of what the audit log records: Prometheus metrics and OpenTelemetry spans.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Telemetry")]
pub struct TelemetryArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics.
    ///
    /// ADDR like 127.0.0.1:9464; port 0 picks one, printed on stderr. `serve --listen http://…`
    /// serves them on its own address too.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,

    /// Export OpenTelemetry spans over OTLP/HTTP to URL.
    ///
    /// A span per run and per decided event, in protobuf (a base like http://127.0.0.1:4318
    /// gets /v1/traces). Without it, the standard OTEL_EXPORTER_OTLP_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

impl TelemetryArgs {
    /// These options as telemetry takes them, for a process in `role`.
    pub(crate) fn options(
        &self,
        role: &'static str,
        metrics: bool,
    ) -> Result<crate::telemetry::Options, crate::telemetry::TargetError> {
        crate::telemetry::Options::new(
            self.metrics_listen.clone(),
            self.otlp.as_deref(),
            role,
            metrics,
        )
    }
}

/// The options of `ahp-wrap mcp`: the server's name, and a run's options for the rest.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The server's name in tool names (`mcp__<name>__<tool>`, as agents name MCP tools):
    /// use the name the client's configuration gives it (default: the command's file name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Let the run this proxy was started in decide its calls and audit them, over that
    /// run's control socket (what `--wrap-mcp` writes into the agent's MCP configuration);
    /// --harness and --policy are then not used. Refused outside a run.
    #[arg(long)]
    pub via_run: bool,

    /// A run's options; its `agent` is the MCP server's command line.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `--fail-mode`: what happens when no valid decision arrives in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailMode {
    /// Block the action (the default).
    Closed,
    /// Let the action proceed, as if the harness had no opinion.
    Open,
}

impl From<FailMode> for crate::gate::FailMode {
    fn from(m: FailMode) -> Self {
        match m {
            FailMode::Closed => crate::gate::FailMode::Closed,
            FailMode::Open => crate::gate::FailMode::Open,
        }
    }
}

/// `--mode`: how the embedded policy is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Decisions are enforced.
    Enforce,
    /// Nothing is blocked or changed; what would have been is recorded.
    Observe,
}

impl From<Mode> for crate::gate::Mode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Enforce => crate::gate::Mode::Enforce,
            Mode::Observe => crate::gate::Mode::Observe,
        }
    }
}

/// `--auth`: how the harness token is presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthScheme {
    /// `Authorization: Bearer <token>` on HTTP, `?token=` on WebSocket.
    Bearer,
    /// `X-API-Key: <token>` on HTTP, `?api_key=` on WebSocket.
    ApiKey,
}

impl From<AuthScheme> for crate::transport::AuthScheme {
    fn from(a: AuthScheme) -> Self {
        match a {
            AuthScheme::Bearer => crate::transport::AuthScheme::Bearer,
            AuthScheme::ApiKey => crate::transport::AuthScheme::ApiKey,
        }
    }
}

/// `--summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryArg {
    /// When at least one blocking event was decided.
    Auto,
    /// After every run, even with --quiet.
    Always,
    /// Not even when blocking events were decided.
    Never,
}

/// `--floor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FloorArg {
    /// Wherever the kernel supports it; what it lacks is said before the agent starts.
    On,
    /// No floor: the run says so and audits it.
    Off,
}

/// `--nested-sandboxes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NestedArg {
    /// When the agent's shim says it starts a sandbox of its own (Codex by default, Claude
    /// Code with `sandbox.enabled`).
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

#[cfg(test)]
mod tests;

/// `ahp-wrap undo`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    /// Restore only these files or directories (relative to the current directory).
    pub paths: Vec<std::path::PathBuf>,
    /// The run to undo (its id, or the start of it; `ahp-wrap changes` names it): default
    /// the last run in this workspace.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Go back to the checkpoint before tool call N instead of the run's start.
    #[arg(long, value_name = "N")]
    pub to: Option<u64>,
    /// List what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Undo even the files changed or created after the run ended (their later content is
    /// lost).
    #[arg(long)]
    pub force: bool,
    /// The workspace (default: the current directory, or the workspace it lies in).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<std::path::PathBuf>,
}

/// `ahp-wrap changes`.
#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// The run (its id, or the start of it): default the last run in this workspace.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Print JSON (one object per tool call) instead of text.
    #[arg(long)]
    pub json: bool,
    /// The workspace (default: the current directory, or the workspace it lies in).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<std::path::PathBuf>,
}
