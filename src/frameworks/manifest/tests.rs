use std::path::Path;

use serde_json::{json, Value};

use super::built_in::BUILT_IN;
use super::*;
use crate::frameworks::adapter::testing::{block, cx, modify, sample};
use crate::frameworks::adapter::{AgentCommand, Final, Framework, RunContext};

const QWEN: &str = include_str!("../../../shims/qwen/shim.toml");

fn qwen() -> ManifestShim {
    ManifestShim::new(parse(QWEN, "shims/qwen/shim.toml").unwrap())
}

fn run(dir: &Path) -> RunContext {
    RunContext {
        self_exe: "/opt/ahp-wrap".into(),
        run_dir: dir.to_owned(),
        hook_budget_ms: 12_001,
        interactive: false,
    }
}

/// What `shim` renders on `hook`: stdout parsed, and the exit code.
fn rendered(shim: &ManifestShim, hook: &str, verdict: &Final) -> (Option<Value>, i32) {
    let r = shim.render(&cx(hook), None, verdict);
    let v = (!r.stdout.is_empty()).then(|| serde_json::from_slice(&r.stdout).unwrap());
    (v, r.exit_code)
}

#[test]
fn every_qwen_sample_maps_to_its_event_type() {
    let shim = qwen();
    let mapped = |hook: &str| shim.map(&cx(hook), &sample("qwen", hook)).unwrap().unwrap();
    for (hook, event_type) in [
        ("SessionStart", EventType::SessionStart),
        ("UserPromptSubmit", EventType::PrePrompt),
        ("PreToolUse", EventType::PreAction),
        ("PostToolUse", EventType::PostAction),
        ("Stop", EventType::PostResponse),
    ] {
        let m = mapped(hook);
        assert_eq!(m.event_type, event_type, "{hook}");
        assert_eq!(
            m.framework_session.as_deref(),
            Some("68207c0a-20a2-43b4-be58-5eaa5468bd17"),
            "{hook}"
        );
    }
    let pre = mapped("PreToolUse").payload;
    assert_eq!(pre["action_type"], "tool_call");
    assert_eq!(pre["tool_name"], "run_shell_command");
    assert!(pre["arguments"]["command"]
        .as_str()
        .unwrap()
        .ends_with("echo OUT-QWEN"));
    assert_eq!(pre["tool_call_id"], "call_8b7a252424f745ad80ed");
    assert_eq!(pre["context"]["permission_mode"], "yolo");
    assert_eq!(
        pre["context"]["working_directory"],
        "/home/dev/runs/qwen_basic/work"
    );
    let post = mapped("PostToolUse").payload;
    assert_eq!(post["result"]["output"]["returnDisplay"], "OUT-QWEN");
    assert_eq!(post["result"]["duration_ms"], 90);
    assert_eq!(mapped("UserPromptSubmit").payload["prompt"], "run it");
    assert_eq!(mapped("Stop").payload["response"], "Done.");
    let start = mapped("SessionStart").payload;
    assert_eq!(start["framework"], "qwen");
    assert_eq!(
        start["framework_session_id"],
        "68207c0a-20a2-43b4-be58-5eaa5468bd17"
    );
}

#[test]
fn malformed_payloads_are_errors() {
    let shim = qwen();
    for (hook, payload) in [
        ("PreToolUse", &b"{}"[..]),
        ("PreToolUse", b"[]"),
        ("PreToolUse", b"nope"),
        ("UserPromptSubmit", b"{}"),
        ("Notification", b"{}"),
    ] {
        assert!(shim.map(&cx(hook), payload).is_err(), "{hook}");
    }
    let e = shim.map(&cx("PreToolUse"), b"{}").unwrap_err().to_string();
    assert!(e.contains("qwen") && e.contains("/tool_name"), "{e}");
}

