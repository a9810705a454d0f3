//! The first phase of a run: who answers (the embedded policy or a harness, and what it
//! negotiated), the audit log, and the gate built from them.

use std::sync::Arc;
use std::time::Duration;

use crate::audit::Auditor;
use crate::client::{Client, ClientConfig};
use crate::config::Config;
use crate::gate::{Approver, Decider, Embedded, Gate, Harness};
use crate::policy::Policy;

/// What the harness negotiated, or our own limits where it said nothing.
pub(super) struct Limits {
    /// The deadline for one event.
    pub timeout: Duration,
    pub max_depth: u32,
    /// Where `max_depth` comes from, for the refusal message.
    pub depth_source: &'static str,
}

/// The run's ids, as the harness sees them.
pub(super) struct Ids {
    pub session: String,
    pub agent: String,
}

impl Ids {
    pub(super) fn new(cfg: &Config) -> Ids {
        Ids {
            session: uuid::Uuid::new_v4().to_string(),
            agent: format!("{}-{}", cfg.kind(), uuid::Uuid::new_v4().simple()),
        }
    }
}

/// Builds the gate: the harness (started and waited for, within the event deadline), the
/// audit log, and the person at the terminal. An error has been said on stderr.
pub(super) async fn gate(
    cfg: &Config,
    ids: Ids,
    approver: Option<Arc<dyn Approver>>,
) -> Result<(Arc<Gate>, Limits), String> {
    let (harness, limits) = harness(cfg, &ids).await?;
    if cfg.audit_off && std::env::var_os(crate::audit::KEY_ENV).is_some_and(|k| !k.is_empty()) {
        eprintln!(
            "ahp-wrap: warning: AHP_WRAP_AUDIT_KEY is set but --audit-log none keeps no log: \
             nothing is written, so nothing is signed"
        );
    }
    let key_file = cfg.audit_key_file.as_deref();
    let audit = match (&cfg.audit_log, &cfg.audit_trail) {
        (None, Some(trail)) => Auditor::trail(&trail.dir, trail.retention, &ids.session, key_file),
        (log, _) => Auditor::open(log.as_deref(), key_file),
    }
    .map_err(|e| crate::error_chain(&e))?
    .observed_by(crate::telemetry::get().map(|t| t.observer()));
    let decider = Decider {
        harness,
        fail_mode: cfg.fail_mode,
        timeout: limits.timeout,
        approver,
    };
    let gate = Gate::new(ids.session, ids.agent, cfg.depth, decider, audit);
    Ok((Arc::new(gate), limits))
}

/// The harness, and the limits it negotiated.
async fn harness(cfg: &Config, ids: &Ids) -> Result<(Harness, Limits), String> {
    let mut limits = Limits {
        timeout: cfg.timeout,
        max_depth: cfg.max_depth,
        depth_source: "--max-depth",
    };
    if cfg.via_run {
        let run = crate::gate::ParentRun::from_env()
            .map_err(|e| format!("--via-run: no run to ask ({e})"))?;
        return Ok((Harness::Parent(run), limits));
    }
    let Some(spec) = &cfg.harness else {
        return Ok((Harness::Embedded(Arc::new(embedded(cfg)?)), limits));
    };
    let client = Client::start(
        spec.clone(),
        ClientConfig {
            link: cfg.link.clone(),
            session_id: ids.session.clone(),
            agent_id: ids.agent.clone(),
            framework: cfg.kind().to_owned(),
            framework_version: env!("CARGO_PKG_VERSION").to_owned(),
            batch_window: Duration::from_millis(20),
        },
    );
    match client.wait_ready(cfg.timeout).await {
        Ok(n) => {
            if let Some(ms) = n.timeout_ms {
                limits.timeout = cfg.timeout.min(Duration::from_millis(ms));
            }
            if let Some(d) = n.max_depth {
                limits.max_depth = d;
                limits.depth_source = "the harness's max_depth";
            }
        }
        // Credentials the harness turned down will not become right: whatever the fail
        // mode, the agent does not start (fail-open would run it with nobody deciding).
        Err(why) if matches!(client.state(), crate::client::LinkState::Refused(_)) => {
            return Err(format!(
                "the harness {} refused our credentials, so the agent was not started ({why}); \
                 check --token (AHP_WRAP_HARNESS_TOKEN) and --auth",
                spec.describe()
            ));
        }
        Err(why) => eprintln!(
            "ahp-wrap: warning: the harness {} is not ready ({why}); blocking events follow the fail mode ({}) until it is",
            spec.describe(),
            cfg.fail_mode.name()
        ),
    }
    Ok((Harness::Remote(client), limits))
}

/// The embedded harness: `--policy FILE`, or the default policy, with the current
/// directory as the workspace.
fn embedded(cfg: &Config) -> Result<Embedded, String> {
    let Some(file) = &cfg.policy else {
        return Ok(Embedded::default_policy(
            Some(cfg.workspace.clone()),
            cfg.mode,
        ));
    };
    // Checked now (a bad file stops the run before the agent starts); the default rules it
    // extends are compiled once the agent has started, as the default policy's are.
    let checked = Policy::check_file(file).map_err(|e| crate::error_chain(&e))?;
    Ok(Embedded::checked(
        Some(checked),
        Some(cfg.workspace.clone()),
        cfg.mode,
    ))
}
