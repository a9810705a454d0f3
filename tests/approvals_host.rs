//! The Agent Host Protocol host of `ahp-wrap serve`, driven by the `ahp`/`ahp-ws` crates'
//! client (Microsoft's Rust SDK) against a real wrapper whose PATH shim asks serve: sessions
//! are listed, an escalation is a pending tool confirmation, the first authorised answer
//! decides (what runs on disk says so), the deadline falls to the fail mode, tokens limit
//! what a client sees and may do, and the audit log records who answered from where.

use ahp_wrap_testkit::approvals;

use std::process::Child;
use std::time::Duration;

use ahp::ahp_types::actions::StateAction;
use ahp::ahp_types::state::SnapshotState;
use ahp::{Client, ClientConfig, ClientError, SubscriptionEvent};
use ahp_ws::WebSocketTransport;
use approvals::{confirm, Serve, ALICE, BOB, CAROL, REASON, RULE};
use serde_json::{json, Value};

const AUTH_REQUIRED: i32 = -32007;
const NOT_FOUND: i32 = -32008;

async fn client(serve: &Serve) -> Client {
    client_of(&serve.host()).await
}

async fn client_of(endpoint: &str) -> Client {
    let transport = WebSocketTransport::connect(endpoint).await.unwrap();
    let client = Client::connect(transport, ClientConfig::default())
        .await
        .unwrap();
    let init = client
        .initialize("approvals-test".into(), vec!["1.0.0".into()], vec![])
        .await
        .unwrap();
    assert_eq!(init.protocol_version, "1.0.0");
    client
}

async fn signed_in(serve: &Serve, token: &str) -> Client {
    let c = client(serve).await;
    authenticate(&c, token).await.unwrap();
    c
}

async fn authenticate(c: &Client, token: &str) -> Result<Value, ClientError> {
    let params =
        json!({"channel": "ahp-root://", "resource": "ahp-wrap:approvals", "token": token});
    c.request("authenticate", params).await
}

/// The error code of a request that must fail.
fn refused<T>(r: Result<T, ClientError>) -> i32 {
    match r {
        Ok(_) => panic!("the request was not refused"),
        Err(e) => code(e),
    }
}

fn code(e: ClientError) -> i32 {
    match e {
        ClientError::Rpc(e) => e.code,
        other => panic!("not an RPC error: {other}"),
    }
}

async fn sessions(c: &Client) -> Vec<Value> {
    let r: Value = c
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await
        .unwrap();
    r["items"].as_array().unwrap().clone()
}

/// Waits until `c` sees one session with a pending confirmation; returns the session's
/// summary and the pending request (as the session snapshot shows it).
async fn pending(c: &Client) -> (Value, Value) {
    for _ in 0..300 {
        if let Some(s) = sessions(c).await.into_iter().next() {
            let uri = s["resource"].as_str().unwrap().to_owned();
            let (sub, _events) = c.subscribe(uri.clone()).await.unwrap();
            let snap = sub.snapshot.unwrap();
            assert!(matches!(snap.state, SnapshotState::Session(_)), "{uri}");
            let state = serde_json::to_value(&snap.state).unwrap();
            if let Some(req) = state["inputNeeded"].as_array().and_then(|a| a.first()) {
                c.unsubscribe(uri).await.unwrap();
                return (s, req.clone());
            }
            c.unsubscribe(uri).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no pending confirmation appeared");
}

/// Carol's token does not reach this directory: she sees no session and cannot subscribe
/// to it; Bob may watch but his approval does nothing, and comes back to him refused (the
/// echo of his dispatch, with its `rejectionReason`).
async fn others_cannot_answer(
    carol: &Client,
    bob: &Client,
    summary: &Value,
    req: &Value,
    ws: &std::path::Path,
) {
    assert!(sessions(carol).await.is_empty());
    let hidden = carol
        .subscribe(summary["resource"].as_str().unwrap().into())
        .await;
    assert_eq!(refused(hidden), NOT_FOUND);
    assert_eq!(sessions(bob).await.len(), 1);
    let mut heard = bob.events();
    let (chat, yes) = confirm(req, true);
    let sent = bob.dispatch(chat, yes).await.unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match heard.recv().await.map(|e| e.event) {
                Some(SubscriptionEvent::Action(env)) if env.rejection_reason.is_some() => {
                    return env
                }
                Some(_) => continue,
                None => panic!("bob's client stopped"),
            }
        }
    })
    .await
    .expect("bob's refused answer was echoed to him");
    assert_eq!(refused.origin.unwrap().client_seq, sent.client_seq);
    assert!(
        refused.rejection_reason.unwrap().contains("may only watch"),
        "the echo does not say why"
    );
    let marker = ws.join("approval-marker");
    assert!(!marker.exists(), "a view-only token approved");
}

