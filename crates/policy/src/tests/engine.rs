//! The engine's guarantees: load-time examples, strictest wins, unparseable escalates, rewrites.

use serde_json::json;

use super::*;

fn bash_event(command: &str) -> Event {
    pre_action(json!({
        "tool_name": "Bash",
        "arguments": { "command": command },
        "context": { "working_directory": "/home/user/project" },
    }))
}

fn policy(toml: &str) -> Policy {
    Policy::from_toml_str(toml)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_home("/home/user")
}

#[test]
fn default_policy_examples_pass_and_the_text_is_printable() {
    let report = Policy::default_policy()
        .check()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.examples > 80, "{report:?}");
    assert_eq!(report.rules, Policy::default_policy().rule_ids().count());
    let text = Policy::default_toml();
    assert!(text.contains("id = \"read-secrets\""));
    Policy::from_toml_str(text).expect("the default policy loads through the public path");
}

#[test]
fn a_broken_example_is_a_load_error_naming_rule_and_example() {
    let toml = r#"
        [[rule]]
        id = "no-rm"
        decision = "block"
        reason = "no rm"
        match = ["rm x", "ls -l"]
        no_match = ["echo rm"]
        command.program = ["rm"]
    "#;
    let err = Policy::from_toml_str(toml).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, PolicyError::Examples(f) if f.len() == 1),
        "{err:?}"
    );
    assert!(msg.contains("\"no-rm\"") && msg.contains("ls -l"), "{msg}");

    let toml = toml.replace(r#"no_match = ["echo rm"]"#, r#"no_match = ["sudo rm y"]"#);
    let toml = toml.replace(r#""rm x", "ls -l""#, r#""rm x""#);
    let msg = Policy::from_toml_str(&toml).unwrap_err().to_string();
    assert!(
        msg.contains("no_match example \"sudo rm y\" matches"),
        "{msg}"
    );

    // Through a file, too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(&path, &toml).unwrap();
    assert!(matches!(Policy::load(&path), Err(PolicyError::Examples(_))));
    assert!(matches!(
        Policy::load(dir.path().join("missing.toml")),
        Err(PolicyError::Io { .. })
    ));
}

#[test]
fn the_strictest_decision_wins() {
    let rule = |id: &str, decision: &str, extra: &str| {
        format!(
            "[[rule]]\nid = \"{id}\"\ndecision = \"{decision}\"\nreason = \"r-{id}\"\n{extra}\ncommand.program = [\"make\"]\n"
        )
    };
    let all = [
        rule("a-allow", "allow", ""),
        rule(
            "b-modify",
            "modify",
            "rewrite.command = \"timeout 60 {command}\"",
        ),
        rule("c-defer", "defer", "retry_after_ms = 250"),
        rule("d-escalate", "escalate", "target = \"oncall\""),
        rule("e-block", "block", ""),
    ];
    let expect = ["block", "escalate", "defer", "modify", "allow"];
    // Put the rules in reverse so that file order cannot be what decides.
    for (drop, want) in expect.iter().enumerate() {
        let toml: String = all[..all.len() - drop].iter().rev().cloned().collect();
        let d = policy(&toml).evaluate(&bash_event("make test"));
        assert_eq!(d.verdict.name(), *want, "{toml}");
    }
    let toml: String = all.concat();
    let d = policy(&toml).evaluate(&bash_event("make test"));
    assert_eq!(d.rule.as_deref(), Some("e-block"));
    assert_eq!(d.reason(), Some("r-e-block"));
    let d = policy(&all[3]).evaluate(&bash_event("make"));
    assert_eq!(
        d.verdict,
        Verdict::Escalate {
            reason: "r-d-escalate".into(),
            target: Some("oncall".into())
        }
    );
    let d = policy(&all[2]).evaluate(&bash_event("make"));
    assert_eq!(
        d.verdict,
        Verdict::Defer {
            retry_after_ms: 250,
            reason: Some("r-c-defer".into())
        }
    );
    let d = policy(&all[0]).evaluate(&bash_event("make"));
    assert!(
        matches!(d.verdict, Verdict::Allow { explicit: true, .. }),
        "{d:?}"
    );
    // No rule matched: no opinion, not an explicit allow.
    assert_eq!(
        policy(&toml).evaluate(&bash_event("cargo test")),
        PolicyDecision::no_opinion()
    );
}

#[test]
fn an_unparseable_command_escalates() {
    let p = Policy::default_policy().with_home("/home/user");
    for bad in [
        "echo \"unterminated",
        "if then fi",
        "echo $(",
        "cat <(",
        "bash -c 'echo \"x'",
    ] {
        let d = p.evaluate(&bash_event(bad));
        assert_eq!(d.rule.as_deref(), Some(UNPARSEABLE_RULE), "{bad}: {d:?}");
        assert!(
            matches!(&d.verdict, Verdict::Escalate { reason, .. } if reason.contains("could not be parsed")),
            "{d:?}"
        );
    }
    // Nesting beyond the limit is not followed blindly either.
    let mut deep = "rm -rf /".to_owned();
    for _ in 0..20 {
        deep = format!("echo $({deep})");
    }
    assert_eq!(p.evaluate(&bash_event(&deep)).verdict.name(), "escalate");
    // So is bracket nesting that would exhaust the stack of a 2 MiB thread in the parser.
    let parens = "(".repeat(20_000) + "true" + &")".repeat(20_000);
    assert_eq!(p.evaluate(&bash_event(&parens)).verdict.name(), "escalate");
    // A block still beats the escalation.
    let d = p.evaluate(&bash_event("cat ~/.ssh/id_rsa; echo \"x"));
    assert_eq!(
        d.verdict.name(),
        "escalate",
        "the whole line fails to parse: {d:?}"
    );
    let d = p.evaluate(&pre_action(json!({
        "tool_name": "Bash",
        "arguments": { "command": "echo \"x", "file_path": "/home/user/.ssh/id_rsa" },
        "context": { "working_directory": "/home/user/project" },
    })));
    // Paths anywhere in a tool's arguments are checked, a shell tool's too.
    assert_eq!(
        d.verdict.name(),
        "block",
        "a secret named in any argument: {d:?}"
    );
    // allow_all has no opinion on anything, parseable or not.
    assert_eq!(
        Policy::allow_all().evaluate(&bash_event("echo \"x")),
        PolicyDecision::no_opinion()
    );
    assert_eq!(
        Policy::allow_all().evaluate(&bash_event("rm -rf /")),
        PolicyDecision::no_opinion()
    );
}

#[test]
fn unparseable_can_be_configured_to_block() {
    let p = policy("[settings]\nunparseable = \"block\"\n");
    assert_eq!(p.evaluate(&bash_event("echo \"x")).verdict.name(), "block");
    let p = policy("[settings]\nunparseable = \"no_opinion\"\n");
    assert_eq!(
        p.evaluate(&bash_event("echo \"x")),
        PolicyDecision::no_opinion()
    );
}

#[test]
fn modify_rewrites_the_command_wherever_the_framework_put_it() {
    let p = policy(
        r#"
        [[rule]]
        id = "timeout-tests"
        decision = "modify"
        rewrite.command = "timeout 600 {command}"
        rewrite.set = { "/arguments/description" = "{tool} under a timeout" }
        command.program = ["cargo"]
        command.args_any = ["test"]
        "#,
    );
    let d = p.evaluate(&bash_event("cargo test --lib"));
    let Verdict::Modify { modified_payload } = &d.verdict else {
        panic!("{d:?}")
    };
    assert_eq!(
        modified_payload["arguments"]["command"],
        "timeout 600 cargo test --lib"
    );
    assert_eq!(
        modified_payload["arguments"]["description"],
        "Bash under a timeout"
    );
    assert_eq!(
        modified_payload["context"]["working_directory"],
        "/home/user/project"
    );
    // Codex argv form.
    let d = p.evaluate(&pre_action(json!({
        "tool_name": "shell",
        "arguments": { "command": ["cargo", "test"] },
    })));
    let Verdict::Modify { modified_payload } = &d.verdict else {
        panic!("{d:?}")
    };
    assert_eq!(
        modified_payload["arguments"]["command"],
        json!(["bash", "-lc", "timeout 600 cargo test"])
    );
    // Codex `bash -lc SCRIPT` form: only the script changes.
    let d = p.evaluate(&pre_action(json!({
        "tool_name": "shell",
        "arguments": { "command": ["bash", "-lc", "cargo test"] },
    })));
    let Verdict::Modify { modified_payload } = &d.verdict else {
        panic!("{d:?}")
    };
    assert_eq!(
        modified_payload["arguments"]["command"],
        json!(["bash", "-lc", "timeout 600 cargo test"])
    );
}

#[test]
fn url_rules_see_fetch_tools_and_shell_commands() {
    let p = InSession::new(policy(
        r#"
        [[rule]]
        id = "no-paste-sites"
        decision = "escalate"
        reason = "paste site"
        match = ["curl -s https://PASTE.evil.example/raw/1", { tool_name = "WebFetch", arguments = { url = "http://a.evil.example/" } }]
        no_match = ["curl https://example.com/evil.example", "echo evil.example"]
        url.hosts = ["*.evil.example"]
        url.schemes = ["http", "https"]
        "#,
    ));
    let d = p.evaluate(&pre_action(json!({
        "tool_name": "web_fetch",
        "arguments": { "prompt": "summarise https://x.evil.example/page please" },
    })));
    assert_eq!(d.rule.as_deref(), Some("no-paste-sites"));
    // The host rules left to the floor's proxy, as in a run on the network floor: this is
    // the URL rule's scheme filter alone.
    p.leave_commands_to_egress(true);
    let d = p.evaluate(&bash_event("wget -q ftp://x.evil.example/f"));
    assert_eq!(d, PolicyDecision::no_opinion(), "scheme filter");
}

#[test]
fn shell_commands_are_found_in_every_framework_shape() {
    let s = Sandbox::new();
    let ws = s.ws.display().to_string();
    let cases = [
        json!({ "tool_name": "exec_command", "arguments": { "cmd": "rm -rf /" }, "cwd": ws }),
        json!({ "tool_name": "shell", "arguments": { "command": ["rm", "-rf", "/"] }, "cwd": ws }),
        json!({ "tool_name": "shell", "arguments": { "command": ["bash", "-lc", "rm -rf /"] }, "cwd": ws }),
        json!({ "tool_name": "run_shell_command", "arguments": { "command": "rm -rf ~" }, "context": { "cwd": ws } }),
        json!({ "tool_name": "Bash", "tool_input": { "command": "rm -rf ~" }, "context": { "cwd": ws } }),
        // Codex `workdir`: the command runs elsewhere than the session's cwd.
        json!({ "tool_name": "shell", "arguments": { "command": ["rm", "-rf", "*"], "workdir": "/" }, "cwd": ws }),
    ];
    for payload in cases {
        let d = s.policy.evaluate(&pre_action(payload.clone()));
        assert_blocked(&d, "delete-outside-workspace", &payload.to_string());
    }
    // The same command on a post_action (it already ran) or a prompt is not a pre_action rule's business.
    let payload = json!({ "tool_name": "Bash", "arguments": { "command": "rm -rf /" }, "cwd": ws });
    assert_no_opinion(
        &s.policy.evaluate(&event(EventType::PostAction, payload)),
        "post_action",
    );
}

#[test]
fn the_workspace_can_be_fixed_by_the_caller() {
    let s = Sandbox::new();
    let p = Policy::default_policy()
        .with_home(&s.home)
        .with_workspace(&s.ws);
    // The agent cd'd into /tmp, but the workspace is still ws: /tmp/x is outside it.
    let d = p.evaluate(&pre_action(json!({
        "tool_name": "Bash",
        "arguments": { "command": "rm -rf x" },
        "context": { "cwd": "/tmp" },
    })));
    assert_blocked(&d, "delete-outside-workspace", "rm -rf x in /tmp");
}

#[test]
fn events_and_tools_filters() {
    let p = policy(
        r#"
        [[rule]]
        id = "slow-down"
        decision = "defer"
        reason = "rate limited"
        events = ["rate_limit", "pre_prompt"]
        match = [{ event_type = "rate_limit", payload = {} }]
        no_match = ["anything"]

        [[rule]]
        id = "no-mcp-delete"
        decision = "block"
        reason = "no deleting through MCP"
        tools = ["mcp__*__delete_*", "re:^Notebook"]
        match = [{ tool_name = "mcp__fs__delete_file" }, { tool_name = "NotebookEdit" }]
        no_match = [{ tool_name = "mcp__fs__read_file" }, "rm x"]
        "#,
    );
    assert_eq!(
        p.evaluate(&event(EventType::PrePrompt, json!({"prompt": "hi"})))
            .verdict
            .name(),
        "defer"
    );
    assert_eq!(
        p.evaluate(&event(EventType::SessionStart, json!({}))),
        PolicyDecision::no_opinion()
    );
}

#[test]
fn invalid_rules_are_rejected_with_their_id() {
    let cases = [
        ("[[rule]]\nid = \"r\"\ndecision = \"block\"\ncommand.program = [\"rm\"]", "needs a reason"),
        ("[[rule]]\nid = \"r\"\ndecision = \"block\"\nreason = \"x\"\ncommand.args_any = [\"re:(\"]", "bad regex"),
        ("[[rule]]\nid = \"r\"\ndecision = \"block\"\nreason = \"x\"\nevents = [\"pre_tool_use\"]", "unknown event type"),
        ("[[rule]]\nid = \"r\"\ndecision = \"modify\"\ncommand.program = [\"rm\"]", "needs a rewrite"),
        ("[[rule]]\nid = \"r\"\ndecision = \"allow\"\n[[rule]]\nid = \"r\"\ndecision = \"allow\"", "used by another rule"),
        ("[[rule]]\nid = \"r\"\ndecision = \"allow\"\nfile.reads = [\"a/{b\"]", "bad glob"),
    ];
    for (toml, want) in cases {
        let msg = Policy::from_toml_str(toml).unwrap_err().to_string();
        assert!(msg.contains("\"r\"") && msg.contains(want), "{toml}: {msg}");
    }
    let typo =
        "[[rule]]\nid = \"r\"\ndecision = \"block\"\nreason = \"x\"\ncommand.programs = [\"rm\"]";
    assert!(
        matches!(Policy::from_toml_str(typo), Err(PolicyError::Toml { .. })),
        "unknown keys are errors"
    );
    assert!(matches!(
        Policy::from_toml_str("version = 2"),
        Err(PolicyError::Version(2))
    ));
}

#[test]
fn a_policy_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>(_: &T) {}
    let p = Policy::default_policy();
    shared(&p);
    let d = std::thread::scope(|s| {
        s.spawn(|| p.evaluate(&bash_event("rm -rf /")))
            .join()
            .unwrap()
    });
    assert_eq!(d.rule.as_deref(), Some("delete-outside-workspace"));
}

