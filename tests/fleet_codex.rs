//! HCP with a real agent CLI: an `ahp-wrap worker` wrapping the real Codex CLI (the pinned
//! version, driven by the scripted fake Responses API on 127.0.0.1) takes a task from a
//! private RabbitMQ broker. The run is supervised as on a terminal: Codex's hooks reach the
//! harness, a blocked command never runs (on disk), the model gets the reason, and the
//! caller sees the block as a `warning` event and Codex's answer as the result.

use ahp_wrap_testkit::codex as support;
use ahp_wrap_testkit::fleet;
use ahp_wrap_testkit::rabbitmq;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use support::{shell, FakeApi, World};

#[test]
#[cfg_attr(
    any(skip_e2e = "codex", skip_e2e = "rabbitmq"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the codex or rabbitmq setup"
)]
fn a_codex_worker_runs_a_task_under_supervision() {
    let broker = rabbitmq::shared();
    let world = World::new();
    let marker = world.ws().join("blocked-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([shell(&format!("touch {} && echo RAN", marker.display())), {"text": "All done."}]),
    );
    let harness = world.harness(json!({"rules": [
        {"event": "pre_action", "contains": "blocked-marker",
         "decision": {"decision": "block", "reason": "no markers today (rule 7)"}}
    ]}));
    let f = fleet::Fleet::new();
    let cap = f.capability(
        "codex",
        "name = \"codex\"\ndescription = \"Codex in a workspace\"\nrisk_ceiling = \"R3\"\n",
    );
    let w = codex_worker(&world, &api, &f, broker, &cap, &harness);

    let r = f.submit(
        broker,
        &[
            "--capability",
            "codex",
            "--intent",
            "please do the task",
            "--risk",
            "R3",
        ],
        Duration::from_secs(120),
    );
    r.check(r.code() == Some(0), "the task completes");
    let result = r.result();
    assert_eq!(result["status"], "complete", "{result}");
    assert!(
        result["summary"].as_str().unwrap().contains("All done."),
        "{result}"
    );
    assert!(!marker.exists(), "the blocked command ran");
    let outputs = api.tool_outputs();
    r.check(
        outputs.len() == 1 && outputs[0].contains("no markers today (rule 7)"),
        &format!("the model did not get the reason: {outputs:?}"),
    );
    // The model got the task's intent as its prompt.
    let first = api
        .main_bodies()
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string();
    assert!(first.contains("please do the task"), "{first}");
    // The caller saw the block, from Codex's own PreToolUse hook.
    let warnings: Vec<_> = r
        .events()
        .into_iter()
        .filter(|e| e["event"] == "warning")
        .collect();
    r.check(warnings.len() == 1, "one warning event");
    let ahp = &warnings[0]["ahp"];
    assert_eq!(ahp["event_type"], "pre_action", "{ahp}");
    assert_eq!(ahp["tool"], "Bash", "{ahp}");
    assert_eq!(ahp["reason"], "no markers today (rule 7)", "{ahp}");
    assert_eq!(
        world.hook_saw("pre_action", "PreToolUse").len(),
        1,
        "the harness heard Codex's hook"
    );
    drop(w);
}

/// `ahp-wrap worker --harness … -- codex exec … {task}`: the very command the Codex suite
/// runs (its arguments, environment and workspace), with `{task}` as the prompt.
fn codex_worker(
    world: &World,
    api: &FakeApi,
    f: &fleet::Fleet,
    broker: &rabbitmq::Broker,
    cap: &std::path::Path,
    harness: &str,
) -> fleet::Worker {
    let codex = world.command(api, None, &[], "{task}");
    let mut worker = Command::new(ahp_wrap_testkit::wrap_bin());
    worker
        .args([
            "worker",
            "--amqp",
            &broker.url(),
            "--capability",
            cap.to_str().unwrap(),
        ])
        .args(["--harness", harness, "--"])
        .arg(codex.get_program())
        .args(codex.get_args())
        .current_dir(codex.get_current_dir().unwrap())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    for (k, v) in codex.get_envs() {
        if let Some(v) = v {
            worker.env(k, v);
        }
    }
    worker.env("TMPDIR", f.dir.path());
    let log = f.path("worker.log");
    worker
        .env("AHP_WRAP_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap());
    let w = fleet::Worker {
        child: worker.spawn().unwrap(),
        log,
        tag: "codex".into(),
    };
    w.wait_log("consuming", Duration::from_secs(60));
    w
}
