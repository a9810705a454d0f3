//! The approvals page in a real headless Chromium (tests/approvals/setup.sh installs it),
//! with the real Claude Code CLI (tests/claude-code/setup.sh) wrapped in a non-interactive
//! run against a scripted fake Anthropic API and `ahp-wrap serve` as its harness. The
//! policy escalates the model's command; the page shows it; a click decides. Proved on
//! disk (the marker the command creates) and by what the model receives. Each test keeps
//! a screenshot of the page under target/tmp/approvals-page/ (the path is printed).

#[path = "support/agents.rs"]
#[allow(dead_code)] // what every agent suite shares; each uses a part
mod agents;
#[path = "support/approvals.rs"]
#[allow(dead_code)]
mod approvals;
#[path = "support/browser.rs"]
mod browser;
#[path = "support/claude_code.rs"]
#[allow(dead_code)]
mod support;

use std::path::PathBuf;
use std::time::Duration;

use approvals::{Serve, ALICE, REASON, RULE};
use browser::Browser;
use serde_json::{json, Value};
use support::{bash, FakeApi, World};

/// One scene: a workspace, the fake model (one Bash call that creates the marker, then
/// text), serve with the approvals host, the page signed in as alice.
struct Scene {
    world: World,
    api: FakeApi,
    serve: Serve,
    marker: PathBuf,
}

fn skipped() -> bool {
    agents::skip("claude-code") || agents::skip("approvals")
}

fn scene(approval_timeout: &str) -> Scene {
    browser::chromium();
    let world = World::new();
    let marker = world.ws().join("approval-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {} && echo RAN", marker.display())), {"text": "All done."}]),
    );
    let serve = Serve::start(
        world.dir.path(),
        &["--timeout", "60000", "--approval-timeout", approval_timeout],
    );
    Scene {
        world,
        api,
        serve,
        marker,
    }
}

impl Scene {
    /// `ahp-wrap --harness <serve> -- claude -p … --allowedTools Bash`, on a thread.
    fn agent(&self) -> std::thread::JoinHandle<support::Run> {
        let harness = self.serve.harness();
        let wrapper = ["--harness", harness.as_str(), "--timeout", "60000"];
        let claude = ["-p", "please do the task", "--allowedTools", "Bash"];
        let cmd = self.world.command(&self.api, Some(&wrapper), &claude);
        std::thread::spawn(move || support::run(cmd))
    }

    async fn page(&self) -> Browser {
        Browser::open(&format!("{}/#token={ALICE}", self.serve.base)).await
    }
}

async fn finished(agent: std::thread::JoinHandle<support::Run>) -> support::Run {
    tokio::task::spawn_blocking(move || agent.join().unwrap())
        .await
        .unwrap()
}

fn screenshot_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("approvals-page")
        .join(format!("{name}.png"))
}

/// Waits for the escalation's card and checks what it shows; keeps a screenshot.
async fn the_card_shows_the_escalation(page: &mut Browser, scene: &Scene, name: &str) {
    let one = "document.querySelectorAll('#pending .card').length === 1";
    page.wait_for(one, Duration::from_secs(45)).await;
    let card = page
        .eval(
            "(() => { const c = document.querySelector('#pending .card'); const t = (s) => c.querySelector(s).textContent; \
             return {command: t('.command'), reason: t('.reason'), rule: t('.rule'), agent: t('.agent'), cwd: t('.cwd'), \
             sessions: document.querySelectorAll('#sessions tbody tr').length}; })()",
        )
        .await;
    let text = |k: &str| card[k].as_str().unwrap_or_default().to_owned();
    assert!(text("command").contains("approval-marker"), "{card}");
    assert_eq!(text("reason"), REASON, "{card}");
    assert_eq!(text("rule"), RULE, "{card}");
    assert!(text("agent").starts_with("claude-code"), "{card}");
    let ws = scene.world.ws().canonicalize().unwrap();
    assert_eq!(text("cwd"), ws.display().to_string(), "{card}");
    assert_eq!(card["sessions"], json!(1), "{card}");
    page.screenshot(&screenshot_path(name)).await;
}

async fn click(page: &mut Browser, button: &str) {
    let js = format!("document.querySelector('#pending .card button.{button}').click(); true");
    assert_eq!(page.eval(&js).await, json!(true));
}

fn result_text(scene: &Scene) -> String {
    let results = scene.api.tool_results();
    assert_eq!(
        results.len(),
        1,
        "one tool result should reach the model: {results:?}"
    );
    results[0].to_string()
}

fn audit_source(scene: &Scene) -> Value {
    let decided = scene.serve.decisions();
    assert_eq!(decided.len(), 1, "{decided:?}");
    decided[0]["source"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_on_the_page_lets_the_command_run() {
    if skipped() {
        return;
    }
    let scene = scene("45");
    let mut page = scene.page().await;
    let agent = scene.agent();
    the_card_shows_the_escalation(&mut page, &scene, "pending").await;
    click(&mut page, "approve").await;
    let run = finished(agent).await;
    run.check(
        run.output.status.code() == Some(0),
        "the run should end normally",
    );
    run.check(scene.marker.exists(), "the approved command did not run");
    run.check(
        result_text(&scene).contains("RAN"),
        "the command's output did not reach the model",
    );
    let none = "document.querySelectorAll('#pending .card').length === 0";
    page.wait_for(none, Duration::from_secs(10)).await;
    page.screenshot(&screenshot_path("approved")).await;
    let source = audit_source(&scene);
    assert!(
        source
            .as_str()
            .unwrap()
            .starts_with("person:alice@127.0.0.1:"),
        "{source}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denying_on_the_page_blocks_the_command_and_the_model_gets_the_reason() {
    if skipped() {
        return;
    }
    let scene = scene("45");
    let mut page = scene.page().await;
    let agent = scene.agent();
    the_card_shows_the_escalation(&mut page, &scene, "before-deny").await;
    click(&mut page, "deny").await;
    let run = finished(agent).await;
    run.check(
        run.output.status.code() == Some(0),
        "the run should end normally",
    );
    run.check(!scene.marker.exists(), "the denied command ran");
    let result = result_text(&scene);
    run.check(
        result.contains("denied by alice"),
        &format!("the model did not get who denied it: {result}"),
    );
    run.check(
        result.contains(REASON),
        &format!("the model did not get the reason: {result}"),
    );
    run.check(!result.contains("RAN"), "the command's output leaked");
    let source = audit_source(&scene);
    assert!(
        source.as_str().unwrap().starts_with("person:alice@"),
        "{source}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_click_before_the_deadline_falls_to_the_fail_mode() {
    if skipped() {
        return;
    }
    let scene = scene("8");
    let mut page = scene.page().await;
    let agent = scene.agent();
    the_card_shows_the_escalation(&mut page, &scene, "unanswered").await;
    let run = finished(agent).await;
    run.check(!scene.marker.exists(), "an unanswered escalation ran");
    let result = result_text(&scene);
    run.check(
        result.contains("nobody answered"),
        &format!("the model did not get why: {result}"),
    );
    run.check(
        result.contains("fail mode: closed"),
        &format!("no fail mode in: {result}"),
    );
    let none = "document.querySelectorAll('#pending .card').length === 0";
    page.wait_for(none, Duration::from_secs(10)).await;
    assert_eq!(audit_source(&scene), json!("fail-mode"));
}
