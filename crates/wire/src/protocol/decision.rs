//! Strict parsing of a harness's `result` into one [`Verdict`], per event type.
//!
//! Anything that is not exactly one of the decision shapes AHP 2.4 defines for the event
//! type is an error, so that the caller applies its fail mode instead of guessing.

use serde_json::{Map, Value};

use super::EventType;

/// What the harness decided, normalised across the generic and the specialised decision
/// shapes of AHP 2.4.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Proceed. `explicit` is true only when the harness said so on purpose
    /// (`metadata.explicit == true`, or an approved confirmation): only then may a
    /// framework skip the agent's own permission prompt. A plain `allow` is "no objection".
    Allow {
        /// Whether the harness allowed on purpose, as above; `false` for a plain `allow`.
        explicit: bool,
        /// The payload to run instead of the agent's own (`modified_payload`, an object);
        /// `None` when absent or `null`.
        modified_payload: Option<Value>,
        /// Every other field of the decision object (e.g. `injected_context`,
        /// `additional_context`, `metadata`), for frameworks that can pass it on.
        extra: Map<String, Value>,
    },
    /// Do not proceed; the reason is shown to the agent.
    Block {
        /// The decision's `reason`, or ours where AHP lets the harness leave it out.
        reason: String,
    },
    /// Proceed with this payload instead.
    Modify {
        /// The payload to run (`modified_payload`, always an object).
        modified_payload: Value,
    },
    /// Ask again after `retry_after_ms`.
    Defer {
        /// How long to wait before asking again, in milliseconds; 0 for a rate limit's
        /// `queue`.
        retry_after_ms: u64,
        /// Why, if the decision says; `None` when it does not.
        reason: Option<String>,
    },
    /// A person must decide.
    Escalate {
        /// What the person is asked about: the decision's `reason`, or ours for a
        /// confirmation's `escalate` without one.
        reason: String,
        /// Who should decide (`escalation_target`), if the harness named anyone.
        target: Option<String>,
    },
}

impl Verdict {
    /// "No objection": what an embedded policy says when no rule matched.
    pub fn no_opinion() -> Verdict {
        Verdict::Allow {
            explicit: false,
            modified_payload: None,
            extra: Map::new(),
        }
    }

    /// The decision's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Allow { .. } => "allow",
            Verdict::Block { .. } => "block",
            Verdict::Modify { .. } => "modify",
            Verdict::Defer { .. } => "defer",
            Verdict::Escalate { .. } => "escalate",
        }
    }

    /// The human-readable reason carried by the decision, if any.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Verdict::Block { reason } | Verdict::Escalate { reason, .. } => Some(reason),
            Verdict::Defer { reason, .. } => reason.as_deref(),
            _ => None,
        }
    }

    /// The decision as an AHP decision object (what the generic framework prints).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("decision".into(), self.name().into());
        match self {
            Verdict::Allow {
                explicit,
                modified_payload,
                extra,
            } => {
                for (k, v) in extra {
                    out.insert(k.clone(), v.clone());
                }
                if let Some(p) = modified_payload {
                    out.insert("modified_payload".into(), p.clone());
                }
                if *explicit {
                    let meta = out
                        .entry("metadata")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(m) = meta {
                        m.insert("explicit".into(), true.into());
                    }
                }
            }
            Verdict::Block { reason } => {
                out.insert("reason".into(), reason.clone().into());
            }
            Verdict::Modify { modified_payload } => {
                out.insert("modified_payload".into(), modified_payload.clone());
            }
            Verdict::Defer {
                retry_after_ms,
                reason,
            } => {
                out.insert("retry_after_ms".into(), (*retry_after_ms).into());
                if let Some(r) = reason {
                    out.insert("reason".into(), r.clone().into());
                }
            }
            Verdict::Escalate { reason, target } => {
                out.insert("reason".into(), reason.clone().into());
                if let Some(t) = target {
                    out.insert("escalation_target".into(), t.clone().into());
                }
            }
        }
        Value::Object(out)
    }
}

/// Why a harness's answer could not be taken as a decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// The `result` is some other JSON value.
    #[error("the result is not a JSON object")]
    NotAnObject,
    /// The object has no `decision` key.
    #[error("the result has no \"decision\" field")]
    MissingDecision,
    /// The decision is not one AHP 2.4 defines for this event type: the decision, and the
    /// event type.
    #[error("unknown decision {0:?} for a {1} event")]
    Unknown(String, EventType),
    /// A field the decision requires is missing or `null`.
    #[error("a {decision:?} decision needs {field}")]
    MissingField {
        /// The decision's wire name, such as `block`.
        decision: &'static str,
        /// The key that is missing, such as `reason`.
        field: &'static str,
    },
    /// A field has a JSON type the decision does not allow.
    #[error("field {field:?} of a {decision:?} decision has the wrong type")]
    WrongType {
        /// The decision's wire name; `?` when the `decision` key itself is not a string.
        decision: &'static str,
        /// The key whose value has the wrong type.
        field: &'static str,
    },
}

