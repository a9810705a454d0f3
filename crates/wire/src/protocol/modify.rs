//! What a harness's `modify` means for a tool call, whoever carries it out (a hook's
//! rendering, a stream proxy's rewrite), and what is said when it cannot be applied.

use serde_json::Value;

/// The tool input a harness asked for. A harness sees the agent's tool input as
/// `arguments`, so it may send back a whole pre_action payload (its `arguments` is taken)
/// or just the new arguments.
pub fn updated_input(modified: &Value) -> Result<Value, String> {
    match modified {
        Value::Object(o) => match o.get("arguments") {
            Some(Value::Object(args)) => Ok(Value::Object(args.clone())),
            Some(_) => Err("its \"arguments\" is not an object".into()),
            None => Ok(modified.clone()),
        },
        _ => Err("it is not a JSON object".into()),
    }
}

/// The reason given when a harness's modified payload cannot be applied.
pub fn unapplicable_modify(why: &str) -> String {
    format!("ahp-wrap blocked this because the harness's modified payload cannot be applied: {why}")
}