#[test]
fn the_complete_example_in_the_docs_loads() {
    let doc = include_str!("../../../../docs/policy.md");
    let section = doc
        .split("## A complete example")
        .nth(1)
        .expect("section exists");
    let toml = section
        .split("```toml")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .unwrap();
    let p = Policy::from_toml_str(toml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.check().unwrap().rules, 6);
    let d = p.evaluate(&bash_event("cd sub && git push"));
    assert!(
        matches!(&d.verdict, Verdict::Escalate { target: Some(t), .. } if t == "maintainers"),
        "{d:?}"
    );
}

#[test]
fn a_policy_extending_the_default_keeps_its_rules_and_adds_its_own() {
    let extended = policy(
        r#"
        extends = "default"
        disable = ["force-push-default-branch", "force-push"]

        [[rule]]
        id = "no-push"
        decision = "block"
        reason = "this CI job does not push"
        match = ["git push origin main"]
        command.program = ["git"]
        command.args_any = ["push"]
        "#,
    );
    let default = Policy::default_policy().with_home("/home/user");
    // The default's rules still decide what the file says nothing about.
    let d = extended.evaluate(&bash_event("rm -rf ~"));
    assert_eq!(d, default.evaluate(&bash_event("rm -rf ~")));
    assert!(matches!(d.verdict, Verdict::Block { .. }), "{d:?}");
    // Its own rule adds to them; the disabled ones no longer decide.
    let push = extended.evaluate(&bash_event("git push --force origin main"));
    assert_eq!(push.rule.as_deref(), Some("no-push"), "{push:?}");
    assert_eq!(
        default
            .evaluate(&bash_event("git push --force origin main"))
            .rule
            .as_deref(),
        Some("force-push-default-branch")
    );
    assert!(!extended.rule_ids().any(|id| id.starts_with("force-push")));
    assert_eq!(
        extended.rule_ids().count(),
        default.rule_ids().count() - 1,
        "two default rules out, one rule in"
    );
    // Only the file's own examples are checked when it loads.
    assert_eq!(extended.check().unwrap().rules, 1);
}

