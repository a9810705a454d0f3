//! The run's declared credentials (`[[floor.credentials]]`, `--credential`): read before the
//! agent starts, given to its tree as placeholders, with the run's CA the egress proxy needs
//! to put their values on the tree's requests.

use std::path::Path;

use crate::config::Config;
use crate::floor;
use crate::frameworks::AgentCommand;

use super::{home_dir, NoFloor};

/// The credentials declared for this run (the policy's `[[floor.credentials]]`, then
/// `--credential`), read, less those the agent's shim says it needs itself (kept real) or
/// `--keep-env` keeps; with what a person should know about them (an entry that cannot be
/// read, one left real).
pub(super) fn credentials(
    spec: &floor::Spec,
    cfg: &Config,
    own_env: &[String],
) -> (floor::credentials::Credentials, Vec<String>) {
    let specs: Vec<floor::spec::CredentialSpec> = match spec.net.enabled() {
        true => spec
            .credentials
            .iter()
            .flatten()
            .chain(&cfg.credentials)
            .cloned()
            .collect(),
        false => cfg.credentials.clone(),
    };
    if specs.is_empty() {
        return Default::default();
    }
    let home = home_dir();
    let env = |name: &str| std::env::var(name).ok();
    let (mut creds, mut said) =
        floor::credentials::Credentials::resolve(&specs, &env, (&home, &cfg.workspace));
    let kept = |name: &str| {
        own_env
            .iter()
            .chain(&cfg.keep_env)
            .any(|k| floor::secrets::matches(k, name))
    };
    creds.retain(|c| {
        let keep = kept(&c.name);
        if keep {
            said.push(format!(
                "credential {}: left real in the agent's environment (the agent needs it itself, or --keep-env keeps it)",
                c.name
            ));
        }
        !keep
    });
    (creds, said)
}

/// The run's CA and the placeholders in the tree's environment, when it has credentials
/// (none: nothing is made, nothing changes).
#[cfg(target_os = "linux")]
pub(super) fn injection(
    credentials: floor::credentials::Credentials,
    cmd: &mut AgentCommand,
    (run_dir, workspace): (&Path, &Path),
) -> Result<Option<crate::intercept::egress::Injection>, NoFloor> {
    if credentials.is_empty() {
        return Ok(None);
    }
    // What must not leave with a credential: its own and the others' values, what the floor
    // took out of the agent's environment, the workspace's `.env` secrets.
    let mut secrets: Vec<(String, String)> = credentials
        .iter()
        .map(|c| (c.value().to_owned(), format!("the credential {}", c.name)))
        .collect();
    for name in &cmd.remove_env {
        if let Ok(v) = std::env::var(name) {
            secrets.push((
                v,
                format!("{name}, of the environment the agent was not given"),
            ));
        }
    }
    secrets.extend(crate::intercept::egress::leaks::dotenv_secrets(workspace));
    let ca = crate::intercept::egress::RunCa::new().map_err(NoFloor::Failed)?;
    let trust = ca.trust(run_dir).map_err(|e| {
        NoFloor::Failed(format!("the run's CA bundle in {}: {e}", run_dir.display()))
    })?;
    cmd.env.extend(trust);
    for c in credentials.iter() {
        cmd.env
            .push((c.name.clone().into(), c.placeholder.clone().into()));
        cmd.remove_env.retain(|n| n != &c.name);
    }
    Ok(Some(crate::intercept::egress::Injection {
        credentials,
        ca,
        counts: Default::default(),
        untrusted: Default::default(),
        secrets: crate::intercept::egress::leaks::Secrets::new(secrets),
    }))
}
