//! The GitHub Actions workflow of `examples/github-actions/agent.yml`, its steps run
//! locally as a runner would run them, around the real Claude Code CLI (installed by
//! tests/claude-code/setup.sh) and a scripted fake model. tests/examples.rs runs the other
//! examples and checks that each has a test.

use ahp_wrap_testkit::agents;
use ahp_wrap_testkit::claude_code as support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use ahp_wrap_testkit::wrap_bin;

/// One step of a workflow job, as the runner reads it.
#[derive(Debug, serde::Deserialize)]
struct Step {
    name: Option<String>,
    id: Option<String>,
    uses: Option<String>,
    run: Option<String>,
    #[serde(rename = "if")]
    condition: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    with: BTreeMap<String, serde_norway::Value>,
}

/// `${{ … }}` expressions replaced, as the runner would; one this test does not know fails.
fn expand(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        let expr = rest[start + 3..end].trim();
        let value = values
            .get(expr)
            .unwrap_or_else(|| panic!("an expression this test does not provide: {expr}"));
        out.push_str(value);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The workflow's steps run as a runner runs them, on this machine: `run` steps by
/// `bash -e`, in the workspace, with the runner's variables; `uses` steps are what the runner
/// brings (a checkout, Node) and are skipped, except the artifact upload, whose file must
/// exist; the `install` step is replaced by this build and the pinned Claude Code on PATH.
/// The fake model asks to push (the CI policy refuses) and then writes the fix.
#[test]
#[cfg_attr(
    skip_e2e = "claude-code",
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code setup"
)]
fn the_github_actions_workflow_runs_its_steps_locally() {
    let text = std::fs::read_to_string(root().join("examples/github-actions/agent.yml")).unwrap();
    let workflow: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    let steps: Vec<Step> =
        serde_norway::from_value(workflow["jobs"]["agent"]["steps"].clone()).unwrap();
    let task_default = workflow["on"]["workflow_dispatch"]["inputs"]["task"]["default"]
        .as_str()
        .unwrap()
        .to_owned();

    let world = support::World::new();
    let ws = world.ws();
    // The repository the job checked out, with a remote a push would reach.
    let remote = world.dir.path().join("remote.git");
    let git = |args: &[&str], dir: &Path| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", world.dir.path().join("home"))
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", agents::show(&out));
    };
    git(
        &["init", "-q", "--bare", remote.to_str().unwrap()],
        world.dir.path(),
    );
    git(&["init", "-q", "-b", "main"], &ws);
    std::fs::write(ws.join("README.md"), "a project\n").unwrap();
    git(&["add", "."], &ws);
    git(
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "start",
        ],
        &ws,
    );
    git(&["remote", "add", "origin", remote.to_str().unwrap()], &ws);
    // The second checkout: ahp-wrap itself, at .ahp-wrap.
    std::os::unix::fs::symlink(root(), ws.join(".ahp-wrap")).unwrap();
    // What the install step puts on PATH.
    let bin = world.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(wrap_bin(), bin.join("ahp-wrap")).unwrap();
    std::os::unix::fs::symlink(support::claude_bin(), bin.join("claude")).unwrap();
    // The runners' passwordless sudo (the suite runs as root).
    std::fs::write(bin.join("sudo"), "#!/bin/sh\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(
        bin.join("sudo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();

    let api = support::FakeApi::start(
        world.dir.path(),
        "api",
        json!([
            support::bash("git push origin HEAD:main"),
            support::bash("echo fixed > FIXED && echo WROTE"),
            {"text": "Done: the test passes."},
        ]),
    );
    let runner_temp = world.dir.path().join("runner-temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    let summary = world.dir.path().join("step-summary.md");
    let artifacts = world.dir.path().join("artifacts");
    let values: BTreeMap<&str, String> = [
        ("secrets.ANTHROPIC_API_KEY", "dummy".to_owned()),
        ("inputs.task", task_default),
        ("runner.temp", runner_temp.display().to_string()),
    ]
    .into_iter()
    .collect();

    let mut failed = false;
    let mut ran = Vec::new();
    for step in &steps {
        let label = step
            .name
            .clone()
            .or_else(|| step.uses.clone())
            .unwrap_or_default();
        let always = step.condition.as_deref() == Some("always()");
        if failed && !always {
            continue;
        }
        if step.id.as_deref() == Some("install") {
            assert!(step
                .run
                .as_deref()
                .unwrap()
                .contains(".ahp-wrap/install.sh"));
            continue;
        }
        if let Some(uses) = &step.uses {
            if uses.starts_with("actions/upload-artifact@") {
                let path = expand(step.with["path"].as_str().unwrap(), &values);
                std::fs::create_dir_all(&artifacts).unwrap();
                std::fs::copy(&path, artifacts.join("ahp-audit.jsonl"))
                    .unwrap_or_else(|e| panic!("{label}: the artifact {path}: {e}"));
            }
            continue;
        }
        let script = expand(step.run.as_deref().unwrap(), &values);
        let mut cmd = Command::new("bash");
        cmd.arg("-e").arg("-c").arg(&script);
        agents::offline(&mut cmd, &world);
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path)
            .env("CI", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_WORKSPACE", &ws)
            .env("RUNNER_TEMP", &runner_temp)
            .env("CLAUDE_CONFIG_DIR", world.config_dir())
            .env(
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", api.port),
            )
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1");
        for (k, v) in &step.env {
            cmd.env(k, expand(v, &values));
        }
        let out = support::run(cmd);
        let code = out.output.status.code();
        ran.push((label.clone(), code, out.to_string()));
        if code != Some(0) {
            failed = true;
        }
    }
    let codes: Vec<_> = ran.iter().map(|(l, c, _)| (l.as_str(), *c)).collect();
    assert_eq!(
        codes,
        [
            (
                "Let ahp-wrap make user namespaces (Ubuntu's AppArmor restriction)",
                Some(0)
            ),
            ("Run the agent under ahp-wrap", Some(0)),
            ("Check the audit log", Some(0)),
        ],
        "{ran:#?}"
    );
    // The set-up step ran `ahp-wrap setup apparmor` (this kernel has no restriction: it
    // says so and writes nothing), and the agent ran with the whole floor required.
    let setup = &ran[0].2;
    assert!(
        setup.contains("apparmor: not needed here")
            || setup.contains("apparmor: installed and loaded"),
        "{setup}"
    );
    let agent_step = steps
        .iter()
        .find(|s| s.name.as_deref() == Some("Run the agent under ahp-wrap"))
        .unwrap();
    assert!(agent_step
        .run
        .as_deref()
        .unwrap()
        .contains("--require-floor"));
    // The push was refused and never happened; the fix was written.
    let refs = Command::new("git")
        .args(["for-each-ref"])
        .current_dir(&remote)
        .output()
        .unwrap();
    assert!(refs.stdout.is_empty(), "the remote got a push");
    assert_eq!(
        std::fs::read_to_string(ws.join("FIXED")).unwrap(),
        "fixed\n"
    );
    let results = api.tool_results().to_vec();
    assert!(
        results[0].to_string().contains("this CI job does not push"),
        "the model was told why: {results:?}"
    );
    // The job summary has the run's summary, the refusal in it.
    let md = std::fs::read_to_string(&summary).expect("the job summary was written");
    assert!(md.contains("ci-no-push"), "{md}");
    // The artifact is the run's audit log, intact.
    let kept = artifacts.join("ahp-audit.jsonl");
    let out = Command::new(wrap_bin())
        .args(["audit", "verify"])
        .arg(&kept)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", agents::show(&out));
    let records = agents::read_jsonl(&kept);
    assert!(
        records.iter().any(|r| r["decision"] == "block"),
        "{records:?}"
    );
}
