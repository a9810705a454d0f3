//! The floor and the rules name the same things: every path the default `[floor]` hides is a
//! secret the rules refuse to read, and every path it keeps from writes is one the rules
//! refuse to write, so that a refusal by the kernel always has the policy's explanation.

use serde_json::json;

use super::*;
use ahp_wrap_confine::floor::spec::resolve;

/// The entries of one `[floor]` list for which `refused` holds neither for the path nor for
/// a file inside it (an entry may name a file or a directory).
fn not_refused(
    s: &Sandbox,
    entries: &[String],
    refused: impl Fn(&Path) -> Option<String>,
) -> Vec<String> {
    entries
        .iter()
        .filter_map(|entry| {
            let path = resolve(entry, &s.home, &s.ws);
            let inner = path.join("config");
            match (refused(&path), refused(&inner)) {
                (None, None) => Some(format!("{entry} ({})", path.display())),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn every_hidden_path_is_a_secret_the_rules_refuse_to_read() {
    let s = Sandbox::new();
    let spec = crate::floor_spec(None).unwrap();
    let missing = not_refused(&s, spec.hidden.as_deref().unwrap(), |p| {
        s.tool("Read", json!({ "file_path": p }))
            .rule
            .filter(|r| r == "read-secrets")
    });
    assert!(
        missing.is_empty(),
        "hidden by the floor, not refused by read-secrets:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_read_only_path_is_one_the_rules_refuse_to_write() {
    let s = Sandbox::new();
    let spec = crate::floor_spec(None).unwrap();
    let missing = not_refused(&s, spec.read_only.as_deref().unwrap(), |p| {
        let d = s.tool("Write", json!({ "file_path": p, "content": "x" }));
        matches!(d.verdict, Verdict::Block { .. }).then(|| d.rule.unwrap_or_default())
    });
    assert!(
        missing.is_empty(),
        "kept from writes by the floor, not by the rules:\n{}",
        missing.join("\n")
    );
}
