//! AHP decision fields in the shapes agents with Claude-style hooks accept: the text of an
//! allow's context (the tool input of a modify is the adapter's `updated_input`).

use serde_json::{Map, Value};

use crate::Final;

/// Text for the agent's "additional context" for the model, from what a harness returned
/// with an allow: `additional_context` (text) and AHP's `injected_context` (facts, files,
/// knowledge, …).
pub fn additional_context(verdict: &Final) -> Option<String> {
    let Final::Allow { extra, .. } = verdict else {
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