/// Waits for the wrapper, at most a minute.
async fn finished(mut child: Child) -> (std::process::ExitStatus, String) {
    tokio::task::spawn_blocking(move || {
        for _ in 0..600 {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(stderr) = child.stderr.as_mut() {
                    std::io::Read::read_to_string(stderr, &mut err).unwrap();
                }
                return (status, err);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        panic!("the wrapped command did not finish");
    })
    .await
    .unwrap()
}

fn workspace(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_or_wrongly_authenticated_clients_see_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), &[]);
    let c = client(&serve).await;
    let first = c.subscribe("ahp-root://".into()).await;
    assert_eq!(refused(first), AUTH_REQUIRED);
    let listed: Result<Value, _> = c
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await;
    assert_eq!(code(listed.unwrap_err()), AUTH_REQUIRED);
    let wrong = authenticate(&c, "alice-secret-0123456780")
        .await
        .unwrap_err();
    assert_eq!(code(wrong), AUTH_REQUIRED);
    let still = c.subscribe("ahp-root://".into()).await;
    assert_eq!(refused(still), AUTH_REQUIRED);
    authenticate(&c, ALICE).await.unwrap();
    let (root, _events) = c.subscribe("ahp-root://".into()).await.unwrap();
    let snap = root.snapshot.unwrap();
    assert!(matches!(snap.state, SnapshotState::Root(_)));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_authorised_answer_approves_and_the_audit_log_names_who() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir);
    let serve = Serve::start(dir.path(), &["--timeout", "60000"]);
    let alice = signed_in(&serve, ALICE).await;
    let bob = signed_in(&serve, BOB).await;
    let carol = signed_in(&serve, CAROL).await;
    let (root, mut root_events) = alice.subscribe("ahp-root://".into()).await.unwrap();
    assert!(root.snapshot.is_some());
    let wrapper = approvals::wrapped_touch(&serve, &ws);

    // Alice sees the session appear, and the escalation as a pending confirmation.
    let added = tokio::time::timeout(Duration::from_secs(30), root_events.recv())
        .await
        .expect("a session was announced");
    let Some(SubscriptionEvent::SessionAdded(added)) = added else {
        panic!("expected root/sessionAdded, got {added:?}");
    };
    let meta = serde_json::to_value(&added.summary.meta).unwrap();
    assert_eq!(meta["framework"], "generic");
    assert_eq!(
        meta["cwd"],
        ws.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(meta["depth"], 0);
    assert!(meta["agent"].as_str().unwrap().starts_with("generic-"));
    let (summary, req) = pending(&alice).await;
    assert_eq!(summary["resource"], added.summary.resource.as_str());
    assert_eq!(req["kind"], "toolConfirmation");
    assert_eq!(req["toolCall"]["status"], "pending-confirmation");
    assert!(req["toolCall"]["toolInput"]
        .as_str()
        .unwrap()
        .contains("approval-marker"));
    assert_eq!(req["toolCall"]["_meta"]["rule"], RULE);
    assert_eq!(req["toolCall"]["_meta"]["reason"], REASON);

    others_cannot_answer(&carol, &bob, &summary, &req, &ws).await;
    let (chat, yes) = confirm(&req, true);

    // Alice's answer is the first that counts; her later denial changes nothing.
    let (chat_sub, mut chat_events) = alice.subscribe(chat.clone()).await.unwrap();
    assert!(matches!(
        chat_sub.snapshot.unwrap().state,
        SnapshotState::Chat(_)
    ));
    alice.dispatch(chat.clone(), yes).await.unwrap();
    let (_, no) = confirm(&req, false);
    alice.dispatch(chat.clone(), no).await.unwrap();
    let (status, err) = finished(wrapper).await;
    assert!(
        status.success(),
        "the wrapped command failed: {status}\n{err}\n{}",
        serve.log()
    );
    assert!(
        ws.join("approval-marker").exists(),
        "the approved command did not run"
    );

    // The chat showed the decision as it happened.
    let mut confirmed = None;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(5), chat_events.recv()).await
    {
        if let SubscriptionEvent::Action(env) = ev {
            // Her later denial comes back to her alone as a refusal (with its
            // rejectionReason), which may arrive before the accepted answer's broadcast: it
            // is not the chat's state.
            if env.rejection_reason.is_some() {
                continue;
            }
            if let StateAction::ChatToolCallConfirmed(a) = env.action {
                confirmed = Some(a);
                break;
            }
        }
    }
    let confirmed = confirmed.expect("chat/toolCallConfirmed was pushed");
    assert!(confirmed.approved);

    let decided = serve.decisions();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["decision"], "allow");
    let source = decided[0]["source"].as_str().unwrap();
    assert!(source.starts_with("person:alice@127.0.0.1:"), "{source}");
    for c in [alice, bob, carol] {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_blocks_the_command_with_who_denied_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir);
    let serve = Serve::start(dir.path(), &["--timeout", "60000"]);
    let alice = signed_in(&serve, ALICE).await;
    let wrapper = approvals::wrapped_touch(&serve, &ws);
    let (_, req) = pending(&alice).await;
    let (chat, no) = confirm(&req, false);
    alice.dispatch(chat, no).await.unwrap();
    let (status, err) = finished(wrapper).await;
    assert!(!status.success(), "the denied command succeeded\n{err}");
    assert!(
        !ws.join("approval-marker").exists(),
        "the denied command ran"
    );
    assert!(
        err.contains("denied by alice"),
        "the reason did not reach the agent: {err}"
    );
    let decided = serve.decisions();
    assert_eq!(decided[0]["decision"], "block");
    assert!(decided[0]["source"]
        .as_str()
        .unwrap()
        .starts_with("person:alice@"));
    assert!(decided[0]["reason"].as_str().unwrap().contains(REASON));
    alice.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_before_the_deadline_falls_to_the_fail_mode() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir);
    let serve = Serve::start(
        dir.path(),
        &["--timeout", "60000", "--approval-timeout", "2"],
    );
    let alice = signed_in(&serve, ALICE).await;
    let wrapper = approvals::wrapped_touch(&serve, &ws);
    let (_, req) = pending(&alice).await;
    let (status, err) = finished(wrapper).await;
    assert!(!status.success());
    assert!(
        !ws.join("approval-marker").exists(),
        "an unanswered escalation ran"
    );
    assert!(err.contains("nobody answered"), "{err}");
    // Too late: the answer is refused and changes nothing.
    let (chat, yes) = confirm(&req, true);
    alice.dispatch(chat, yes).await.unwrap();
    let decided = serve.decisions();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["decision"], "block");
    assert_eq!(decided[0]["source"], "fail-mode");
    alice.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_wrapper_publishes_its_own_session_with_host_listen() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir);
    let (child, endpoint, stderr) = approvals::hosted_touch(dir.path(), &ws);
    let alice = client_of(&endpoint).await;
    let listed: Result<Value, _> = alice
        .request("listSessions", json!({"channel": "ahp-root://"}))
        .await;
    assert_eq!(refused(listed), AUTH_REQUIRED);
    authenticate(&alice, ALICE).await.unwrap();
    let (summary, req) = pending(&alice).await;
    assert_eq!(summary["_meta"]["framework"], "generic");
    assert_eq!(req["toolCall"]["_meta"]["rule"], RULE);
    let (chat, yes) = confirm(&req, true);
    alice.dispatch(chat, yes).await.unwrap();
    let (status, _) = finished(child).await;
    let said = stderr.join().unwrap();
    assert!(status.success(), "{status}\n{said}");
    assert!(
        ws.join("approval-marker").exists(),
        "the approved command did not run"
    );
    let audit = std::fs::read_to_string(dir.path().join("run-audit.jsonl")).unwrap();
    let decided: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event_type"] == "pre_action")
        .collect();
    assert_eq!(decided.len(), 1, "{audit}");
    assert_eq!(decided[0]["decision"], "allow");
    let source = decided[0]["source"].as_str().unwrap();
    assert!(source.starts_with("person:alice@127.0.0.1:"), "{source}");
    alice.shutdown().await;
}

