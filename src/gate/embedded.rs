//! The embedded harness: the policy engine, in the mode it runs in, and the run's
//! [`Session`] of it (what its decisions remember, what the run said of itself): the policy,
//! built once, is never changed by a decision.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use super::decision::{Answer, DecidedBy};
use crate::policy::{Policy, Protected, Session};
use crate::protocol::{Event, EventType, Verdict};

/// How the embedded policy is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Decisions are enforced.
    Enforce,
    /// Nothing is blocked or changed; what would have been is recorded.
    Observe,
}

/// The embedded harness: a policy, the mode it runs in, and the run's session of it.
pub struct Embedded {
    policy: OnceLock<Policy>,
    /// A policy file checked before the agent started, built on the first event (or ahead,
    /// see [`Embedded::warm_up`]); none: the default policy.
    file: std::sync::Mutex<Option<crate::policy::Checked>>,
    workspace: Option<PathBuf>,
    /// This run's own files and processes, protected by the policy's `wrapper` rules.
    protected: OnceLock<Protected>,
    /// `--mode`: in observe mode a verdict that would act is recorded, and becomes no
    /// opinion.
    pub mode: Mode,
    /// When the run started: code on disk changed since is the agent's (the policy itself is
    /// built later, on the first event).
    started: std::time::SystemTime,
    /// What the run's decisions remember, and what the run says of itself before the agent
    /// starts (the egress proxy, the placeholders).
    session: Session,
}

impl Embedded {
    /// An embedded harness with this policy.
    pub fn new(policy: Policy, mode: Mode) -> Embedded {
        Embedded {
            policy: OnceLock::from(policy),
            file: std::sync::Mutex::new(None),
            workspace: None,
            protected: OnceLock::new(),
            mode,
            started: std::time::SystemTime::now(),
            session: Session::default(),
        }
    }

    /// The compiled-in default policy, with `workspace` as the workspace root; it is built
    /// on the first event, so that a run with no hook calls never pays for it.
    pub(crate) fn default_policy(workspace: Option<PathBuf>, mode: Mode) -> Embedded {
        Embedded::checked(None, workspace, mode)
    }

    /// A policy file checked before the agent starts (`None`: the default policy), with
    /// `workspace` as the workspace root, built as the default policy is: on the first event,
    /// or ahead once the agent has started.
    pub(crate) fn checked(
        file: Option<crate::policy::Checked>,
        workspace: Option<PathBuf>,
        mode: Mode,
    ) -> Embedded {
        Embedded {
            policy: OnceLock::new(),
            file: std::sync::Mutex::new(file),
            workspace,
            protected: OnceLock::new(),
            mode,
            started: std::time::SystemTime::now(),
            session: Session::default(),
        }
    }

    /// Names this run's own files (executables, run directory) and processes (the wrapper,
    /// its guardian) for the policy to protect. Set once, before the agent starts.
    pub(crate) fn protect(&self, protected: Protected) {
        let _ = self.protected.set(protected);
    }

    /// Names the variables that hold a declared credential's placeholder in this run: the
    /// policy does not take them for secrets. Set once, before the agent starts.
    pub(crate) fn placeholder_vars(&self, names: Vec<String>) {
        self.session.placeholder_vars(names);
    }

    /// Says that the floor's egress proxy decides the connections of the agent's tree: the
    /// policy leaves the hosts shell commands contact to it.
    pub(crate) fn egress_in_force(&self) {
        self.session.leave_commands_to_egress(true);
    }

    /// Builds the policy on a thread of its own, so that the agent's first event
    /// does not wait for it (its globs and regexes take some 66 million instructions: a
    /// first hook call took 9 to 13 ms instead of 2 to 3). An event that comes first waits
    /// for this thread, as it would have built the policy itself.
    pub(crate) fn warm_up(self: &std::sync::Arc<Self>) -> Option<std::thread::JoinHandle<()>> {
        if self.policy.get().is_some() {
            return None;
        }
        let me = self.clone();
        std::thread::Builder::new()
            .name("policy".into())
            .spawn(move || {
                let start = Instant::now();
                let mut built = false;
                me.policy.get_or_init(|| {
                    built = true;
                    me.build()
                });
                if built {
                    tracing::debug!(
                        "the embedded policy was built ahead of the first event, in {} ms",
                        start.elapsed().as_millis()
                    );
                }
            })
            .inspect_err(|e| tracing::debug!("the policy is built on the first event: {e}"))
            .ok()
    }

