//! End to end on the real aider (the version pinned in tests/aider/VERSION, installed from
//! PyPI by tests/aider/setup.sh), an agent without hooks: only the PATH shims stand between
//! it and the commands it runs. A scripted fake OpenAI Chat Completions server on 127.0.0.1
//! answers with "suggested shell commands" (```bash blocks), which aider runs through
//! `/bin/sh -c` once the user says yes; what happened is read from the disk, the audit log
//! and the harness's log.
//!
//! aider's `--yes-always` answers "no" to running shell commands (0.86: `confirm_ask` with
//! `explicit_yes_required`), so the user's "y" comes on stdin instead, as typed answers.

use ahp_wrap_testkit::agents;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use agents::{FakeServer, Run, TestDir};
use serde_json::{json, Value};

const VERSION: &str = include_str!("aider/VERSION");
/// How long one wrapped run may take before the test fails (aider starts in 3–12 s here).
const RUN_LIMIT: Duration = Duration::from_secs(120);
const PROMPT: &str = "please tidy up";

fn aider_bin() -> PathBuf {
    agents::installed_bin(
        "aider",
        VERSION.trim(),
        "aider",
        "aider",
        "aider-chat from PyPI into a virtual environment",
    )
}

/// One model reply: some prose, then each command in its own ```bash block (aider asks
/// about each block on its own).
fn reply(commands: &[String]) -> Value {
    let mut text = String::from("I will run these commands.\n");
    for c in commands {
        text.push_str(&format!("\n```bash\n{c}\n```\n"));
    }
    json!({ "text": text })
}

/// The fake model server: aider sends no tool list, so every chat request takes a turn.
fn fake_llm(world: &TestDir, turns: Value) -> FakeServer {
    FakeServer::start_script(
        "fake_llm.py",
        "fake model server",
        world.dir.path(),
        "llm",
        json!({"turns": turns, "main_if": "any"}),
    )
}

/// A world for aider: the workspace with `a.txt`, HOME, and aider's model-metadata cache
/// fresh and not empty (otherwise it fetches litellm's price list from GitHub at start).
fn world() -> TestDir {
    let world = TestDir::new("ahp-aider-e2e-", None, &["home/.aider/caches"]);
    let metadata = json!({"openai/gpt-fake": {
        "max_input_tokens": 128000, "max_output_tokens": 4096, "litellm_provider": "openai",
        "mode": "chat", "input_cost_per_token": 0.0, "output_cost_per_token": 0.0}});
    std::fs::write(
        world
            .dir
            .path()
            .join("home/.aider/caches/model_prices_and_context_window.json"),
        metadata.to_string(),
    )
    .unwrap();
    std::fs::write(world.ws().join("a.txt"), "the original\n").unwrap();
    world
}

/// `ahp-wrap WRAPPER -- aider …` in the workspace, offline, one message, the user answering
/// "y" to every question.
fn wrapped(world: &TestDir, llm: &FakeServer, wrapper: &[&str]) -> Run {
    let answers = world.dir.path().join("answers");
    std::fs::write(&answers, "y\n".repeat(10)).unwrap();
    let mut cmd = Command::new(ahp_wrap_testkit::wrap_bin());
    cmd.args(wrapper).arg("--").arg(aider_bin());
    cmd.args([
        "--openai-api-base",
        &format!("http://127.0.0.1:{}/v1", llm.port),
        "--openai-api-key",
        "x",
        "--model",
        "openai/gpt-fake",
        // The editblock format is the one that reads ```bash blocks as shell commands.
        "--edit-format",
        "diff",
        "--no-git",
        "--no-auto-commits",
        "--no-check-update",
        "--no-analytics",
        "--no-show-model-warnings",
        "--no-show-release-notes",
        "--no-fancy-input",
        "--no-pretty",
        "--no-detect-urls",
        "--message",
        PROMPT,
    ]);
    agents::offline(&mut cmd, world);
    cmd.stdin(Stdio::from(std::fs::File::open(&answers).unwrap()))
        .env("TERM", "dumb")
        .env("LANG", "C.UTF-8")
        .env("NO_PROXY", "*")
        .env("AIDER_CHECK_UPDATE", "false")
        .env("AIDER_ANALYTICS", "false");
    agents::run_within(cmd, RUN_LIMIT)
}

