//! The approvals page in a real headless Chromium (tests/approvals/setup.sh installs it),
//! with the real Claude Code CLI (tests/claude-code/setup.sh) wrapped in a non-interactive
//! run against a scripted fake Anthropic API and `ahp-wrap serve` as its harness. The
//! policy escalates the model's command; the page shows it; a click decides. Proved on
//! disk (the marker the command creates) and by what the model receives. The page shows
//! no buttons to a token that may only watch, the deadline the wrapper keeps, and an
//! answer the host refused. Each test keeps a screenshot of the page under
//! target/tmp/approvals-page/ (the path is printed).

use ahp_wrap_testkit::approvals;
use ahp_wrap_testkit::browser;
use ahp_wrap_testkit::claude_code as support;

use std::path::PathBuf;
use std::time::Duration;

use approvals::{Serve, ALICE, BOB, REASON, RULE};
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

fn scene(approval_timeout: &str) -> Scene {
    scene_with(&["--timeout", "60000", "--approval-timeout", approval_timeout])
}

/// [`scene`] with serve started with `serve_args`.
fn scene_with(serve_args: &[&str]) -> Scene {
    browser::chromium();
    let world = World::new();
    let marker = world.ws().join("approval-marker");
    let api = FakeApi::start(
        world.dir.path(),
        "api",
        json!([bash(&format!("touch {} && echo RAN", marker.display())), {"text": "All done."}]),
    );
    let serve = Serve::start(world.dir.path(), serve_args);
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
        self.agent_with_timeout("60000")
    }

    /// [`Scene::agent`] with the wrapper's `--timeout MS`.
    fn agent_with_timeout(&self, ms: &str) -> std::thread::JoinHandle<support::Run> {
        let harness = self.serve.harness();
        let wrapper = ["--harness", harness.as_str(), "--timeout", ms];
        let claude = ["-p", "please do the task", "--allowedTools", "Bash"];
        let cmd = self.world.command(&self.api, Some(&wrapper), &claude);
        std::thread::spawn(move || support::run(cmd))
    }

    async fn page(&self) -> Browser {
        self.page_as(ALICE).await
    }

    async fn page_as(&self, token: &str) -> Browser {
        Browser::open(&format!("{}/#token={token}", self.serve.base)).await
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
#[cfg_attr(
    any(skip_e2e = "claude-code", skip_e2e = "approvals"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code or approvals setup"
)]
async fn approving_on_the_page_lets_the_command_run() {
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
#[cfg_attr(
    any(skip_e2e = "claude-code", skip_e2e = "approvals"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code or approvals setup"
)]
async fn denying_on_the_page_blocks_the_command_and_the_model_gets_the_reason() {
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
#[cfg_attr(
    any(skip_e2e = "claude-code", skip_e2e = "approvals"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code or approvals setup"
)]
async fn no_click_before_the_deadline_falls_to_the_fail_mode() {
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

/// The escalation's card: how many buttons it offers, what it says, how far away its
/// deadline is; and what the page's header says.
async fn the_card(page: &mut Browser) -> Value {
    page.eval(
        "(() => { const c = document.querySelector('#pending .card'); \
         const dt = [...c.querySelectorAll('dt')].find((d) => d.textContent === 'Deadline'); \
         return {buttons: c.querySelectorAll('button').length, text: c.textContent, \
         deadline_in_ms: Date.parse(dt.nextElementSibling.textContent) - Date.now(), \
         header: document.querySelector('header').textContent}; })()",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "claude-code", skip_e2e = "approvals"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code or approvals setup"
)]
async fn a_view_only_token_sees_the_escalation_without_buttons_and_the_deadline_decides() {
    let scene = scene("8");
    let mut page = scene.page_as(BOB).await;
    let agent = scene.agent();
    the_card_shows_the_escalation(&mut page, &scene, "view-only").await;
    let card = the_card(&mut page).await;
    assert_eq!(
        card["buttons"],
        json!(0),
        "a view-only token got buttons: {card}"
    );
    assert!(
        card["text"].as_str().unwrap().contains("View only"),
        "the card does not say why there are no buttons: {card}"
    );
    assert!(
        card["header"].as_str().unwrap().contains("bob · view only"),
        "{card}"
    );
    let run = finished(agent).await;
    run.check(!scene.marker.exists(), "an unanswered escalation ran");
    let result = result_text(&scene);
    run.check(
        result.contains("nobody answered"),
        &format!("the model did not get why: {result}"),
    );
    assert_eq!(audit_source(&scene), json!("fail-mode"));
    let none = "document.querySelectorAll('#pending .card').length === 0";
    page.wait_for(none, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "claude-code", skip_e2e = "approvals"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code or approvals setup"
)]
async fn the_card_shows_the_wrappers_deadline_and_serve_gives_up_there() {
    // Serve would wait five minutes for a person; the wrapper waits 20 s for the event.
    let scene = scene_with(&["--timeout", "600000", "--approval-timeout", "300"]);
    let mut page = scene.page().await;
    let agent = scene.agent_with_timeout("20000");
    the_card_shows_the_escalation(&mut page, &scene, "wrapper-deadline").await;
    let shown = std::time::Instant::now();
    let card = the_card(&mut page).await;
    let left = card["deadline_in_ms"].as_f64().unwrap();
    assert!(
        (14_000.0..=21_000.0).contains(&left),
        "the card's deadline is {left} ms away, not the wrapper's 20 s: {card}"
    );
    let run = finished(agent).await;
    run.check(
        shown.elapsed() < Duration::from_secs(25),
        "the run outlived the wrapper's deadline",
    );
    run.check(!scene.marker.exists(), "an unanswered escalation ran");
    // Serve's own answer (not the wrapper's timeout) reached the model: serve gave up in
    // time, and its audit log has the decision.
    let result = result_text(&scene);
    run.check(
        result.contains("nobody answered on the approvals host"),
        &format!("serve did not give up before the wrapper: {result}"),
    );
    assert_eq!(audit_source(&scene), json!("fail-mode"));
    let none = "document.querySelectorAll('#pending .card').length === 0";
    page.wait_for(none, Duration::from_secs(10)).await;
}

/// Holds what the host sends the page, as a slow link would; [`release`] delivers it.
async fn hold(page: &mut Browser) {
    let js = "window.held = []; window.handler = state.ws.onmessage; \
              state.ws.onmessage = (ev) => window.held.push(ev); true";
    assert_eq!(page.eval(js).await, json!(true));
}

async fn release(page: &mut Browser) {
    let js = "state.ws.onmessage = window.handler; \
              for (const ev of window.held) window.handler(ev); true";
    assert_eq!(page.eval(js).await, json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    any(skip_e2e = "claude-code", skip_e2e = "approvals"),
    ignore = "AHP_WRAP_SKIP_AGENT_E2E skips the claude-code or approvals setup"
)]
async fn an_answer_the_host_refuses_is_shown_on_the_card() {
    let scene = scene("45");
    let mut first = scene.page().await;
    let mut late = scene.page().await;
    let agent = scene.agent();
    the_card_shows_the_escalation(&mut first, &scene, "first-page").await;
    the_card_shows_the_escalation(&mut late, &scene, "late-page").await;
    // The late page hears nothing for a while: it still offers the escalation after the
    // first page's answer was taken, and its own answer comes too late.
    hold(&mut late).await;
    click(&mut first, "approve").await;
    let none = "document.querySelectorAll('#pending .card').length === 0";
    first.wait_for(none, Duration::from_secs(10)).await;
    click(&mut late, "approve").await;
    release(&mut late).await;
    let refused = "[...document.querySelectorAll('#pending .card .refused')]\
                   .some((e) => e.textContent.includes('answered already'))";
    late.wait_for(refused, Duration::from_secs(10)).await;
    late.screenshot(&screenshot_path("refused")).await;
    let card = the_card(&mut late).await;
    assert!(
        !card["text"]
            .as_str()
            .unwrap()
            .contains("waiting for the agent"),
        "{card}"
    );
    let run = finished(agent).await;
    run.check(
        run.output.status.code() == Some(0),
        "the run should end normally",
    );
    run.check(scene.marker.exists(), "the approved command did not run");
    let source = audit_source(&scene);
    assert!(
        source.as_str().unwrap().starts_with("person:alice@"),
        "{source}"
    );
}