    fn policy(&self) -> &Policy {
        self.policy.get_or_init(|| self.build())
    }

    fn build(&self) -> Policy {
        let file = self.file.lock().unwrap_or_else(|e| e.into_inner()).take();
        let p = file
            .map_or_else(Policy::default_policy, crate::policy::Checked::build)
            .trusting_code_changed_before(self.started);
        match &self.workspace {
            Some(ws) => p.with_workspace(ws),
            None => p,
        }
    }

    /// Takes note of an event nobody answers (a call that ran): what it brought into the
    /// session counts for the decisions that follow. Only a `post_action`, and only once the
    /// policy is built (a call that ran was decided first): a notification never waits for
    /// the policy to be built (the session's start would, on the runtime's thread).
    pub(crate) fn observe(&self, event: &Event) {
        if event.event_type != EventType::PostAction {
            return;
        }
        if let Some(policy) = self.policy.get() {
            policy.observe_in(&self.session, event);
        }
    }

    /// Evaluates one event under the mode. In observe mode a verdict that would act
    /// becomes no opinion, and the note says what would have happened.
    /// With the answer, what the command discards when `reversible` rules alone escalated
    /// it (never in observe mode, which enforces nothing).
    pub(crate) fn decide(&self, event: &Event) -> Answer {
        let d = self
            .policy()
            .evaluate_in(&self.session, event, self.protected.get());
        let by = DecidedBy::Policy(d.rule);
        let acts = !matches!(
            &d.verdict,
            Verdict::Allow {
                modified_payload: None,
                ..
            }
        );
        if self.mode == Mode::Observe && acts {
            let why = d
                .verdict
                .reason()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            return Answer {
                note: Some(format!(
                    "{}{}{why}",
                    crate::audit::OBSERVE_PREFIX,
                    d.verdict.name()
                )),
                observed: Some(d.verdict.name()),
                ..Answer::new(Verdict::no_opinion(), by)
            };
        }
        Answer {
            reach: d.reversible,
            ..Answer::new(d.verdict, by)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EventType;

    /// Code written after the run started but before its first event (the policy is built
    /// on that event) is still the agent's: held to the rules for its own code.
    #[test]
    fn code_written_before_the_first_event_is_the_agents() {
        agents_code_after_the_start(false, false);
    }

    /// The same with a `--policy` file, checked at the start and built on the first event.
    #[test]
    fn a_policy_files_rules_built_on_the_first_event_hold_code_written_since_the_start() {
        agents_code_after_the_start(false, true);
    }

    /// The same when the policy was built ahead, on its own thread, before the code was
    /// written: what counts is when the run started, not when the policy was built.
    #[test]
    fn a_policy_built_ahead_still_holds_code_written_since_the_start_as_the_agents() {
        agents_code_after_the_start(true, false);
    }

    /// With `file`, a policy file that extends the default, checked now.
    fn agents_code_after_the_start(warm_up: bool, file: bool) {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let policy_dir = tempfile::tempdir().unwrap();
        let checked = file.then(|| {
            let path = policy_dir.path().join("policy.toml");
            std::fs::write(&path, "extends = \"default\"\n").unwrap();
            Policy::check_file(&path).unwrap()
        });
        let gate = std::sync::Arc::new(Embedded::checked(checked, Some(ws.clone()), Mode::Enforce));
        if warm_up {
            gate.warm_up().expect("a thread").join().unwrap();
            assert!(gate.policy.get().is_some(), "built ahead");
            assert!(gate.warm_up().is_none(), "built once");
        }
        std::fs::write(
            ws.join("run.py"),
            "import os, sys\nos.system(sys.argv[1])\n",
        )
        .unwrap();
        // Past the allowance for the file clock's lag: built now, the policy would take
        // this file as older than the run.
        std::thread::sleep(std::time::Duration::from_millis(1_300));
        let event = Event {
            event_type: EventType::PreAction,
            session_id: "s".into(),
            agent_id: "a".into(),
            timestamp: String::new(),
            depth: 0,
            payload: serde_json::json!({
                "tool_name": "Bash",
                "arguments": { "command": "python3 run.py ls" },
                "context": { "working_directory": ws },
            }),
            context: None,
            metadata: None,
        };
        let d = gate.decide(&event);
        assert!(
            matches!(d.verdict, Verdict::Escalate { .. }),
            "the agent's run.py runs a command built at run time: {d:?}"
        );
    }
}