#[test]
fn qwen_denies_blocks_and_modifications_and_never_steers_a_notification() {
    let shim = qwen();
    assert_eq!(
        rendered(&shim, "PreToolUse", &Final::no_opinion()),
        (None, 0)
    );
    let (v, code) = rendered(&shim, "PreToolUse", &block("no"));
    assert_eq!(code, 0);
    assert_eq!(
        v.unwrap()["hookSpecificOutput"],
        json!({"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"})
    );
    let (v, _) = rendered(&shim, "PreToolUse", &modify(json!({"command": "ls"})));
    let o = &v.unwrap()["hookSpecificOutput"];
    assert_eq!(o["permissionDecision"], "deny");
    assert!(o["permissionDecisionReason"]
        .as_str()
        .unwrap()
        .contains("cannot run a modified tool call"));
    assert!(!shim.native_ask(&cx("PreToolUse")));
    assert_eq!(
        rendered(&shim, "UserPromptSubmit", &block("P")),
        (Some(json!({"decision": "block", "reason": "P"})), 0)
    );
    assert_eq!(
        rendered(&shim, "UserPromptSubmit", &Final::no_opinion()),
        (None, 0)
    );
    for hook in ["Stop", "SessionEnd", "SessionStart"] {
        let r = shim.render(&cx(hook), None, &block("down"));
        assert_eq!(
            (r.stdout.len(), r.stderr, r.exit_code),
            (0, b"down\n".to_vec(), 1)
        );
        assert_eq!(
            rendered(&shim, hook, &Final::no_opinion()),
            (None, 0),
            "{hook}"
        );
    }
    assert_eq!(
        rendered(&shim, "PostToolUse", &block("down")).0.unwrap()["decision"],
        "block"
    );
    assert_eq!(rendered(&shim, "Other", &block("x")), (None, 2));
}

#[test]
fn qwen_settings_are_merged_into_the_system_file_they_replace() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("system.json");
    std::fs::write(
        &system,
        json!({
            "disableAllHooks": true,
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]},
        })
        .to_string(),
    )
    .unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let mut cmd = AgentCommand {
        program: "qwen".into(),
        args: vec!["hello".into(), "--yolo".into()],
        ..AgentCommand::default()
    };
    // The variable the settings replace is read from the environment: name the file.
    let text = QWEN.replace("/etc/qwen-code/settings.json", system.to_str().unwrap());
    let shim = ManifestShim::new(parse(&text, "qwen.toml").unwrap());
    shim.prepare(&run(&run_dir), &mut cmd).unwrap();
    let path = run_dir.join("qwen-system-settings.json");
    assert_eq!(
        cmd.env[0],
        ("QWEN_CODE_SYSTEM_SETTINGS_PATH".into(), path.clone().into())
    );
    assert_eq!(
        cmd.env[1],
        (
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH".into(),
            dir.path().join("system-defaults.json").into()
        )
    );
    let m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(m["disableAllHooks"], false);
    let pre = m["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2);
    assert_eq!(pre[0]["hooks"][0]["command"], "mine");
    assert_eq!(pre[1]["matcher"], "*");
    assert_eq!(pre[1]["hooks"][0]["timeout"], 18);
    let command = pre[1]["hooks"][0]["command"].as_str().unwrap();
    assert!(command.starts_with("AHP_WRAP_RUN="), "{command}");
    assert!(command.ends_with(" exec '/opt/ahp-wrap' hook qwen PreToolUse"));
    assert!(m["hooks"]["Stop"][0].get("matcher").is_none());
    assert_eq!(m["hooks"].as_object().unwrap().len(), 7);
    // A built-in manifest names no file for the hooks to find.
    assert!(cmd.env.iter().all(|(k, _)| k != ENV_SHIM));
    // Hookless flags are refused, before a `--` only.
    cmd.args = vec!["--bare".into()];
    let e = shim
        .prepare(&run(&run_dir), &mut cmd)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--bare would keep Qwen Code from loading the hooks"),
        "{e}"
    );
    cmd.args = vec!["--safe-mode=1".into()];
    assert!(shim.prepare(&run(&run_dir), &mut cmd).is_err());
    cmd.args = vec!["--".into(), "--bare".into()];
    let path = run_dir.join("qwen-system-settings.json");
    std::fs::remove_file(&path).unwrap();
    assert!(shim.prepare(&run(&run_dir), &mut cmd).is_ok());
}

