//! Rule examples (`match` / `no_match`), checked on load so a rule cannot drift from its intent.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::error::ExampleFailure;
use crate::extract;
use crate::paths::Resolver;
use crate::protected::Protected;
use crate::rules::{Example, Rule};
use ahp_wrap_wire::protocol::{Event, EventType};

/// The home directory examples run with.
pub(crate) const EXAMPLE_HOME: &str = "/home/user";
/// The workspace (and cwd) examples run in.
pub(crate) const EXAMPLE_WORKSPACE: &str = "/home/user/project";

/// What [`super::Policy::check`] verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExampleReport {
    /// Rules in the policy.
    pub rules: usize,
    /// Examples run (all passed).
    pub examples: usize,
}

/// Examples run without touching the file system, in a fixed home and workspace, so that
/// they give the same answer on every machine.
/// Where examples pretend the wrapper is installed and runs.
pub(crate) const EXAMPLE_WRAPPER: [&str; 3] = [
    "/usr/local/bin/ahp-wrap",
    "/usr/local/bin/ahp-wrap-hook",
    "/run/ahp-wrap-example",
];

/// The pids examples pretend the wrapper and its guardian have.
pub(crate) const EXAMPLE_WRAPPER_PIDS: [u32; 2] = [4242, 4243];

fn example_protected() -> Protected {
    Protected {
        paths: EXAMPLE_WRAPPER.iter().map(PathBuf::from).collect(),
        pids: EXAMPLE_WRAPPER_PIDS.to_vec(),
    }
}

fn resolver() -> Resolver {
    Resolver {
        home: PathBuf::from(EXAMPLE_HOME),
        follow_symlinks: false,
        code_since: None,
        written: None,
        other_homes: Vec::new(),
    }
}

/// Runs every example of every rule.
pub(crate) fn check(rules: &[Rule]) -> (ExampleReport, Vec<ExampleFailure>) {
    let resolver = resolver();
    let mut failures = Vec::new();
    let mut count = 0;
    for rule in rules {
        let cases = rule
            .matches
            .iter()
            .map(|e| (e, true))
            .chain(rule.no_match.iter().map(|e| (e, false)));
        for (example, should_match) in cases {
            count += 1;
            let (event, shown) = event_of(example);
            let facts = extract::facts(&event, &resolver, None, example_protected(), &[]);
            if rule.is_match(&facts) != should_match {
                failures.push(ExampleFailure {
                    rule: rule.id.clone(),
                    example: shown,
                    should_match,
                });
            }
        }
    }
    let report = ExampleReport {
        rules: rules.len(),
        examples: count,
    };
    (report, failures)
}

/// The event an example stands for, and how to show it in an error.
///
/// A string is a `Bash` command line (or, if it starts with `{`, JSON as below). A table with
/// `event_type` or `payload` is an event; any other table is the payload of a `pre_action`.
/// A payload without `context.working_directory` (as the shims send it) runs in [`EXAMPLE_WORKSPACE`].
pub(crate) fn event_of(example: &Example) -> (Event, String) {
    let value = match example {
        Example::Command(s) if s.trim_start().starts_with('{') => {
            serde_json::from_str(s).unwrap_or_else(|_| command_payload(s))
        }
        Example::Command(s) => command_payload(s),
        Example::Event(t) => serde_json::to_value(t).unwrap_or(Value::Null),
    };
    let shown = match example {
        Example::Command(s) => format!("{s:?}"),
        Example::Event(_) => value.to_string(),
    };
    let (event_type, mut payload) =
        if value.get("event_type").is_some() || value.get("payload").is_some() {
            let t = value
                .get("event_type")
                .and_then(Value::as_str)
                .and_then(EventType::parse)
                .unwrap_or(EventType::PreAction);
            (t, value.get("payload").cloned().unwrap_or(json!({})))
        } else {
            (EventType::PreAction, value)
        };
    if let Value::Object(map) = &mut payload {
        let has_cwd = map.get("cwd").is_some()
            || map
                .get("context")
                .is_some_and(|c| c.get("cwd").is_some() || c.get("working_directory").is_some());
        if !has_cwd {
            let ctx = map.entry("context").or_insert_with(|| json!({}));
            if let Value::Object(c) = ctx {
                c.insert("working_directory".into(), EXAMPLE_WORKSPACE.into());
            }
        }
    }
    let event = Event {
        event_type,
        session_id: "example".into(),
        agent_id: "example".into(),
        timestamp: String::new(),
        depth: 0,
        payload,
        context: None,
        metadata: None,
    };
    (event, shown)
}

fn command_payload(command: &str) -> Value {
    json!({
        "action_type": "tool_call",
        "tool_name": "Bash",
        "arguments": { "command": command },
    })
}
