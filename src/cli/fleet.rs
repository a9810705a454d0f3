//! The command line of the HCP fleet: `ahp-wrap worker` and `ahp-wrap task submit|abort`
//! (see [`crate::fleet`]).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `ahp-wrap task <COMMAND>`: what a client of the workers does.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Submit a task and print its events and result. Exit codes: 0 complete; the agent's
    /// code (else 1) when it failed; 121 refused; 123 aborted; 124 no result in time; 2 no
    /// broker or bad arguments.
    Submit(SubmitArgs),
    /// Ask every worker to stop a task (SIGTERM, then SIGKILL to the agent's tree).
    Abort(AbortArgs),
}

/// The broker and the log filter: the options every fleet command takes.
#[derive(Debug, Args)]
pub struct AmqpArgs {
    // Help text, not rustdoc: its brackets are not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// The broker: amqp://[USER:PASS@]HOST[:PORT]/VHOST (`%2f` is the default vhost).
    #[arg(
        long,
        env = "AHP_WRAP_AMQP",
        hide_env_values = true,
        value_name = "URI"
    )]
    pub amqp: String,

    /// AMQP heartbeat interval asked for, in seconds (unless the URI says `heartbeat=`).
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub amqp_heartbeat: u16,

    /// Give up on one connection attempt after this many seconds.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub connect_timeout: u64,

    /// Log filter.
    #[arg(
        long,
        env = "AHP_WRAP_LOG",
        default_value = "warn",
        value_name = "FILTER"
    )]
    pub log: String,
}

/// The options of `ahp-wrap task submit`: the task's fields and how to wait for its result.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The broker the task is published on.
    #[command(flatten)]
    pub amqp: AmqpArgs,

    /// The capability (its workers' queue).
    #[arg(long, value_name = "NAME")]
    pub capability: String,

    /// What to achieve.
    #[arg(long, value_name = "TEXT")]
    pub intent: String,

    /// The task's input (JSON), checked against the capability's input schema.
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,

    /// The risk the task declares (R1 lowest .. R5 highest).
    #[arg(long, default_value = "R1", value_name = "R1..R5")]
    pub risk: String,

    /// The data class the task declares (T1 public .. T4 restricted).
    #[arg(long, default_value = "T1", value_name = "T1..T4")]
    pub data_class: String,

    /// A hazard category the task declares (repeatable).
    #[arg(long, value_name = "NAME")]
    pub hazard: Vec<String>,

    /// The task id (default: a fresh one, printed first).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,

    /// Give up waiting for the result after this many seconds (0: wait as long as it takes).
    #[arg(long, default_value_t = 0, value_name = "SECS")]
    pub timeout: u64,

    /// Print every message as a JSON line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The options of `ahp-wrap task abort`: which task, and why.
#[derive(Debug, Args)]
pub struct AbortArgs {
    /// The broker the workers listen on.
    #[command(flatten)]
    pub amqp: AmqpArgs,

    /// The task to stop.
    pub task_id: String,

    /// Why (passed on in the task's result).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

/// The options of `ahp-wrap worker`: the broker, the capability served, and how each task
/// is run.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The broker whose queue the tasks come from.
    #[command(flatten)]
    pub amqp: AmqpArgs,

    /// The capability file (TOML: name, description, schemas, risk ceiling, constraints).
    #[arg(long, value_name = "FILE")]
    pub capability: PathBuf,

    /// The run options each task's run gets: the harness or the embedded policy (which
    /// also checks intents at L3), the fail mode, the deadline, the framework, PATH shims.
    #[command(flatten)]
    pub run: super::run::Supervision,

    /// The longest wait between reconnection attempts after the broker is lost, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub reconnect_max: u64,

    /// Seconds between SIGTERM and SIGKILL when a task's run is stopped.
    #[arg(long, default_value_t = 5, value_name = "SECS")]
    pub abort_grace: u64,

    /// The audit log of every task's run (default: one in a temporary directory, removed
    /// when the worker stops).
    #[arg(long, value_name = "PATH")]
    pub audit_log: Option<PathBuf>,

    /// The worker's own metrics and spans; `--otlp` is passed on to each task's run too.
    #[command(flatten)]
    pub telemetry: super::TelemetryArgs,

    /// The agent command; `{task}` in an argument is replaced by the task's intent, and
    /// without one the intent is written to the agent's stdin.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "AGENT",
        required = true
    )]
    pub agent: Vec<OsString>,
}