/// The audited `exec` decisions, as (decision, argv).
fn audited_execs(audit: &Path) -> Vec<(String, Vec<String>)> {
    agents::read_jsonl(audit)
        .iter()
        .filter(|r| r["payload"]["tool_name"] == "exec")
        .map(|r| {
            let argv = r["payload"]["arguments"]["command"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|s| s.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            (r["decision"].as_str().unwrap_or_default().to_owned(), argv)
        })
        .collect()
}

#[test]
#[cfg_attr(
    skip_e2e = "aider",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the aider setup"
)]
fn aider_is_stopped_from_deleting_outside_the_workspace_and_its_copy_runs() {
    let world = world();
    let victim = world.dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("precious"), "keep me").unwrap();
    let llm = fake_llm(
        &world,
        json!([reply(&[
            format!("rm -rf {}", victim.display()),
            "cp a.txt b.txt".into()
        ])]),
    );
    let audit = world.dir.path().join("audit.jsonl");
    let r = wrapped(
        &world,
        &llm,
        &[
            "--framework",
            "path",
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    );
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        llm.main_bodies().len() == 1,
        "aider did not ask the fake model once",
    );
    r.check(
        !r.stdout().contains("raw.githubusercontent.com"),
        "aider went to the internet for model metadata (its cache in HOME was not used)",
    );
    r.check(
        r.stdout()
            .contains(&format!("Running rm -rf {}", victim.display())),
        "aider did not try the rm (did it ask, and read the answer?)",
    );
    r.check(
        victim.join("precious").exists(),
        "the victim outside the workspace was deleted",
    );
    r.check(
        std::fs::read_to_string(world.ws().join("b.txt"))
            .ok()
            .as_deref()
            == Some("the original\n"),
        "the allowed cp did not run",
    );
    // aider shows a command's output (stdout and stderr together): the shim's refusal.
    r.check(
        r.stdout()
            .contains("ahp-wrap: rm: blocked: recursive deletion"),
        "aider's output does not carry the reason",
    );
    let execs = audited_execs(&audit);
    let rm = vec![
        "rm".to_owned(),
        "-rf".to_owned(),
        victim.display().to_string(),
    ];
    r.check(
        execs.iter().any(|(d, argv)| d == "block" && argv == &rm),
        &format!("no audited block of {rm:?}: {execs:?}"),
    );
    r.check(
        execs
            .iter()
            .any(|(d, argv)| d == "allow" && argv == &["cp", "a.txt", "b.txt"]),
        &format!("no audited allow of the cp: {execs:?}"),
    );
    let out = Command::new(ahp_wrap_testkit::wrap_bin())
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .unwrap();
    r.check(out.status.success(), "the audit log does not verify");
}

#[test]
#[cfg_attr(
    skip_e2e = "aider",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the aider setup"
)]
fn aider_found_by_name_gets_path_shims_and_the_harness_decides_with_the_ancestry() {
    let world = world();
    let llm = fake_llm(&world, json!([reply(&["cp a.txt b.txt".into()])]));
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "contains": "b.txt",
         "decision": {"decision": "block", "reason": "no copies today (rule 12)"}}
    ]}));
    // No --framework: `aider` is detected as generic, which has PATH shims by default.
    let r = wrapped(&world, &llm, &["--harness", &harness]);
    r.check(
        r.output.status.code() == Some(0),
        "the run should end normally",
    );
    r.check(
        r.stderr().contains("note: PATH shims ask about"),
        "the wrapper did not say the PATH shims are on",
    );
    r.check(
        !world.ws().join("b.txt").exists(),
        "the cp the harness blocked ran",
    );
    r.check(
        r.stdout()
            .contains("ahp-wrap: cp: blocked: no copies today (rule 12)"),
        "aider's output does not carry the harness's reason",
    );
    // aider also runs `git version` at start (GitPython, even with --no-git): allowed.
    let pre = world.harness_saw("pre_action");
    let cp: Vec<&Value> = pre
        .iter()
        .filter(|e| e["payload"]["tool_name"] == "exec")
        .filter(|e| e["payload"]["arguments"]["command"][0] == "cp")
        .collect();
    r.check(cp.len() == 1, &format!("one exec event of cp: {pre:?}"));
    let payload = &cp[0]["payload"];
    assert_eq!(
        payload["arguments"]["command"],
        json!(["cp", "a.txt", "b.txt"])
    );
    let ctx = &payload["context"];
    assert_eq!(
        ctx["working_directory"],
        world.ws().canonicalize().unwrap().display().to_string(),
        "{ctx}"
    );
    // `/bin/sh -c 'cp a.txt b.txt'` (aider's subprocess; a shell that execs its last
    // command leaves no entry), then aider's Python process, the agent, where it ends.
    let chain: Vec<String> = ctx["process_ancestry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["argv"].to_string())
        .collect();
    let (agent, shells) = chain.split_last().expect("an ancestry");
    assert!(
        agent.contains("aider") && agent.contains(PROMPT),
        "{chain:?}"
    );
    assert!(
        shells.iter().all(|a| a.contains("cp a.txt b.txt")),
        "{chain:?}"
    );
}