/// A one-shot HTTP receiver on 127.0.0.1: its URL, and the body of the first POST.
fn webhook_receiver() -> (String, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        let _ = tx.send(String::from_utf8(body).unwrap());
    });
    (url, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_escalation_is_posted_to_the_webhook_with_a_link_to_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(&dir);
    let (url, posted) = webhook_receiver();
    let page = "https://approvals.example.test/";
    let extra = ["--timeout", "60000", "--approval-timeout", "1"];
    let hook = ["--notify-webhook", url.as_str(), "--public-url", page];
    let serve = Serve::start(dir.path(), &[&extra[..], &hook[..]].concat());
    let wrapper = approvals::wrapped_touch(&serve, &ws);
    let body = tokio::task::spawn_blocking(move || posted.recv_timeout(Duration::from_secs(30)))
        .await
        .unwrap()
        .expect("the webhook was posted");
    let body: Value = serde_json::from_str(&body).unwrap();
    let text = body["text"].as_str().unwrap();
    for part in ["approval-marker", REASON, RULE, page, "generic"] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    let (status, _) = finished(wrapper).await;
    assert!(!status.success(), "an unanswered escalation ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrappers_on_a_websocket_link_share_one_approvals_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start_ws(dir.path(), &["--timeout", "60000"]);
    assert!(serve.harness().starts_with("ws://"), "{}", serve.harness());
    let alice = signed_in(&serve, ALICE).await;
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    for ws in [&one, &two] {
        std::fs::create_dir_all(ws).unwrap();
    }
    // The first also runs an ordinary touch while its escalation waits: on the same link,
    // it is answered at once.
    let script = "touch approval-marker & sleep 0.5; touch free-file; wait";
    let first = approvals::wrapped(&serve, &one, script);
    let second = approvals::wrapped_touch(&serve, &two);
    // Both wait at once on the one serve.
    let mut waiting = Vec::new();
    for _ in 0..300 {
        waiting.clear();
        for s in sessions(&alice).await {
            let uri = s["resource"].as_str().unwrap().to_owned();
            let (sub, _events) = alice.subscribe(uri.clone()).await.unwrap();
            let state = serde_json::to_value(sub.snapshot.unwrap().state).unwrap();
            if let Some(req) = state["inputNeeded"].as_array().and_then(|a| a.first()) {
                waiting.push((s["_meta"]["cwd"].as_str().unwrap().to_owned(), req.clone()));
            }
            alice.unsubscribe(uri).await.unwrap();
        }
        if waiting.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(waiting.len(), 2, "{waiting:?}\n{}", serve.log());
    for _ in 0..100 {
        if one.join("free-file").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        one.join("free-file").exists(),
        "a pending escalation held up its link"
    );
    for (cwd, req) in &waiting {
        let approve = cwd.ends_with("/one");
        let (chat, action) = confirm(req, approve);
        alice.dispatch(chat, action).await.unwrap();
    }
    let (status, err) = finished(first).await;
    assert!(status.success(), "{status}\n{err}");
    let (status, _) = finished(second).await;
    assert!(!status.success());
    assert!(
        one.join("approval-marker").exists(),
        "the approved command did not run"
    );
    assert!(
        !two.join("approval-marker").exists(),
        "the denied command ran"
    );
    alice.shutdown().await;
}