/// A manifest for an agent that takes its settings with a flag, applies a modified tool
/// input, asks its own person, and calls a path `target_file`.
const FULL: &str = r#"
name = "full"
agent = "Full Agent"
executables = ["full"]
proven = ["1.2", "1.4.0"]

[inject]
file = "full-settings.json"
flag = "--settings"
timeout_unit = "ms"
expect_hook = "SessionStart"

[payload]
tool_name = "/tool/name"
arguments = "/tool/input"
call_ids = ["/tool/id"]
session = "/session"
rename_arguments = { target_file = "file_path" }

[[events]]
name = "SessionStart"
ahp = "session_start"
shape = "session_start"
block = { stderr = "{reason}", exit = 1 }

[[events]]
name = "BeforeTool"
ahp = "pre_action"
shape = "tool_call"
tool = true
block = { stderr = "{reason}", exit = 2 }
ask = { stdout = { decision = "ask", why = "{reason}" } }
modify = { stdout = { decision = "allow", input = "{updated_input}" } }
context = { stdout = { context = "{context}", event = "{event}" } }
"#;

#[test]
fn a_manifest_can_apply_a_modify_ask_natively_rename_arguments_and_take_a_flag() {
    let shim = ManifestShim::from_file(parse(FULL, "full.toml").unwrap(), "/x/full.toml".into());
    assert_eq!(shim.proven().unwrap().to_string(), "1.2 to 1.4.0");
    let m = shim
        .map(
            &cx("BeforeTool"),
            br#"{"session":"s1","tool":{"name":"Write","id":7,"input":{"target_file":"a.txt","content":"x"}}}"#,
        )
        .unwrap()
        .unwrap();
    assert_eq!(m.framework_session.as_deref(), Some("s1"));
    assert_eq!(
        m.payload["arguments"],
        json!({"file_path": "a.txt", "content": "x"})
    );
    assert_eq!(m.payload["id"], 7);
    assert_eq!(m.payload["context"]["working_directory"], "/");
    // A modify comes back under the agent's own argument names.
    let (v, code) = rendered(
        &shim,
        "BeforeTool",
        &modify(json!({"arguments": {"file_path": "b.txt", "content": "y"}})),
    );
    assert_eq!(code, 0);
    assert_eq!(
        v.unwrap(),
        json!({"decision": "allow", "input": {"target_file": "b.txt", "content": "y"}})
    );
    let r = shim.render(&cx("BeforeTool"), None, &modify(json!("not an object")));
    assert_eq!(r.exit_code, 2);
    assert!(String::from_utf8_lossy(&r.stderr).contains("cannot be applied"));
    assert!(shim.native_ask(&cx("BeforeTool")));
    let ask = Final::Ask {
        reason: "check".into(),
        target: None,
    };
    assert_eq!(
        rendered(&shim, "BeforeTool", &ask),
        (Some(json!({"decision": "ask", "why": "check"})), 0)
    );
    let with_context = crate::frameworks::adapter::testing::allow(
        true,
        json!({"additional_context": "mind the tests"}),
    );
    assert_eq!(
        rendered(&shim, "BeforeTool", &with_context).0.unwrap(),
        json!({"context": "mind the tests", "event": "BeforeTool"})
    );
    assert_eq!(
        rendered(&shim, "BeforeTool", &Final::no_opinion()),
        (None, 0)
    );

    let dir = tempfile::tempdir().unwrap();
    let mut cmd = AgentCommand {
        program: "full".into(),
        args: vec!["go".into()],
        ..AgentCommand::default()
    };
    shim.prepare(&run(dir.path()), &mut cmd).unwrap();
    let path = dir.path().join("full-settings.json");
    assert_eq!(
        cmd.args,
        vec![
            "--settings".into(),
            path.clone().into_os_string(),
            "go".into()
        ]
    );
    assert_eq!(cmd.expect_hook.as_deref(), Some("SessionStart"));
    let (k, v) = cmd.env.iter().find(|(k, _)| k == ENV_SHIM).unwrap();
    assert_eq!(
        (k.to_str(), v.to_str()),
        (Some(ENV_SHIM), Some("/x/full.toml"))
    );
    let s: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(s["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"], 17_001);
    assert_eq!(s["hooks"]["BeforeTool"][0]["matcher"], "*");
}

