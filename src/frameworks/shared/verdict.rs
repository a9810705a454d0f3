//! AHP decision fields in the shapes agents with Claude-style hooks accept: the tool input
//! of a modify, the text of an allow's context.

use serde_json::{Map, Value};

use crate::frameworks::adapter::Verdict;

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

/// Text for the agent's "additional context" for the model, from what a harness returned
/// with an allow: `additional_context` (text) and AHP's `injected_context` (facts, files,
/// knowledge, …).
pub fn additional_context(verdict: &Verdict) -> Option<String> {
    let Verdict::Allow { extra, .. } = verdict else {
        return None;
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(Value::String(s)) = extra.get("additional_context") {
        parts.push(s.clone());
    }
    if let Some(Value::Object(ic)) = extra.get("injected_context") {
        injected_context_text(ic, &mut parts);
    }
    (!parts.is_empty()).then(|| parts.join("\n"))
}

fn injected_context_text(ic: &Map<String, Value>, parts: &mut Vec<String>) {
    let strs = |k: &str| -> Vec<String> {
        ic.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    for fact in ic
        .get("facts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (fact.get("content").and_then(Value::as_str), fact.as_str()) {
            (Some(c), _) | (None, Some(c)) => parts.push(c.to_owned()),
            _ => {}
        }
    }
    for file in ic
        .get("file_contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(path), Some(snippet)) = (
            file.get("path").and_then(Value::as_str),
            file.get("snippet").and_then(Value::as_str),
        ) {
            parts.push(format!("{path}:\n{snippet}"));
        }
    }
    if let Some(summary) = ic
        .get("project_summary")
        .and_then(|s| s.get("structure_description"))
        .and_then(Value::as_str)
    {
        parts.push(summary.to_owned());
    }
    parts.extend(strs("knowledge"));
    parts.extend(strs("suggestions"));
}
