//! The ACP payloads as the real embedded policy reads them: the paths and commands it
//! must see in each kind of call.

use serde_json::json;

use super::tests::*;
use super::Acp;
use crate::intercept::proxy::HeldCall;
use crate::policy::Policy;
use crate::protocol::{Event, Verdict};

fn policy_verdict(policy: &Policy, h: &HeldCall) -> Verdict {
    let event = Event {
        event_type: h.event.event_type,
        session_id: "s".into(),
        agent_id: "a".into(),
        timestamp: "2025-01-01T00:00:00.000Z".into(),
        depth: 0,
        payload: h.event.payload.clone(),
        context: None,
        metadata: None,
    };
    policy.evaluate(&event).verdict
}

#[test]
fn the_embedded_policy_reads_the_paths_and_commands_of_these_payloads() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let a = Acp::new("gemini", Some(root.clone()));
    let policy = Policy::from_toml_str(
        r#"
[[rule]]
id = "no-secrets"
decision = "block"
reason = "secret files are off limits"
tools = ["acp__*"]
file.writes = ["**/secret*"]
"#,
    )
    .unwrap()
    .with_workspace(&root);
    let secret = root.join("secret.txt").display().to_string();
    let write = json!({"sessionId": "s", "path": secret, "content": "x"});
    let h = held(&a, TO_EDITOR, "fs/write_text_file", &write);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Block { .. }));
    let notes = json!({"sessionId": "s", "path": root.join("notes.txt"), "content": "x"});
    let h = held(&a, TO_EDITOR, "fs/write_text_file", &notes);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Allow { .. }));

    // A shell command, as a terminal and as a permission request, writes the file too.
    let term =
        json!({"sessionId": "s", "command": "sh", "args": ["-c", format!("echo x > {secret}")]});
    let h = held(&a, TO_EDITOR, "terminal/create", &term);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Block { .. }));
    let perm = permission_params(json!({"toolCallId": "c", "kind": "execute",
                                        "title": format!("touch {secret}")}));
    let h = held(&a, TO_EDITOR, "session/request_permission", &perm);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Block { .. }));

    // codex-acp's patch, whose rawInput hides the path from the policy, and its command, an
    // argv of `bash -lc SCRIPT`.
    let patch = codex_patch_permission(&secret);
    let h = held(&a, TO_EDITOR, "session/request_permission", &patch);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Block { .. }));
    let notes = codex_patch_permission(&root.join("notes.txt").display().to_string());
    let h = held(&a, TO_EDITOR, "session/request_permission", &notes);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Allow { .. }));
    let exec = permission_params(json!({"toolCallId": "c", "kind": "execute",
        "title": format!("touch {secret}"),
        "rawInput": {"command": ["/bin/bash", "-lc", format!("touch {secret}")],
                     "cwd": root}}));
    let h = held(&a, TO_EDITOR, "session/request_permission", &exec);
    assert!(matches!(policy_verdict(&policy, &h), Verdict::Block { .. }));
}
