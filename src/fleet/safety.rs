//! The L3 safety gate. HCP stacks four layers (L4 task, L3 safety and contract, L2 session
//! and lifecycle, L1 transport); L3 is where a task is checked before any execution: here,
//! against the capability's declaration and the worker's policy, before anything runs. A refusal carries the reason the caller reads;
//! the agent never starts.
//!
//! Checks, in order: the task names this capability; its declared risk is at most the
//! capability's ceiling; its data class at most `constraints.max_data_class`; every hazard
//! it declares is one the capability allows; its input is an object that fits the input
//! schema; and the policy does not block (or escalate: no person answers at L3) the
//! intent, given to it as the `pre_prompt` event the agent's first prompt would be.

use serde_json::json;

use super::capability::Capability;
use super::message::Task;
use crate::gate::Mode;
use crate::policy::Policy;
use crate::protocol::{Event, EventType, Verdict};

/// The policy L3 asks about intents, and whether its answer is enforced.
pub struct SafetyPolicy {
    /// The worker's `--policy` (or the default policy), judging the intent as `pre_prompt`.
    pub policy: Policy,
    /// The worker's `--mode`: under `Observe` a refusal is only logged and the task runs.
    pub mode: Mode,
}

/// Checks `task`; `Err` is the reason it is refused.
pub fn check(cap: &Capability, policy: Option<&SafetyPolicy>, task: &Task) -> Result<(), String> {
    if task.capability != cap.name {
        return Err(format!(
            "the task is for capability {:?}, this worker offers {:?}",
            task.capability, cap.name
        ));
    }
    if task.risk > cap.risk_ceiling {
        return Err(format!(
            "declared risk {:?} is above the capability's ceiling {:?}",
            task.risk, cap.risk_ceiling
        ));
    }
    if task.data_class > cap.constraints.max_data_class {
        return Err(format!(
            "data class {:?} is above the capability's limit {:?}",
            task.data_class, cap.constraints.max_data_class
        ));
    }
    if let Some(h) = task
        .hazards
        .iter()
        .find(|h| !cap.constraints.hazards.contains(h))
    {
        return Err(format!(
            "hazard category {h:?} is not one the capability allows ({})",
            allowed(&cap.constraints.hazards)
        ));
    }
    if !task.input.is_object() {
        return Err("the input must be a JSON object".into());
    }
    if let Some(schema) = &cap.input_schema {
        schema
            .validate(&task.input)
            .map_err(|e| format!("the input does not fit the capability's input schema: {e}"))?;
    }
    match policy {
        Some(p) => check_policy(p, task),
        None => Ok(()),
    }
}

fn allowed(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

fn check_policy(p: &SafetyPolicy, task: &Task) -> Result<(), String> {
    let event = intent_event(task);
    let decision = p.policy.evaluate(&event);
    let refused = match &decision.verdict {
        Verdict::Block { reason } => format!("the policy blocks the intent: {reason}"),
        Verdict::Escalate { reason, .. } => {
            format!("the policy escalates the intent and no person answers at L3: {reason}")
        }
        _ => return Ok(()),
    };
    let rule = decision.rule.unwrap_or_else(|| "no rule".into());
    if p.mode == Mode::Observe {
        tracing::warn!(task = %task.task_id, %rule, "observe mode: would have refused: {refused}");
        return Ok(());
    }
    Err(format!("{refused} (rule {rule})"))
}

/// The intent as the `pre_prompt` event a policy judges.
fn intent_event(task: &Task) -> Event {
    Event {
        event_type: EventType::PrePrompt,
        session_id: format!("hcp-{}", task.task_id),
        agent_id: format!("hcp-l3:{}", task.capability),
        timestamp: crate::protocol::now_rfc3339(),
        depth: 0,
        payload: json!({
            "prompt": task.intent,
            "hcp": {
                "capability": task.capability,
                "risk": task.risk,
                "data_class": task.data_class,
                "hazards": task.hazards,
                "input": task.input,
            },
        }),
        context: None,
        metadata: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::capability::{DataClass, Risk};

    fn cap() -> Capability {
        toml::from_str(
            r#"
name = "c"
description = "d"
risk_ceiling = "R2"
input_schema = { type = "object", required = ["repo"] }
[constraints]
max_data_class = "T2"
hazards = ["network"]
"#,
        )
        .unwrap()
    }

    fn task() -> Task {
        let mut t = Task::new("c", "fix it", Risk::R2, DataClass::T2);
        t.input = json!({"repo": "r"});
        t
    }

    #[test]
    fn within_the_ceiling_passes() {
        assert_eq!(check(&cap(), None, &task()), Ok(()));
    }

    #[test]
    fn each_limit_refuses_with_its_reason() {
        let refuse = |f: &dyn Fn(&mut Task)| {
            let mut t = task();
            f(&mut t);
            check(&cap(), None, &t).unwrap_err()
        };
        assert!(refuse(&|t| t.risk = Risk::R3).contains("above the capability's ceiling"));
        assert!(refuse(&|t| t.data_class = DataClass::T3).contains("data class"));
        assert!(refuse(&|t| t.hazards = vec!["fire".into()]).contains("\"fire\""));
        assert!(refuse(&|t| t.input = json!({})).contains("$.repo is required"));
        assert!(refuse(&|t| t.input = json!([1])).contains("a JSON object"));
        assert!(refuse(&|t| t.capability = "other".into()).contains("offers"));
    }

    #[test]
    fn the_policy_judges_the_intent() {
        let policy = Policy::from_toml_str(
            r#"
version = 1
[[rule]]
id = "no-prompts"
decision = "block"
reason = "no tasks today"
events = ["pre_prompt"]
"#,
        )
        .unwrap();
        let mut p = SafetyPolicy {
            policy,
            mode: Mode::Enforce,
        };
        let why = check(&cap(), Some(&p), &task()).unwrap_err();
        assert!(
            why.contains("no tasks today") && why.contains("no-prompts"),
            "{why}"
        );
        p.mode = Mode::Observe;
        assert_eq!(check(&cap(), Some(&p), &task()), Ok(()));
        let default = SafetyPolicy {
            policy: Policy::default_policy(),
            mode: Mode::Enforce,
        };
        assert_eq!(check(&cap(), Some(&default), &task()), Ok(()));
    }
}