/// `FULL` with `from` replaced by `to`: the error it loads with.
fn broken(from: &str, to: &str) -> ManifestError {
    assert!(FULL.contains(from), "{from}");
    parse(&FULL.replacen(from, to, 1), "bad.toml").unwrap_err()
}

fn line_of_text(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn a_malformed_manifest_is_refused_with_its_line_and_field() {
    let cases: Vec<(&str, &str, &str, &str)> = vec![
        // (replace, with, field named, text on the line reported)
        (
            "timeout_unit",
            "timeout_units",
            "timeout_units",
            "timeout_units",
        ),
        (
            r#"tool_name = "/tool/name""#,
            r#"tool_name = "tool/name""#,
            "tool_name",
            "tool_name =",
        ),
        (
            r#"ahp = "pre_action""#,
            r#"ahp = "pre_acton""#,
            "ahp",
            "pre_acton",
        ),
        ("tool = true", "tool = \"yes\"", "tool", "tool = \"yes\""),
        (
            r#"modify = { stdout = { decision = "allow", input = "{updated_input}" } }"#,
            r#"modify = { becomes = "allow" }"#,
            "events[1].modify.becomes",
            "becomes = \"allow\"",
        ),
        (
            r#"why = "{reason}""#,
            r#"why = "{reson}""#,
            "events[1].ask",
            "{reson}",
        ),
        (
            r#"block = { stderr = "{reason}", exit = 2 }"#,
            "",
            "events[1].block",
            "[[events]]",
        ),
        (
            "flag = \"--settings\"",
            "flag = \"--settings\"\nenv = \"X\"",
            "inject",
            "[inject]",
        ),
        (
            "name = \"full\"",
            "name = \"full agent\"",
            "name",
            "name = \"full agent\"",
        ),
        (
            "expect_hook = \"SessionStart\"",
            "expect_hook = \"Start\"",
            "inject.expect_hook",
            "[inject]",
        ),
        ("[inject]", "[inject", "inject", "[inject"),
    ];
    for (from, to, field, on_line) in cases {
        let text = FULL.replacen(from, to, 1);
        let e = broken(from, to);
        assert_eq!(e.source_name, "bad.toml");
        assert!(
            e.field.contains(field),
            "{from} -> {to}: field {:?}: {e}",
            e.field
        );
        let want = if on_line == "[[events]]" {
            // The event that lacks its block: the second one.
            text.match_indices("[[events]]")
                .nth(1)
                .map(|(at, _)| line_of(&text, at))
                .unwrap()
        } else {
            line_of_text(&text, on_line)
        };
        assert_eq!(e.line, want, "{from} -> {to}: {e}");
        assert!(
            e.to_string().starts_with(&format!("bad.toml:{want}: ")),
            "{e}"
        );
    }
    // A block that says nothing and exits 0 would let the call through.
    let e = parse(
        &FULL.replace(
            r#"block = { stderr = "{reason}", exit = 2 }"#,
            r#"block = { stderr = "{reason}" }"#,
        ),
        "bad.toml",
    )
    .unwrap_err();
    assert_eq!(e.field, "events[1].block", "{e}");
    // A modify the agent applies must be a tool call's answer that holds the input.
    let e = parse(&FULL.replace("{updated_input}", "{reason}"), "bad.toml").unwrap_err();
    assert_eq!(e.field, "events[1].modify");
}

#[test]
fn every_built_in_manifest_loads_and_its_samples_check() {
    assert!(!BUILT_IN.is_empty());
    for built_in in BUILT_IN {
        let m = parse(built_in.text, built_in.path).unwrap_or_else(|e| panic!("{e}"));
        // What the build read for the run's look-ups is what the parser reads.
        assert_eq!(
            (built_in.name, built_in.executables),
            (m.name, m.executables)
        );
        assert!(
            ManifestShim::new(parse(built_in.text, built_in.path).unwrap())
                .adapters()
                .is_empty()
        );
        let path = built_in.path;
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        let report = check::check(&file, None);
        assert!(report.ok, "{}: {}", m.name, report.lines.join("\n"));
    }
    assert_eq!(qwen().name(), "qwen");
}

/// droid's way: the variable names one file, so a file the user already named in it is
/// merged into ours (their own hooks and settings kept), and with none named, ours is alone.
#[test]
fn an_env_injection_merges_the_file_the_variable_already_names() {
    const VAR: &str = "AHP_WRAP_TEST_MANIFEST_RUNTIME_SETTINGS";
    let droid = include_str!("../../../shims/droid/shim.toml")
        .replace("FACTORY_RUNTIME_SETTINGS_PATH", VAR);
    let shim = ManifestShim::new(parse(&droid, "droid.toml").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs.json");
    std::fs::write(
        &theirs,
        json!({"model": "mine", "hooks": {"PreToolUse": [{"matcher": "Execute",
            "hooks": [{"type": "command", "command": "their-hook"}]}]}})
        .to_string(),
    )
    .unwrap();
    let prepared = |run_dir: &Path| {
        std::fs::create_dir_all(run_dir).unwrap();
        let mut cmd = AgentCommand::default();
        shim.prepare(&run(run_dir), &mut cmd).unwrap();
        let (name, path) = cmd.env[0].clone();
        assert_eq!(name, VAR);
        let written: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        (cmd, written)
    };
    let (cmd, alone) = prepared(&dir.path().join("run1"));
    assert_eq!(cmd.env.len(), 1, "no defaults variable: {:?}", cmd.env);
    assert!(alone.get("model").is_none());
    assert_eq!(alone["hooks"]["PreToolUse"].as_array().unwrap().len(), 1);
    std::env::set_var(VAR, &theirs);
    let (_, merged) = prepared(&dir.path().join("run2"));
    std::env::remove_var(VAR);
    assert_eq!(merged["model"], "mine");
    let pre = merged["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0]["hooks"][0]["command"], "their-hook");
    assert!(pre[1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .ends_with("hook droid PreToolUse"));
}

#[test]
fn a_manifest_declares_a_mixed_state_file_key_by_key() {
    use crate::frameworks::adapter::{StateFormat, Treatment};
    let files = qwen().agent_files(Path::new("/h"));
    let mixed = &files.mixed[0];
    assert_eq!(mixed.path, Path::new("/h/.qwen/trustedFolders.json"));
    assert_eq!(mixed.format, StateFormat::Json);
    assert_eq!(mixed.lock, None);
    let key = |k: &str| vec![k.to_owned()];
    let ws = ["/w/app".to_owned()];
    assert_eq!(mixed.treatment(&key("/w/app"), &ws), Treatment::Own);
    assert_eq!(mixed.treatment(&key("/elsewhere"), &ws), Treatment::Guarded);
    let with_lock = QWEN.replace(
        "{ path = \".qwen/trustedFolders.json\",",
        "{ lock = \".qwen/l\", path = \".qwen/trustedFolders.json\",",
    );
    let shim = ManifestShim::new(parse(&with_lock, "qwen.toml").unwrap());
    let files = shim.agent_files(Path::new("/h"));
    assert_eq!(
        files.mixed[0].lock.as_deref(),
        Some(Path::new("/h/.qwen/l"))
    );
    let bad = QWEN.replace("format = \"json\", other", "format = \"yaml\", other");
    assert_ne!(bad, QWEN);
    assert!(parse(&bad, "bad.toml").is_err());
}
