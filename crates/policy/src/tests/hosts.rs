//! One host policy: the URLs a tool will contact answer to the `[floor.net]` host rules, as
//! a connection of the agent's tree does.

use serde_json::json;

use super::*;

fn tool(name: &str, arguments: Value) -> Event {
    pre_action(json!({
        "tool_name": name,
        "arguments": arguments,
        "context": { "working_directory": "/home/user/project" },
    }))
}

fn decide(policy: &Policy, name: &str, arguments: Value) -> PolicyDecision {
    policy.evaluate(&tool(name, arguments))
}

#[track_caller]
fn assert_escalated(d: &PolicyDecision, host: &str) {
    match &d.verdict {
        Verdict::Escalate { reason, .. } => {
            assert!(reason.contains(host), "{reason}");
            assert!(reason.contains("[floor.net]"), "{reason}");
        }
        other => panic!("{host}: expected an escalation, got {other:?}"),
    }
    assert_eq!(d.rule.as_deref(), Some(HOSTS_RULE));
}

#[test]
fn a_tool_that_would_contact_an_unknown_host_is_asked_about() {
    let p = Policy::default_policy().with_home("/home/user");
    let d = decide(
        &p,
        "mcp__fetch__fetch",
        json!({"url": "https://collect.example/x?d=1"}),
    );
    assert_escalated(&d, "collect.example");
    // Wherever the URL is, under a name that says it is one, in any case or spelling.
    for args in [
        json!({"data": "x", "callback_url": "https://Collect.Example./cb"}),
        json!({"options": {"webhookUrl": "https://collect.example/h"}}),
        json!({"targets": [{"endpoint": "wss://collect.example/s"}]}),
        json!({"redirect_uris": ["https://collect.example/r"]}),
    ] {
        assert_escalated(
            &decide(&p, "mcp__api__post", args.clone()),
            "collect.example",
        );
    }
    assert_escalated(
        &decide(
            &p,
            "WebFetch",
            json!({"url": "https://collect.example/", "prompt": "p"}),
        ),
        "collect.example",
    );
}

#[test]
fn hosts_the_floor_lets_through_and_loopback_ports_it_names_are_not_asked_about() {
    let p = Policy::default_policy().with_home("/home/user");
    for url in [
        "https://api.github.com/repos/a/b",
        "https://raw.githubusercontent.com/a/b/main/x",
    ] {
        assert_no_opinion(&decide(&p, "mcp__fetch__fetch", json!({"url": url})), url);
    }
    // A port of this machine's loopback is the person's program's: asked about, unless
    // `loopback_ports` names it.
    for url in ["http://127.0.0.1:8080/", "http://localhost:3000/api"] {
        assert_escalated(
            &decide(&p, "mcp__fetch__fetch", json!({"url": url})),
            "loopback_ports",
        );
    }
    let named = Policy::from_toml_str(
        "extends = \"default\"\n[floor.net]\nloopback_ports = [8080, 3000]\n",
    )
    .unwrap()
    .with_home("/home/user");
    for url in ["http://127.0.0.1:8080/", "http://localhost:3000/api"] {
        assert_no_opinion(
            &decide(&named, "mcp__fetch__fetch", json!({"url": url})),
            url,
        );
    }
    // A URL merely written into a file is no contact.
    let write = json!({"file_path": "/home/user/project/README.md",
                       "content": "see https://collect.example/ and url: https://x.example/"});
    assert_no_opinion(&decide(&p, "Write", write), "a link in a README");
}

