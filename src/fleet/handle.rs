//! One delivery, start to ack: parse the task, the L3 gate, the run with its events
//! streamed to the caller, the result, and only then the ack. Anything that cannot be
//! answered (no reply queue, a lost connection) is never acked as done.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicRejectOptions};
use lapin::Channel;

use super::amqp::{self, AmqpError};
use super::message::{Abort, Status, Task, TaskEvent, TaskResult};
use super::task_run::{summary_of, Running};
use super::worker::{Session, Worker};
use crate::exit::Exit;

/// How often the run's audit log is read for new events.
const TICK: Duration = Duration::from_millis(50);

/// How handling a delivery ended.
pub(crate) enum Handled {
    /// Answered and acked (or rejected, for a message that is no task).
    Done,
    /// The connection went: the task stays unacked and is given out again.
    Lost(String),
    /// The worker is stopping: the task is to be given back.
    Shutdown,
}

/// Why a run was stopped before it ended.
enum Stop {
    Abort(Option<String>),
    Deadline(u64),
    Shutdown,
    Lost(String),
}

/// How a task ended, as its result says.
struct Ending {
    status: Status,
    exit_code: Option<u8>,
    summary: String,
    reason: Option<String>,
    output: Option<serde_json::Value>,
}

impl Ending {
    /// A task that never ran.
    fn unrun(status: Status, reason: String) -> Ending {
        Ending {
            status,
            exit_code: None,
            summary: String::new(),
            reason: Some(reason),
            output: None,
        }
    }
}

/// Why a task is left unacked, to be given out again: the connection to the broker, or the
/// run's process, is gone.
struct Unacked(String);

impl From<AmqpError> for Unacked {
    fn from(e: AmqpError) -> Unacked {
        Unacked(crate::error_chain(&e))
    }
}

/// Answers one task on its reply queue, with its correlation id.
struct Replier {
    ch: Channel,
    reply_to: String,
    task_id: String,
    seq: u64,
    worker: String,
    redelivered: bool,
    started: Instant,
}

impl Replier {
    async fn event(&mut self, mut event: TaskEvent) -> Result<(), AmqpError> {
        self.seq += 1;
        event.seq = self.seq;
        self.send(&super::body(&event)).await
    }

    async fn note(&mut self, event: &str, message: String) -> Result<(), AmqpError> {
        self.event(TaskEvent {
            kind: "event".into(),
            task_id: self.task_id.clone(),
            seq: 0,
            event: event.into(),
            message: Some(message),
            ahp: None,
        })
        .await
    }

    async fn result(&self, end: Ending) -> Result<(), AmqpError> {
        let result = TaskResult {
            kind: "result".into(),
            task_id: self.task_id.clone(),
            status: end.status,
            exit_code: end.exit_code,
            summary: end.summary,
            output: end.output,
            reason: end.reason,
            worker: self.worker.clone(),
            redelivered: self.redelivered,
            duration_ms: self.started.elapsed().as_millis() as u64,
        };
        let body = super::body(&result);
        self.send(&body).await?;
        crate::telemetry::fleet_task(match result.status {
            Status::Complete => "complete",
            Status::Failed => "failed",
            Status::Aborted => "aborted",
            Status::Refused => "refused",
        });
        Ok(())
    }

    async fn send(&self, body: &[u8]) -> Result<(), AmqpError> {
        let props = amqp::json_props(&self.task_id, false);
        amqp::publish(&self.ch, "", &self.reply_to, body, props, false).await
    }
}

/// Handles one delivery of the task queue.
pub(crate) async fn delivery(
    w: &Worker,
    s: &mut Session,
    d: Delivery,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
) -> Handled {
    let reply_to = d
        .properties
        .reply_to()
        .as_ref()
        .map(|r| r.as_str().to_owned());
    let correlation = d
        .properties
        .correlation_id()
        .as_ref()
        .map(|c| c.as_str().to_owned());
    let parsed = Task::parse(&d.data);
    let Some(reply_to) = reply_to.filter(|r| !r.is_empty()) else {
        tracing::warn!("a message without reply_to was dropped: nobody can be answered");
        return reject(&d).await;
    };
    let mut answer = Replier {
        ch: s.tasks.clone(),
        reply_to,
        task_id: correlation.unwrap_or_else(|| "unknown".into()),
        seq: 0,
        worker: w.name.clone(),
        redelivered: d.redelivered,
        started: Instant::now(),
    };
    let task = match parsed {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(task = %answer.task_id, "malformed task refused: {e}");
            let refused = answer
                .result(Ending::unrun(Status::Refused, e.to_string()))
                .await;
            return match refused {
                Ok(()) => reject(&d).await,
                Err(e) => Handled::Lost(crate::error_chain(&e)),
            };
        }
    };
    answer.task_id = task.task_id.clone();
    let outcome = run_task(w, s, &mut answer, &task, shutdown).await;
    match outcome {
        Ok(true) => ack(&d).await,
        Ok(false) => Handled::Shutdown,
        Err(Unacked(why)) => Handled::Lost(why),
    }
}

