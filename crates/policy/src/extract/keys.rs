//! Argument names as the key lists spell them: camelCase (OpenCode's `filePath`,
//! `oldString`, `newString`) read as snake_case.

use serde_json::Value;

/// How deep argument keys are renamed (as deep as paths are collected).
const KEY_DEPTH: usize = 8;

/// Whether an object key below `v` has an upper-case ASCII letter.
pub(super) fn has_camel_keys(v: &Value) -> bool {
    camel_below(v, 0)
}

fn camel_below(v: &Value, depth: usize) -> bool {
    if depth > KEY_DEPTH {
        return false;
    }
    match v {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.bytes().any(|b| b.is_ascii_uppercase()) || camel_below(v, depth + 1)),
        Value::Array(items) => items.iter().any(|v| camel_below(v, depth + 1)),
        _ => false,
    }
}

/// `v` with every object key in snake_case (`filePath` → `file_path`); a key that exists in
/// both spellings keeps the snake_case one's value.
pub(super) fn snake_keys(v: &Value) -> Value {
    snake_below(v, 0)
}

fn snake_below(v: &Value, depth: usize) -> Value {
    if depth > KEY_DEPTH {
        return v.clone();
    }
    match v {
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(snake_case(k), snake_below(v, depth + 1));
            }
            for (k, v) in map
                .iter()
                .filter(|(k, _)| !k.bytes().any(|b| b.is_ascii_uppercase()))
            {
                out.insert(k.clone(), snake_below(v, depth + 1));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| snake_below(v, depth + 1)).collect())
        }
        other => other.clone(),
    }
}

/// `filePath` → `file_path`, `URL` → `url`; already snake_case keys are unchanged.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    let mut prev_lower = false;
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn camel_case_names_read_as_snake_case_ones() {
        assert_eq!(snake_case("filePath"), "file_path");
        assert_eq!(snake_case("oldString"), "old_string");
        assert_eq!(snake_case("file_path"), "file_path");
        assert_eq!(snake_case("URL"), "url");
        let args = json!({"filePath": "a", "edits": [{"filePath": "b", "newString": "c"}]});
        assert!(has_camel_keys(&args));
        assert_eq!(
            snake_keys(&args),
            json!({"file_path": "a", "edits": [{"file_path": "b", "new_string": "c"}]})
        );
        assert!(!has_camel_keys(&json!({"file_path": "a", "content": "X"})));
        // Both spellings: the snake_case one's value stands.
        assert_eq!(
            snake_keys(&json!({"filePath": "x", "file_path": "y"})),
            json!({"file_path": "y"})
        );
    }
}
