//! What the agent is told when the network floor refused a connection its tool then reports
//! failing (the run's post-tool hook answers with why, and what the user can change).

use super::settings::evidence;
use super::{usable, Net};

/// A connection the floor refused, as the agent's tool reported it: the tool's result, given
/// back through the run's post-tool hook, is answered with why (this run's network floor
/// refused the host) and what the user can change; the summary counts it and the audit log
/// records it. Both ways a refusal shows: the proxy's (`curl` through it: `CONNECT tunnel
/// failed`, the host named only by the command) and the resolver's (`Could not resolve
/// host`, without the proxy). A host the floor let through is not explained.
#[test]
fn a_connection_the_floor_refused_is_explained_to_the_agent() {
    if !usable() {
        return;
    }
    const TOLD: &str = r#"
set -f
tell() {
  out=$(curl -sS -m 20 $2 "http://$1/x" 2>&1 | tr -d '"\\')
  sleep 0.5
  printf '{"event_type":"post_action","payload":{"tool_name":"Bash","arguments":{"command":"curl %s"},"result":{"output":"%s"}}}' "$1" "$out" \
    | "$AHP_WRAP_BIN" hook generic post_action > "told-$3.json"
}
tell denied.test "" proxied
tell denied.test "--noproxy *" resolver
tell allowed.test "" allowed
"#;
    let net = Net::new();
    let out = net.run_with(&[], TOLD);
    let why = evidence(&net, &out);
    for way in ["proxied", "resolver"] {
        let told: serde_json::Value =
            serde_json::from_str(&net.read(&format!("ws/told-{way}.json")))
                .unwrap_or_else(|e| panic!("{way}: {e}\n{why}"));
        let context = told["additional_context"].as_str().unwrap_or_default();
        assert!(
            context.contains("denied.test: the run's network floor refused it")
                && context.contains("[floor.net]"),
            "{way}: {told}\n{why}"
        );
    }
    let allowed = net.read("ws/told-allowed.json");
    assert!(!allowed.contains("additional_context"), "{allowed}\n{why}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the agent met the floor 2 times")
            && stderr.contains("denied.test (a connection the floor refused)"),
        "{why}"
    );
    let explained = net
        .records()
        .into_iter()
        .filter(|r| r["event_type"] == "error" && r["payload"]["source"] == "floor")
        .filter(|r| r["payload"]["refused"][0]["target"] == "denied.test")
        .count();
    assert_eq!(explained, 2, "{why}");
}