/// Parses `result` as the decision for an event of type `event_type`.
pub fn parse_decision(event_type: EventType, result: &Value) -> Result<Verdict, DecisionError> {
    let obj = result.as_object().ok_or(DecisionError::NotAnObject)?;
    let decision = match obj.get("decision") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(DecisionError::WrongType {
                decision: "?",
                field: "decision",
            })
        }
        None => return Err(DecisionError::MissingDecision),
    };
    let unknown = || DecisionError::Unknown(decision.to_owned(), event_type);
    match event_type {
        EventType::Confirmation => match decision {
            "approve" => Ok(Verdict::Allow {
                explicit: true,
                modified_payload: None,
                extra: rest(obj, &["decision"]),
            }),
            "reject" => Ok(Verdict::Block {
                reason: required_str(obj, "reject", "reason")?,
            }),
            "escalate" => Ok(Verdict::Escalate {
                reason: optional_str(obj, "escalate", "reason")?
                    .unwrap_or_else(|| "the harness asks a person to confirm".to_owned()),
                target: optional_str(obj, "escalate", "escalation_target")?,
            }),
            _ => generic(event_type, decision, obj).map_err(|_| unknown()),
        },
        EventType::RateLimit => match decision {
            "retry" => Ok(Verdict::Defer {
                retry_after_ms: required_u64(obj, "retry", "retry_after_ms")?,
                reason: None,
            }),
            "queue" => Ok(Verdict::Defer {
                retry_after_ms: 0,
                reason: Some("queued by the harness".to_owned()),
            }),
            "skip" => Ok(Verdict::Block {
                reason: required_str(obj, "skip", "reason")?,
            }),
            _ => Err(unknown()),
        },
        EventType::Idle => match decision {
            "allow" => Ok(Verdict::no_opinion()),
            "defer" => Ok(Verdict::Block {
                reason: optional_str(obj, "defer", "reason")?
                    .unwrap_or_else(|| "idle work deferred by the harness".to_owned()),
            }),
            _ => Err(unknown()),
        },
        EventType::ContextPerception => match decision {
            "refine" => Ok(Verdict::Allow {
                explicit: false,
                modified_payload: None,
                extra: rest(obj, &["decision"]),
            }),
            "allow" | "block" => generic(event_type, decision, obj),
            _ => Err(unknown()),
        },
        EventType::MemoryRecall
        | EventType::Reasoning
        | EventType::IntentDetection
        | EventType::Planning => match decision {
            "allow" | "block" => generic(event_type, decision, obj),
            "modify" if event_type == EventType::Planning => {
                required_str(obj, "modify", "modified_task")?;
                Ok(Verdict::Allow {
                    explicit: false,
                    modified_payload: None,
                    extra: rest(obj, &["decision"]),
                })
            }
            _ => Err(unknown()),
        },
        _ => generic(event_type, decision, obj),
    }
}

