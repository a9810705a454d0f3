//! The `worker` and `task` subcommands: options to a configured [`Worker`] or submission,
//! what they print, and their exit codes.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::amqp::Target;
use super::capability::Capability;
use super::message::{Status, Task, TaskResult};
use super::safety::SafetyPolicy;
use super::task_run::Launcher;
use super::worker::Worker;
use crate::cli::{AbortArgs, AmqpArgs, SubmitArgs, TaskCommand, WorkerArgs};
use crate::exit::{self, CommandResult, Exit, Failure};

/// A usage or set-up failure (exit 2).
fn error(why: impl std::fmt::Display) -> Failure {
    Failure::new(Exit::Error, why)
}

fn target(a: &AmqpArgs) -> Result<Target, Failure> {
    Ok(Target::parse(
        &a.amqp,
        a.amqp_heartbeat,
        Duration::from_secs(a.connect_timeout.max(1)),
    )?)
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    // One thread: the thread that starts a run is then the one whose death the run's
    // parent-death signal watches (see `task_run`).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| error(format!("cannot start the runtime: {e}")))
}

/// `ahp-wrap worker`.
pub fn worker(args: WorkerArgs) -> CommandResult {
    let telemetry = args.telemetry.options("worker", false)?;
    let (worker, _dir) = configure(args)?;
    runtime()?.block_on(async {
        crate::telemetry::start(telemetry).await.map_err(error)?;
        worker.run(shutdown_signal()).await?;
        Ok(Exit::OK)
    })
}

/// A private directory removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn configure(args: WorkerArgs) -> Result<(Worker, WorkDir), Failure> {
    let capability = Capability::load(&args.capability)?;
    if args.run.harness.is_some() && args.run.policy.is_some() {
        return Err(error(
            "--policy applies to the embedded harness; it cannot be used with --harness",
        ));
    }
    let safety = match &args.run.harness {
        Some(_) => None,
        None => Some(SafetyPolicy {
            policy: crate::commands::load_policy(args.run.policy.as_deref()).map_err(error)?,
            mode: args.run.mode.into(),
        }),
    };
    let target = target(&args.amqp)?;
    let dir = std::env::temp_dir().join(format!(
        "ahp-wrap-worker-{}-{}",
        std::process::id(),
        crate::random_hex(4)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| error(format!("cannot make {}: {e}", dir.display())))?;
    let dir = WorkDir(dir);
    let exe = std::env::current_exe()
        .map_err(|e| error(format!("cannot find our own executable: {e}")))?;
    let launcher = Launcher {
        exe,
        wrap_args: wrap_args(&args),
        agent: args.agent,
        audit_log: args.audit_log.unwrap_or_else(|| dir.0.join("audit.jsonl")),
        work_dir: dir.0.clone(),
        grace: Duration::from_secs(args.abort_grace),
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "host".to_owned(), |h| h.trim().to_owned());
    let worker = Worker {
        target,
        capability,
        safety,
        launcher,
        backoff_max: Duration::from_secs(args.reconnect_max.max(1)),
        name: format!("{host}:{}", std::process::id()),
    };
    Ok((worker, dir))
}

/// The run options every task's run gets: the worker's own, and its telemetry (each task's
/// run exports its spans where the worker's go).
fn wrap_args(a: &WorkerArgs) -> Vec<OsString> {
    let mut out = a.run.to_args();
    if let Some(otlp) = &a.telemetry.otlp {
        out.push("--otlp".into());
        out.push(otlp.into());
    }
    out
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("ahp-wrap worker: stopping");
}

/// `ahp-wrap task …`.
pub fn task(cmd: TaskCommand) -> CommandResult {
    match cmd {
        TaskCommand::Submit(args) => submit(args),
        TaskCommand::Abort(args) => abort(args),
    }
}

fn level<T: serde::de::DeserializeOwned>(what: &str, v: &str) -> Result<T, Failure> {
    serde_json::from_value(Value::String(v.to_uppercase()))
        .map_err(|_| error(format!("invalid {what} {v:?}")))
}

