//! The stream proxy as an interceptor of a run: the child's stdin and stdout are piped to
//! us, and the proxy sits between them and our own stdin and stdout for as long as both
//! peers are there. When the client hangs up, the server's stdin is closed and it gets a
//! moment to exit on its own before the run ends it; when the server ends or writes what
//! cannot be passed on, the client's open requests get errors and the run ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{run, Ended, Options, Protocol, Streams};
use crate::child::{Agent, Stdio};
use crate::frameworks::{AgentCommand, RunContext};
use crate::gate::Gate;
use crate::intercept::{Alarm, End, Interceptor, PrepareError, Report, Stop};

/// How long a server has to exit by itself once its stdin is closed, before the run ends
/// it (SIGTERM, then SIGKILL), as MCP's stdio transport asks of a client.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A stream proxy speaking protocol `P` between our stdio and the agent's.
pub(crate) struct StreamProxy<P: Protocol + 'static> {
    protocol: Option<P>,
    gate: Arc<Gate>,
    options: Options,
    task: Option<tokio::task::JoinHandle<Ended>>,
}

impl<P: Protocol + 'static> StreamProxy<P> {
    /// Proxies the agent's stdio in `protocol`, what it intercepts decided by `gate`; its
    /// task starts once the agent runs.
    pub(crate) fn new(protocol: P, gate: Arc<Gate>) -> StreamProxy<P> {
        StreamProxy {
            protocol: Some(protocol),
            gate,
            options: Options::default(),
            task: None,
        }
    }
}

impl<P: Protocol + Send + Sync + 'static> Interceptor for StreamProxy<P> {
    fn prepare(&mut self, _run: &RunContext, _cmd: &mut AgentCommand) -> Result<(), PrepareError> {
        Ok(())
    }

    fn stdio(&self) -> Stdio {
        Stdio::Piped
    }

    fn start(&mut self, agent: &mut Agent, alarm: Alarm) {
        let (Some(server_in), Some(server_out), Some(protocol)) = (
            agent.process.stdin.take(),
            agent.process.stdout.take(),
            self.protocol.take(),
        ) else {
            let _ = alarm.send(Stop {
                why: "the agent's stdio was not piped to the proxy".into(),
                failed: true,
            });
            return;
        };
        super::stdio::grow_pipe(&server_in);
        super::stdio::grow_pipe(&server_out);
        let (gate, options) = (self.gate.clone(), self.options.clone());
        self.task = Some(tokio::spawn(async move {
            let streams = Streams {
                client_in: super::stdio::stdin(),
                client_out: super::stdio::stdout(),
                server_in,
                server_out,
            };
            let ended = run(
                Arc::new(protocol),
                gate,
                streams,
                options,
                std::future::pending(),
            )
            .await;
            after(&ended, alarm).await;
            ended
        }));
    }

    fn finish<'a>(
        &'a mut self,
        _end: &'a End<'a>,
    ) -> Pin<Box<dyn Future<Output = Report> + Send + 'a>> {
        Box::pin(async move {
            let mut report = Report::default();
            // The server's last output is passed on before we exit (the engine ends once
            // the server's stdout closes).
            let Some(task) = self.task.take() else {
                return report;
            };
            match tokio::time::timeout(Duration::from_secs(5), task).await {
                Ok(Ok(Ended::ClientFault(why) | Ended::ServerFault(why))) => {
                    report
                        .notes
                        .push(format!("the proxied stream ended badly: {why}"));
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => report.notes.push(format!("the proxy failed: {e}")),
                Err(_) => report.notes.push("the proxy did not end in time".into()),
            }
            report
        })
    }
}

/// Once the proxy ended: a client that hung up leaves the server a moment to exit by
/// itself (the timer runs apart, so that a server that exits at once ends the run at once);
/// a fault ends the agent now.
async fn after(ended: &Ended, alarm: Alarm) {
    let stop = match ended {
        Ended::ClientClosed => {
            tokio::spawn(async move {
                tokio::time::sleep(EXIT_GRACE).await;
                let _ = alarm.send(Stop {
                    why: "the client hung up and the server did not exit".into(),
                    failed: false,
                });
            });
            return;
        }
        Ended::ClientFault(why) => Stop {
            why: format!("the client's side failed: {why}"),
            failed: false,
        },
        Ended::ServerFault(why) => Stop {
            why: format!("the server broke the stream: {why}"),
            failed: true,
        },
        Ended::ServerClosed | Ended::Shutdown => return,
    };
    let _ = alarm.send(stop);
}

impl<P: Protocol + 'static> Drop for StreamProxy<P> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