/// Gates and runs `task`; `Ok(true)`: answered, to be acked; `Ok(false)`: shut down.
async fn run_task(
    w: &Worker,
    s: &mut Session,
    answer: &mut Replier,
    task: &Task,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
) -> Result<bool, Unacked> {
    if s.recent_aborts.contains(&task.task_id) {
        let why = "aborted by the caller before it started".to_owned();
        answer.result(Ending::unrun(Status::Aborted, why)).await?;
        return Ok(true);
    }
    let refused = super::safety::check(&w.capability, w.safety.as_ref(), task)
        .err()
        .or_else(|| w.launcher.refuses(task));
    if let Some(reason) = refused {
        tracing::info!(task = %task.task_id, "refused: {reason}");
        answer
            .result(Ending::unrun(Status::Refused, reason))
            .await?;
        return Ok(true);
    }
    let session = format!("hcp-{}", crate::random_hex(8));
    answer
        .note(
            "accepted",
            format!("accepted by {} (session {session})", w.name),
        )
        .await?;
    let mut run = match w.launcher.start(task) {
        Ok(r) => r,
        Err(e) => {
            let why = format!("cannot start the run: {e}");
            answer.result(Ending::unrun(Status::Failed, why)).await?;
            return Ok(true);
        }
    };
    let (status, stop) = supervise(w, s, &mut run, answer, shutdown).await;
    let status = match status {
        Ok(st) => st,
        Err(e) => return Err(Unacked(format!("lost the run's process: {e}"))),
    };
    let lines = run.new_audit_lines();
    let schema = w.capability.output_schema.as_ref();
    let finished = run.finish(status, schema).await;
    match stop {
        Some(Stop::Lost(why)) => return Err(Unacked(why)),
        Some(Stop::Shutdown) => return Ok(false),
        _ => {}
    }
    for line in lines {
        if let Some(ev) = super::events::from_audit_line(&task.task_id, 0, &line) {
            answer.event(ev).await?;
        }
    }
    let code = Exit::of_status(finished.status).code();
    let (status, reason, output) = verdict(code, stop, finished.output);
    // A failure with nothing on stdout is summed up by what the run said on stderr.
    let text = if status == Status::Complete || !finished.stdout.is_empty() {
        &finished.stdout
    } else {
        &finished.stderr
    };
    let end = Ending {
        status,
        exit_code: Some(code),
        summary: summary_of(text),
        reason,
        output,
    };
    answer.result(end).await?;
    Ok(true)
}

/// The status, reason and output of an ended run.
fn verdict(
    code: u8,
    stop: Option<Stop>,
    output: Option<Result<serde_json::Value, String>>,
) -> (Status, Option<String>, Option<serde_json::Value>) {
    match stop {
        Some(Stop::Abort(why)) => {
            let why = why.map_or(String::new(), |w| format!(": {w}"));
            return (
                Status::Aborted,
                Some(format!("aborted by the caller{why}")),
                None,
            );
        }
        Some(Stop::Deadline(secs)) => {
            let why = format!("stopped at the capability's time limit of {secs} s");
            return (Status::Aborted, Some(why), None);
        }
        _ => {}
    }
    match (code, output) {
        (_, Some(Err(why))) => (Status::Failed, Some(why), None),
        (0, out) => (Status::Complete, None, out.and_then(Result::ok)),
        (c, out) => (
            Status::Failed,
            Some(format!("the agent exited with {c}")),
            out.and_then(Result::ok),
        ),
    }
}

/// Waits for the run's end, streaming its events; stops it on an abort for this task,
/// the capability's time limit, shutdown, or a lost connection.
async fn supervise(
    w: &Worker,
    s: &mut Session,
    run: &mut Running,
    answer: &mut Replier,
    shutdown: &mut (impl Future<Output = ()> + Unpin),
) -> (std::io::Result<std::process::ExitStatus>, Option<Stop>) {
    let limit = w.capability.constraints.max_duration_secs;
    let deadline = async {
        match limit {
            Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(TICK);
    let stop = loop {
        tokio::select! {
            status = run.wait() => return (status, None),
            () = &mut *shutdown => break Stop::Shutdown,
            () = &mut deadline => break Stop::Deadline(limit.unwrap_or_default()),
            _ = tick.tick() => {
                if !s.conn.status().connected() {
                    break Stop::Lost("the connection closed".into());
                }
                if let Err(e) = stream_events(run, answer).await {
                    break Stop::Lost(crate::error_chain(&e));
                }
            }
            next = s.aborts.next() => match next {
                Some(Ok(d)) => match serde_json::from_slice::<Abort>(&d.data) {
                    Ok(a) if a.task_id == answer.task_id => break Stop::Abort(a.reason),
                    _ => super::worker::remember_abort(s, &d.data),
                },
                Some(Err(e)) => break Stop::Lost(crate::error_chain(&e)),
                None => break Stop::Lost("the abort consumer was cancelled".into()),
            },
        }
    };
    tracing::info!(task = %answer.task_id, "stopping the run");
    (run.stop(w.launcher.grace).await, Some(stop))
}

/// Publishes the run's new audit records as events.
async fn stream_events(run: &mut Running, answer: &mut Replier) -> Result<(), AmqpError> {
    for line in run.new_audit_lines() {
        if let Some(ev) = super::events::from_audit_line(&answer.task_id, 0, &line) {
            answer.event(ev).await?;
        }
    }
    Ok(())
}

async fn ack(d: &Delivery) -> Handled {
    match d.acker.ack(BasicAckOptions::default()).await {
        Ok(_) => Handled::Done,
        Err(e) => Handled::Lost(crate::error_chain(&e)),
    }
}

/// Drops a message that is no task (not requeued: it would come back forever).
async fn reject(d: &Delivery) -> Handled {
    match d.acker.reject(BasicRejectOptions { requeue: false }).await {
        Ok(_) => Handled::Done,
        Err(e) => Handled::Lost(crate::error_chain(&e)),
    }
}