fn task_of(args: &SubmitArgs) -> Result<Task, Failure> {
    let mut task = Task::new(
        &args.capability,
        &args.intent,
        level("--risk (R1..R5)", &args.risk)?,
        level("--data-class (T1..T4)", &args.data_class)?,
    );
    if let Some(id) = &args.id {
        if !super::is_name(id) {
            return Err(error(format!(
                "--id {id:?} is not a plain name (letters, digits, - _ . :)"
            )));
        }
        task.task_id = id.clone();
    }
    if let Some(input) = &args.input {
        task.input =
            serde_json::from_str(input).map_err(|e| error(format!("--input is not JSON: {e}")))?;
    }
    task.hazards = args.hazard.clone();
    Ok(task)
}

fn submit(args: SubmitArgs) -> CommandResult {
    let task = task_of(&args)?;
    let target = target(&args.amqp)?;
    let rt = runtime()?;
    let json = args.json;
    let submitted = || match json {
        true => exit::print(&format!(
            "{}\n",
            serde_json::json!({"type": "submitted", "task_id": task.task_id})
        )),
        false => exit::print(&format!(
            "task {} submitted to {}\n",
            task.task_id, task.capability
        )),
    };
    let timeout = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    let print = |body: &[u8]| match json {
        true => exit::print(&format!("{}\n", String::from_utf8_lossy(body))),
        false => exit::print(&as_text(body)),
    };
    let wait = super::submit::submit(&target, &task, timeout, submitted, print);
    match rt.block_on(abort_on_ctrl_c(&target, &task.task_id, wait)) {
        None => Ok(Exit::Status(crate::exit::SIGNAL_BASE + libc::SIGINT as u8)),
        Some(Ok(result)) => Ok(exit_of(&result)),
        Some(Err(super::submit::SubmitError::Timeout { task, secs })) => Err(Failure::new(
            Exit::TimedOut,
            format!("no result for task {task} within {secs} s"),
        )),
        Some(Err(e)) => Err(e.into()),
    }
}

/// Runs `wait`; a first Ctrl-C asks the workers to abort the task (and the wait goes on, for
/// the `aborted` result), a second one stops waiting (`None`; the task may still run).
async fn abort_on_ctrl_c<T>(
    target: &Target,
    task_id: &str,
    wait: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::pin!(wait);
    let mut asked = false;
    loop {
        tokio::select! {
            done = &mut wait => return Some(done),
            _ = tokio::signal::ctrl_c() => {
                if asked {
                    eprintln!("ahp-wrap: stopped waiting for task {task_id}");
                    return None;
                }
                asked = true;
                eprintln!("ahp-wrap: aborting task {task_id} (Ctrl-C again: stop waiting)");
                let why = Some("the caller pressed Ctrl-C".to_owned());
                if let Err(e) = super::submit::abort(target, task_id, why).await {
                    eprintln!("ahp-wrap: {}", crate::error_chain(&e));
                }
            }
        }
    }
}

/// A reply as a line of text.
fn as_text(body: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return format!("(unreadable reply) {}\n", String::from_utf8_lossy(body));
    };
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    if s("type") == "result" {
        let code = v.get("exit_code").map(Value::to_string).unwrap_or_default();
        let mut text = format!("result: {} (exit {code})", s("status"));
        if !s("reason").is_empty() {
            text.push_str(&format!(": {}", s("reason")));
        }
        if !s("summary").is_empty() {
            text.push_str(&format!("\n{}", s("summary")));
        }
        return text + "\n";
    }
    format!("[{}] {}: {}\n", v["seq"], s("event"), s("message"))
}

fn exit_of(r: &TaskResult) -> Exit {
    match r.status {
        Status::Complete => Exit::OK,
        Status::Failed => Exit::Status(r.exit_code.filter(|c| *c != 0).unwrap_or(1)),
        Status::Aborted => Exit::TaskAborted,
        Status::Refused => Exit::TaskRefused,
    }
}

fn abort(args: AbortArgs) -> CommandResult {
    let target = target(&args.amqp)?;
    runtime()?.block_on(super::submit::abort(&target, &args.task_id, args.reason))?;
    Ok(Exit::OK)
}