#[test]
fn a_rule_with_a_default_rules_id_replaces_it_and_settings_are_kept_unless_given() {
    let loose = policy(
        r#"
        extends = "default"
        [[rule]]
        id = "delete-outside-workspace"
        decision = "escalate"
        reason = "a person decides on deletions outside the workspace"
        match = ["rm -rf /tmp/x"]
        command.program = ["rm"]
        "#,
    );
    let d = loose.evaluate(&bash_event("rm -rf /opt/data"));
    assert_eq!(d.rule.as_deref(), Some("delete-outside-workspace"));
    assert!(matches!(d.verdict, Verdict::Escalate { .. }), "{d:?}");
    // [settings] left out: the default's (an unparseable command escalates).
    let d = loose.evaluate(&bash_event("echo 'unterminated"));
    assert!(matches!(d.verdict, Verdict::Escalate { .. }), "{d:?}");
}

#[test]
fn extends_and_disable_are_refused_when_they_cannot_mean_what_they_say() {
    for (toml, says) in [
        (r#"extends = "strict""#, "only \"default\""),
        (r#"disable = ["read-secrets"]"#, "needs `extends"),
        (
            "extends = \"default\"\ndisable = [\"read-secret\"]",
            "\"read-secret\", which is not a rule of the default policy",
        ),
    ] {
        let e = Policy::from_toml_str(toml).expect_err(toml).to_string();
        assert!(e.contains(says), "{toml}: {e}");
    }
}