/// The five generic decisions of AHP (`Decision` in the reference crate).
fn generic(
    event_type: EventType,
    decision: &str,
    obj: &Map<String, Value>,
) -> Result<Verdict, DecisionError> {
    match decision {
        "allow" => {
            let modified_payload = match obj.get("modified_payload") {
                None | Some(Value::Null) => None,
                Some(v @ Value::Object(_)) => Some(v.clone()),
                Some(_) => {
                    return Err(DecisionError::WrongType {
                        decision: "allow",
                        field: "modified_payload",
                    })
                }
            };
            let explicit = obj
                .get("metadata")
                .and_then(|m| m.get("explicit"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Ok(Verdict::Allow {
                explicit,
                modified_payload,
                extra: rest(obj, &["decision", "modified_payload"]),
            })
        }
        "block" => Ok(Verdict::Block {
            reason: required_str(obj, "block", "reason")?,
        }),
        "modify" => match obj.get("modified_payload") {
            Some(v @ Value::Object(_)) => Ok(Verdict::Modify {
                modified_payload: v.clone(),
            }),
            // An event's payload is an object: anything else is malformed, whatever the
            // framework would do with it.
            Some(v) if !v.is_null() => Err(DecisionError::WrongType {
                decision: "modify",
                field: "modified_payload",
            }),
            _ => Err(DecisionError::MissingField {
                decision: "modify",
                field: "modified_payload",
            }),
        },
        "defer" => Ok(Verdict::Defer {
            retry_after_ms: required_u64(obj, "defer", "retry_after_ms")?,
            reason: optional_str(obj, "defer", "reason")?,
        }),
        "escalate" => Ok(Verdict::Escalate {
            reason: required_str(obj, "escalate", "reason")?,
            target: optional_str(obj, "escalate", "escalation_target")?,
        }),
        other => Err(DecisionError::Unknown(other.to_owned(), event_type)),
    }
}

fn rest(obj: &Map<String, Value>, skip: &[&str]) -> Map<String, Value> {
    obj.iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn required_str(
    obj: &Map<String, Value>,
    decision: &'static str,
    field: &'static str,
) -> Result<String, DecisionError> {
    optional_str(obj, decision, field)?.ok_or(DecisionError::MissingField { decision, field })
}

fn optional_str(
    obj: &Map<String, Value>,
    decision: &'static str,
    field: &'static str,
) -> Result<Option<String>, DecisionError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(DecisionError::WrongType { decision, field }),
    }
}

fn required_u64(
    obj: &Map<String, Value>,
    decision: &'static str,
    field: &'static str,
) -> Result<u64, DecisionError> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(DecisionError::MissingField { decision, field }),
        Some(v) => v
            .as_u64()
            .ok_or(DecisionError::WrongType { decision, field }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pre(v: Value) -> Result<Verdict, DecisionError> {
        parse_decision(EventType::PreAction, &v)
    }

    #[test]
    fn generic_decisions_parse() {
        assert_eq!(pre(json!({"decision": "allow"})), Ok(Verdict::no_opinion()));
        assert!(matches!(
            pre(json!({"decision": "allow", "metadata": {"explicit": true}})),
            Ok(Verdict::Allow { explicit: true, .. })
        ));
        assert_eq!(
            pre(json!({"decision": "block", "reason": "no"})),
            Ok(Verdict::Block {
                reason: "no".into()
            })
        );
        assert_eq!(
            pre(json!({"decision": "modify", "modified_payload": {"a": 1}})),
            Ok(Verdict::Modify {
                modified_payload: json!({"a": 1})
            })
        );
        assert_eq!(
            pre(json!({"decision": "defer", "retry_after_ms": 5})),
            Ok(Verdict::Defer {
                retry_after_ms: 5,
                reason: None
            })
        );
        assert_eq!(
            pre(json!({"decision": "escalate", "reason": "r", "escalation_target": "ops"})),
            Ok(Verdict::Escalate {
                reason: "r".into(),
                target: Some("ops".into())
            })
        );
    }

    #[test]
    fn malformed_decisions_are_errors() {
        assert_eq!(pre(json!("allow")), Err(DecisionError::NotAnObject));
        assert_eq!(pre(json!({})), Err(DecisionError::MissingDecision));
        assert_eq!(
            pre(json!({"decision": "maybe"})),
            Err(DecisionError::Unknown("maybe".into(), EventType::PreAction))
        );
        assert!(pre(json!({"decision": "block"})).is_err());
        assert!(pre(json!({"decision": "block", "reason": 3})).is_err());
        assert!(pre(json!({"decision": "modify"})).is_err());
        for not_an_object in [json!("rm -rf /"), json!(3), json!([1]), json!(true)] {
            assert_eq!(
                pre(json!({"decision": "modify", "modified_payload": not_an_object.clone()})),
                Err(DecisionError::WrongType {
                    decision: "modify",
                    field: "modified_payload"
                })
            );
            assert!(pre(json!({"decision": "allow", "modified_payload": not_an_object})).is_err());
        }
        assert!(pre(json!({"decision": "defer", "retry_after_ms": -1})).is_err());
        assert!(pre(json!({"decision": "escalate"})).is_err());
        assert!(pre(json!({"decision": "ALLOW"})).is_err());
    }

    #[test]
    fn specialised_decisions_parse() {
        let c = |v| parse_decision(EventType::Confirmation, &v);
        assert!(matches!(
            c(json!({"decision": "approve"})),
            Ok(Verdict::Allow { explicit: true, .. })
        ));
        assert!(matches!(
            c(json!({"decision": "reject", "reason": "x"})),
            Ok(Verdict::Block { .. })
        ));
        assert!(matches!(
            c(json!({"decision": "escalate"})),
            Ok(Verdict::Escalate { .. })
        ));
        let r = |v| parse_decision(EventType::RateLimit, &v);
        assert!(matches!(
            r(json!({"decision": "retry", "retry_after_ms": 10})),
            Ok(Verdict::Defer {
                retry_after_ms: 10,
                ..
            })
        ));
        assert!(r(json!({"decision": "allow"})).is_err());
        let i = |v| parse_decision(EventType::IntentDetection, &v);
        assert!(matches!(
            i(json!({"decision": "allow", "detected_intent": "locate", "confidence": 0.9})),
            Ok(Verdict::Allow { ref extra, .. }) if extra["detected_intent"] == "locate"
        ));
        assert!(i(json!({"decision": "modify", "modified_payload": {}})).is_err());
    }

    #[test]
    fn to_json_round_trips() {
        for v in [
            json!({"decision": "allow", "metadata": {"explicit": true}}),
            json!({"decision": "block", "reason": "r"}),
            json!({"decision": "modify", "modified_payload": {"c": "x"}}),
            json!({"decision": "defer", "retry_after_ms": 3, "reason": "busy"}),
            json!({"decision": "escalate", "reason": "r", "escalation_target": "t"}),
        ] {
            let verdict = pre(v.clone()).unwrap();
            assert_eq!(verdict.to_json(), v);
        }
    }
}