#[test]
fn denied_hosts_and_raw_addresses_are_blocked_with_the_floors_reason() {
    let p = Policy::default_policy().with_home("/home/user");
    let d = decide(
        &p,
        "mcp__fetch__fetch",
        json!({"url": "http://10.1.2.3:9000/admin"}),
    );
    match &d.verdict {
        Verdict::Block { reason } => assert!(reason.contains("raw address"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.rule.as_deref(), Some(HOSTS_RULE));
    // The floor's deny list, in an address spelling a fetcher accepts.
    let d = decide(
        &p,
        "mcp__fetch__fetch",
        json!({"url": "http://metadata.google.internal/"}),
    );
    assert!(matches!(d.verdict, Verdict::Block { .. }), "{d:?}");
}

#[test]
fn the_policy_files_own_floor_net_decides() {
    let blocking = Policy::from_toml_str(
        "extends = \"default\"\n[floor.net]\nunknown = \"block\"\nallow = [\"docs.rs\"]\n",
    )
    .unwrap();
    let d = decide(
        &blocking,
        "mcp__fetch__fetch",
        json!({"url": "https://collect.example/"}),
    );
    match &d.verdict {
        Verdict::Block { reason } => assert!(reason.contains("unknown = \"block\""), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_no_opinion(
        &decide(
            &blocking,
            "mcp__fetch__fetch",
            json!({"url": "https://docs.rs/x"}),
        ),
        "an allowed host",
    );
    let open =
        Policy::from_toml_str("extends = \"default\"\n[floor.net]\nunknown = \"allow\"\n").unwrap();
    assert_no_opinion(
        &decide(
            &open,
            "mcp__fetch__fetch",
            json!({"url": "https://collect.example/"}),
        ),
        "unknown = allow",
    );
    let off =
        Policy::from_toml_str("extends = \"default\"\n[floor.net]\nenabled = false\n").unwrap();
    assert_no_opinion(
        &decide(
            &off,
            "mcp__fetch__fetch",
            json!({"url": "https://collect.example/"}),
        ),
        "the network floor off",
    );
}

#[test]
fn the_hosts_a_call_contacts_are_named_for_the_gate() {
    let event = tool(
        "mcp__api__post",
        json!({"callbackUrl": "https://Collect.Example/cb", "body": "https://not.example/"}),
    );
    assert_eq!(contacted_hosts(&event), vec!["collect.example".to_owned()]);
}

#[test]
fn the_egress_proxys_own_events_are_not_judged_twice() {
    // The proxy judged the connection by the same rules (with the agent's model hosts
    // added) before it asked: the policy does not judge its host again.
    let p = Policy::default_policy().with_home("/home/user");
    let args = json!({"host": "chatgpt.com", "port": 443, "url": "https://chatgpt.com:443/"});
    let mut from_proxy = tool("net", args.clone());
    let mut metadata = Map::new();
    metadata.insert("interceptor".into(), "egress".into());
    from_proxy.metadata = Some(metadata);
    assert_no_opinion(&p.evaluate(&from_proxy), "the proxy's net event");
    // A tool of the agent's that is merely called `net` is judged.
    assert_escalated(&decide(&p, "net", args), "chatgpt.com");
}

#[test]
fn the_hosts_commands_contact_are_judged_unless_the_egress_proxy_asks() {
    let p = InSession::new(Policy::default_policy().with_home("/home/user"));
    let bash = |command: &str| tool("Bash", json!({"command": command}));
    for command in [
        "curl -s https://collect.example/x",
        "wget -q -O- collect.example/x",
        "curl -o out.json collect.example/x",
        "curl -dx.y collect.example/x",
        "python3 -c 'import urllib.request as u; u.urlopen(\"http://collect\" + \".example\")'",
        "node -e 'fetch(`https://${\"collect.example\"}/`)'",
    ] {
        let d = p.evaluate(&bash(command));
        assert_escalated(&d, "collect.example");
        assert!(
            d.reason().is_some_and(|r| r.contains("this command")),
            "{d:?}"
        );
    }
    // Merely naming a URL is no contact; an option's value (a file, a header) names no host.
    for command in [
        "echo https://collect.example/x",
        "git commit -m 'see https://collect.example/x'",
        "curl -s https://api.github.com/repos/a/b",
        "curl -sSf -o out.json https://api.github.com/repos/a/b",
        "curl -sSfo out.json -H x.y:z https://api.github.com/repos/a/b",
        "curl --output out.json https://api.github.com/repos/a/b",
        "wget -O pkg.tar.gz https://registry.npmjs.org/x/-/x-1.0.0.tgz",
    ] {
        assert_no_opinion(&p.evaluate(&bash(command)), command);
    }
    // On the network floor the proxy asks about each connection: the policy leaves them to it.
    p.leave_commands_to_egress(true);
    assert_no_opinion(
        &p.evaluate(&bash("curl -s https://collect.example/x")),
        "left to the egress proxy",
    );
    assert_escalated(
        &decide(
            &p,
            "mcp__fetch__fetch",
            json!({"url": "https://collect.example/"}),
        ),
        "collect.example",
    );
}
