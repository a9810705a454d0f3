//! The caller (`ahp-wrap task submit` / `task abort`): publishes a task to the
//! capability's queue with a private reply queue, prints the events as they come, and
//! returns the result; or publishes an abort.

use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::ExchangeDeclareOptions;
use lapin::types::FieldTable;

use super::amqp::{self, broker, AmqpError, Target};
use super::message::{Abort, Task, TaskResult};
use super::{ABORT_EXCHANGE, TASK_EXCHANGE};

/// Why a submission has no result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SubmitError {
    /// Connecting, declaring or publishing failed (the task may not have been submitted).
    #[error(transparent)]
    Amqp(#[from] AmqpError),
    /// The caller's timeout passed before the result; the task may still run.
    #[error("no result for task {task} within {secs} s")]
    Timeout {
        /// The task's id, to abort or look for it.
        task: String,
        /// The timeout, in whole seconds.
        secs: u64,
    },
    /// The reply consumer ended or failed (connection lost) before the result.
    #[error("the broker closed the reply queue before the result came")]
    Closed,
    /// A reply with this task's correlation id is not JSON, or not a result's shape;
    /// holds the parser's error.
    #[error("a reply for this task is not HCP: {0}")]
    BadReply(String),
}

/// Submits `task`; calls `on_submitted` once the broker has confirmed it, then
/// `on_message` with each reply body (events, then the result), and returns the result.
/// `timeout` bounds the wait for the result.
pub(crate) async fn submit(
    target: &Target,
    task: &Task,
    timeout: Option<Duration>,
    on_submitted: impl FnOnce(),
    mut on_message: impl FnMut(&[u8]),
) -> Result<TaskResult, SubmitError> {
    let conn = target.connect("ahp-wrap task submit").await?;
    let ch = amqp::confirmed_channel(&conn).await?;
    declare_exchange(&ch, TASK_EXCHANGE, lapin::ExchangeKind::Direct).await?;
    let (reply, mut replies) = amqp::private_queue(&ch, "reply queue", None, "replies").await?;
    let props = amqp::json_props(&task.task_id, true).with_reply_to(reply.as_str().into());
    let body = super::body(task);
    amqp::publish(&ch, TASK_EXCHANGE, &task.capability, &body, props, true).await?;
    on_submitted();
    let wait = async {
        while let Some(next) = replies.next().await {
            let d = next.map_err(|_| SubmitError::Closed)?;
            let ours = d.properties.correlation_id().as_ref().map(|c| c.as_str())
                == Some(task.task_id.as_str());
            if !ours {
                continue;
            }
            on_message(&d.data);
            if let Some(result) = as_result(&d.data)? {
                return Ok(result);
            }
        }
        Err(SubmitError::Closed)
    };
    let outcome = match timeout {
        Some(t) => tokio::time::timeout(t, wait).await.unwrap_or_else(|_| {
            Err(SubmitError::Timeout {
                task: task.task_id.clone(),
                secs: t.as_secs(),
            })
        }),
        None => wait.await,
    };
    let _ = conn.close(200, "done".into()).await;
    outcome
}

/// The result in a reply body, if it is one.
fn as_result(body: &[u8]) -> Result<Option<TaskResult>, SubmitError> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| SubmitError::BadReply(e.to_string()))?;
    if v.get("type").and_then(|t| t.as_str()) != Some("result") {
        return Ok(None);
    }
    serde_json::from_value(v)
        .map(Some)
        .map_err(|e| SubmitError::BadReply(e.to_string()))
}

/// Publishes an abort for `task_id` to every worker.
pub(crate) async fn abort(
    target: &Target,
    task_id: &str,
    reason: Option<String>,
) -> Result<(), AmqpError> {
    let conn = target.connect("ahp-wrap task abort").await?;
    let ch = amqp::confirmed_channel(&conn).await?;
    declare_exchange(&ch, ABORT_EXCHANGE, lapin::ExchangeKind::Fanout).await?;
    let abort = Abort {
        kind: "abort".into(),
        task_id: task_id.into(),
        reason,
    };
    let body = super::body(&abort);
    let props = amqp::json_props(task_id, false);
    let sent = amqp::publish(&ch, ABORT_EXCHANGE, "", &body, props, false).await;
    let _ = conn.close(200, "done".into()).await;
    sent
}

async fn declare_exchange(
    ch: &lapin::Channel,
    name: &str,
    kind: lapin::ExchangeKind,
) -> Result<(), AmqpError> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(name.into(), kind, durable, FieldTable::default())
        .await
        .map_err(broker("declare an exchange"))
}
