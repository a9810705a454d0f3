//! What a harness's `modify` means for a tool call, whoever carries it out (a hook's
//! rendering, a stream proxy's rewrite), and what is said when it cannot be applied.

use serde_json::Value;

/// Why a harness's modified payload cannot be applied: the clause that ends
/// [`unapplicable_modify`]'s reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModifyError {
    /// The payload is not a JSON object.
    #[error("it is not a JSON object")]
    NotAnObject,
    /// The payload's `arguments` is there but is not an object.
    #[error("its \"arguments\" is not an object")]
    ArgumentsNotAnObject,
    /// A prompt's payload is an object without a `prompt` string.
    #[error("it has no \"prompt\" string")]
    NoPrompt,
    /// A prompt's payload is neither a string nor an object.
    #[error("it is neither a prompt nor a pre_prompt payload")]
    NotAPrompt,
    /// The new prompt is empty (an agent that rejects one would send the original).
    #[error("the new prompt is empty")]
    EmptyPrompt,
}

/// The tool input a harness asked for. A harness sees the agent's tool input as
/// `arguments`, so it may send back a whole pre_action payload (its `arguments` is taken)
/// or just the new arguments.
pub fn updated_input(modified: &Value) -> Result<Value, ModifyError> {
    match modified {
        Value::Object(o) => match o.get("arguments") {
            Some(Value::Object(args)) => Ok(Value::Object(args.clone())),
            Some(_) => Err(ModifyError::ArgumentsNotAnObject),
            None => Ok(modified.clone()),
        },
        _ => Err(ModifyError::NotAnObject),
    }
}

/// The reason given when a harness's modified payload cannot be applied.
pub fn unapplicable_modify(why: impl std::fmt::Display) -> String {
    format!("ahp-wrap blocked this because the harness's modified payload cannot be applied: {why}")
}
