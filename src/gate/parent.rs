//! The wrapping run as the harness: a wrapper started inside another run's agent (`ahp-wrap
//! mcp --via-run`, as `--wrap-mcp` configures the agent's MCP servers) sends its events over
//! that run's control socket (an `event` request), so that the outer run's harness or policy
//! decides and its one audit log records them.
//!
//! Owns: the request and the reading of its answer. The outer side is
//! `intercept::events`.

use std::path::PathBuf;

use serde_json::Value;

use crate::client::Fault;
use crate::control::client::Caller;
use crate::control::Kind;
use crate::protocol::Event;

/// The scope of the requests: what the outer run serves them as.
pub const SCOPE: &str = "mcp";

/// The run this process was started in, as its environment names it.
#[derive(Debug, Clone)]
pub struct ParentRun {
    cwd: PathBuf,
}

impl ParentRun {
    /// The run named in the environment; an error when there is none.
    pub(crate) fn from_env() -> Result<ParentRun, String> {
        Caller::from_env().map_err(|e| e.to_string())?;
        Ok(ParentRun {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        })
    }

    /// Asks the run to decide a blocking event; its answer is an AHP decision result.
    pub(crate) async fn decide(&self, event: &Event) -> Result<Value, Fault> {
        let stdout = self.send(event).await?;
        serde_json::from_slice(&stdout)
            .map_err(|e| Fault::Violation(format!("an answer that is not JSON ({e})")))
    }

    /// Tells the run about an event that needs no decision.
    pub(crate) async fn notify(&self, event: &Event) {
        if let Err(e) = self.send(event).await {
            tracing::warn!(
                "the wrapping run did not take a {} event: {e}",
                event.event_type
            );
        }
    }

    async fn send(&self, event: &Event) -> Result<Vec<u8>, Fault> {
        let payload = serde_json::to_vec(event).map_err(|e| Fault::Transport(e.to_string()))?;
        let name = event.event_type.to_string();
        let cwd = self.cwd.clone();
        let call = move || -> Result<Vec<u8>, String> {
            // A caller per request: its time budget counts from here.
            let caller = Caller::from_env().map_err(|e| e.to_string())?;
            let answer = caller
                .call(Kind::Event, SCOPE, &name, &cwd, &payload)
                .map_err(|e| e.to_string())?;
            if answer.exit_code != 0 {
                return Err(String::from_utf8_lossy(&answer.stderr).trim().to_owned());
            }
            Ok(answer.stdout)
        };
        match tokio::task::spawn_blocking(call).await {
            Ok(Ok(stdout)) => Ok(stdout),
            Ok(Err(why)) => Err(Fault::Unreachable(format!("the wrapping run: {why}"))),
            Err(e) => Err(Fault::Transport(format!("the request task failed: {e}"))),
        }
    }
}
