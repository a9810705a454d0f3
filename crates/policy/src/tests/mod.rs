//! Tests of the policy engine, with a sandbox of a fake home and workspace on disk.

mod code_on_disk;
mod default_rules;
mod engine;
mod floor;
mod hosts;
mod memory;
mod reversible;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tempfile::TempDir;

use super::*;
use ahp_wrap_wire::protocol::EventType;

/// A fake home (with a fake SSH key) and a workspace, both real directories, so that
/// canonicalisation and symlinks are exercised; the process environment is never touched.
struct Sandbox {
    _dirs: (TempDir, TempDir),
    home: PathBuf,
    ws: PathBuf,
    policy: InSession,
}

/// A policy with the one session its test's events share, as a run's gate holds them: what
/// an event writes or brings into the session counts for those that follow. Read as the
/// policy otherwise.
struct InSession {
    policy: Policy,
    session: Session,
}

impl InSession {
    fn new(policy: Policy) -> InSession {
        InSession {
            policy,
            session: Session::default(),
        }
    }

    fn evaluate(&self, event: &Event) -> PolicyDecision {
        self.policy.evaluate_in(&self.session, event, None)
    }

    fn observe(&self, event: &Event) {
        self.policy.observe_in(&self.session, event);
    }

    fn leave_commands_to_egress(&self, egress: bool) {
        self.session.leave_commands_to_egress(egress);
    }

    fn placeholder_vars(&self, names: &[String]) {
        self.session.placeholder_vars(names.to_vec());
    }
}

impl std::ops::Deref for InSession {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.policy
    }
}

impl Sandbox {
    fn new() -> Sandbox {
        let home_dir = tempfile::tempdir().unwrap();
        let ws_dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(home_dir.path()).unwrap();
        let ws = std::fs::canonicalize(ws_dir.path()).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "fake key").unwrap();
        std::fs::create_dir_all(ws.join("src/deep")).unwrap();
        let policy = InSession::new(Policy::default_policy().with_home(&home));
        // As in a run on the network floor, whose proxy asks about the hosts commands
        // contact (tests/hosts.rs covers the policy judging them without it).
        policy.leave_commands_to_egress(true);
        Sandbox {
            _dirs: (home_dir, ws_dir),
            home,
            ws,
            policy,
        }
    }

    fn bash_in(&self, cwd: &Path, command: &str) -> PolicyDecision {
        self.policy.evaluate(&pre_action(json!({
            "action_type": "tool_call",
            "tool_name": "Bash",
            "arguments": { "command": command },
            "context": { "working_directory": cwd },
        })))
    }

    fn bash(&self, command: &str) -> PolicyDecision {
        self.bash_in(&self.ws, command)
    }

    fn tool(&self, tool: &str, arguments: Value) -> PolicyDecision {
        self.policy.evaluate(&pre_action(json!({
            "action_type": "tool_call",
            "tool_name": tool,
            "arguments": arguments,
            "context": { "working_directory": self.ws },
        })))
    }

    /// Asserts that every command is blocked by `rule`.
    fn blocks(&self, rule: &str, commands: &[&str]) {
        for c in commands {
            assert_blocked(&self.bash(c), rule, c);
        }
    }

    /// Asserts that no rule has an opinion on any of the commands.
    fn ignores(&self, commands: &[&str]) {
        for c in commands {
            assert_no_opinion(&self.bash(c), c);
        }
    }
}

fn pre_action(payload: Value) -> Event {
    event(EventType::PreAction, payload)
}

fn event(event_type: EventType, payload: Value) -> Event {
    Event {
        event_type,
        session_id: "s".into(),
        agent_id: "a".into(),
        timestamp: "2025-01-01T00:00:00.000Z".into(),
        depth: 0,
        payload,
        context: None,
        metadata: None,
    }
}

#[track_caller]
fn assert_blocked(d: &PolicyDecision, rule: &str, what: &str) {
    assert!(
        matches!(d.verdict, Verdict::Block { .. }) && d.rule.as_deref() == Some(rule),
        "{what:?} should be blocked by {rule}, got {d:?}"
    );
}

#[track_caller]
fn assert_no_opinion(d: &PolicyDecision, what: &str) {
    assert_eq!(
        d,
        &PolicyDecision::no_opinion(),
        "{what:?} should get no opinion"
    );
}
