//! The worker: one connection to the broker, the capability's queue consumed with a
//! prefetch of one, a private queue on the abort exchange, and the loop that takes each
//! delivery to [`super::handle`]. A lost connection (a broker restart, a network cut,
//! missed heartbeats) is reconnected with exponential backoff; whatever task was running
//! is stopped and left unacked, so the broker gives it out again.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicNackOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, Consumer};

use super::amqp::{self, broker, AmqpError, Target};
use super::capability::Capability;
use super::handle::{self, Handled};
use super::message::Abort;
use super::safety::SafetyPolicy;
use super::task_run::Launcher;
use super::{task_queue, ABORT_EXCHANGE};

/// First wait before reconnecting; doubled after each failure up to `Worker::backoff_max`.
const BACKOFF_START: Duration = Duration::from_millis(250);
/// How many recent abort ids are remembered for tasks that have not arrived yet.
const RECENT_ABORTS: usize = 256;

/// A configured worker.
pub(crate) struct Worker {
    /// The broker (`--amqp`), reconnected to whenever the connection is lost.
    pub target: Target,
    /// The capability file's declaration: the queue consumed and the L3 gate's limits.
    pub capability: Capability,
    /// The policy of the safety gate every task passes first ([`super::safety`]); `None`: the
    /// capability's declaration alone is checked.
    pub safety: Option<SafetyPolicy>,
    /// Starts each task's supervised run (`ahp-wrap [options] -- agent`).
    pub launcher: Launcher,
    /// The longest wait between reconnection attempts.
    pub backoff_max: Duration,
    /// Who we are in results (`host:pid`).
    pub name: String,
}

/// What a worker session is made of.
pub(crate) struct Session {
    /// The connection to the broker; closed on shutdown, replaced on reconnect.
    pub conn: Connection,
    /// Consumes tasks and publishes answers (publisher confirms on).
    pub tasks: Channel,
    /// Deliveries from the capability's task queue, one unacked at a time (prefetch 1).
    pub consumer: Consumer,
    /// Abort messages from this worker's private queue on `hcp.abort`, without acks.
    pub aborts: Consumer,
    /// Abort ids heard while no task of that id was running.
    pub recent_aborts: VecDeque<String>,
}

/// How a session ended.
enum End {
    Shutdown,
    Lost(String),
}

impl Worker {
    /// Runs until `shutdown` resolves. Fails only when the first connection cannot be made
    /// (a broker down at start is a configuration problem to report, not to wait out).
    pub(crate) async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<(), AmqpError> {
        tokio::pin!(shutdown);
        let mut session = self.open().await?;
        tracing::info!(broker = %self.target.shown, capability = %self.capability.name, "worker ready");
        eprintln!(
            "ahp-wrap worker: consuming {} on {}",
            task_queue(&self.capability.name),
            self.target.shown
        );
        loop {
            match self.serve(&mut session, &mut shutdown).await {
                End::Shutdown => {
                    let _ = session.conn.close(200, "worker stopping".into()).await;
                    return Ok(());
                }
                End::Lost(why) => {
                    eprintln!("ahp-wrap worker: lost the broker ({why}); reconnecting");
                    match self.reconnect(&mut shutdown).await {
                        Some(s) => session = s,
                        None => return Ok(()),
                    }
                    eprintln!("ahp-wrap worker: reconnected to {}", self.target.shown);
                }
            }
        }
    }

    /// Reconnects with exponential backoff; `None` when shut down meanwhile.
    async fn reconnect(
        &self,
        shutdown: &mut (impl Future<Output = ()> + Unpin),
    ) -> Option<Session> {
        let mut wait = BACKOFF_START;
        loop {
            tokio::select! {
                () = &mut *shutdown => return None,
                () = tokio::time::sleep(wait) => {}
            }
            match self.open().await {
                Ok(s) => return Some(s),
                Err(e) => tracing::warn!("reconnecting: {}", crate::error_chain(&e)),
            }
            wait = (wait * 2).min(self.backoff_max);
        }
    }

    /// Connects and declares what the worker consumes.
    async fn open(&self) -> Result<Session, AmqpError> {
        let conn = self
            .target
            .connect(&format!("ahp-wrap worker {}", self.name))
            .await?;
        let tasks = amqp::confirmed_channel(&conn).await?;
        amqp::declare_topology(&tasks, &self.capability.name).await?;
        tasks
            .basic_qos(1, BasicQosOptions::default())
            .await
            .map_err(broker("set the prefetch to one"))?;
        let consumer = tasks
            .basic_consume(
                task_queue(&self.capability.name).as_str().into(),
                format!("worker-{}", self.name).as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(broker("consume the task queue"))?;
        let aborts = abort_consumer(&conn).await?;
        Ok(Session {
            conn,
            tasks,
            consumer,
            aborts,
            recent_aborts: VecDeque::new(),
        })
    }

    async fn serve(
        &self,
        s: &mut Session,
        shutdown: &mut (impl Future<Output = ()> + Unpin),
    ) -> End {
        loop {
            tokio::select! {
                () = &mut *shutdown => return End::Shutdown,
                next = s.consumer.next() => {
                    let delivery = match next {
                        Some(Ok(d)) => d,
                        Some(Err(e)) => return End::Lost(crate::error_chain(&e)),
                        None => return End::Lost("the task consumer was cancelled".into()),
                    };
                    let tag = delivery.delivery_tag;
                    match handle::delivery(self, s, delivery, &mut *shutdown).await {
                        Handled::Done => {}
                        Handled::Lost(why) => return End::Lost(why),
                        Handled::Shutdown => {
                            // Give the task straight back, for another worker.
                            let _ = s.tasks.basic_nack(tag, BasicNackOptions { requeue: true, ..Default::default() }).await;
                            return End::Shutdown;
                        }
                    }
                }
                next = s.aborts.next() => match next {
                    Some(Ok(d)) => remember_abort(s, &d.data),
                    Some(Err(e)) => return End::Lost(crate::error_chain(&e)),
                    None => return End::Lost("the abort consumer was cancelled".into()),
                },
            }
        }
    }
}

/// Notes an abort for a task not running here: if it arrives later, it is not run.
pub(crate) fn remember_abort(s: &mut Session, body: &[u8]) {
    if let Ok(abort) = serde_json::from_slice::<Abort>(body) {
        s.recent_aborts.push_back(abort.task_id);
        if s.recent_aborts.len() > RECENT_ABORTS {
            s.recent_aborts.pop_front();
        }
    }
}

/// A private, auto-deleted queue bound to the abort exchange, consumed without acks.
async fn abort_consumer(conn: &Connection) -> Result<Consumer, AmqpError> {
    let ch = conn
        .create_channel()
        .await
        .map_err(broker("open the abort channel"))?;
    let (_, aborts) =
        amqp::private_queue(&ch, "abort queue", Some(ABORT_EXCHANGE), "aborts").await?;
    Ok(aborts)
}
