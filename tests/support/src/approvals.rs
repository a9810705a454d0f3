//! What the approvals suites share: `ahp-wrap serve` with the approvals host on (a policy
//! whose one rule escalates, three client tokens), a wrapped command that asks it, and
//! the serve audit log.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use ahp::ahp_types::actions::{ChatToolCallConfirmedAction, StateAction};
use serde_json::Value;

/// May see and answer everything.
pub const ALICE: &str = "alice-secret-0123456789";
/// May only watch.
pub const BOB: &str = "bob-secret-0123456789ab";
/// Sees only sessions under a directory no test runs in.
pub const CAROL: &str = "carol-secret-0123456789";
/// The rule that escalates, and the reason it gives.
pub const RULE: &str = "marker-needs-a-person";
pub const REASON: &str = "creating an approval marker needs a person";

/// The answer to one pending confirmation `req` (an entry of a session's `inputNeeded`):
/// the chat to dispatch it to, and the action that approves or refuses it.
pub fn confirm(req: &Value, approved: bool) -> (String, StateAction) {
    let action = ChatToolCallConfirmedAction {
        turn_id: req["turnId"].as_str().unwrap().into(),
        tool_call_id: req["toolCall"]["toolCallId"].as_str().unwrap().into(),
        meta: None,
        approved,
        confirmed: None,
        reason: None,
        edited_tool_input: None,
        user_suggestion: None,
        reason_message: None,
        selected_option_id: None,
    };
    let chat = req["chat"].as_str().unwrap().to_owned();
    (chat, StateAction::ChatToolCallConfirmed(action))
}

/// Writes the policy (one escalating rule) and the token file into `dir`.
pub fn write_files(dir: &Path) -> (PathBuf, PathBuf) {
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n\n[[rule]]\nid = \"{RULE}\"\ndecision = \"escalate\"\n\
             reason = \"{REASON}\"\nmatch = [\"touch approval-marker\"]\n\
             command.args_any = [\"*approval-marker*\"]\n"
        ),
    )
    .unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        format!(
            "# test tokens\nalice={ALICE}\nbob={BOB}:view\ncarol={CAROL}:cwd=/nonexistent/team\n"
        ),
    )
    .unwrap();
    (policy, tokens)
}

/// `ahp-wrap serve --listen http://127.0.0.1:0` with the approvals host on.
pub struct Serve {
    child: Child,
    /// The page's address, `http://127.0.0.1:PORT`
    pub base: String,
    /// The AHP 2.4 harness endpoint wrappers use.
    harness: String,
    pub audit: PathBuf,
    log: Arc<Mutex<String>>,
}

impl Serve {
    /// Serve with the files of [`write_files`] in `dir`, an audit log there, and `extra`;
    /// harness and host on one HTTP address.
    pub fn start(dir: &Path, extra: &[&str]) -> Serve {
        Serve::start_on(dir, &["--listen", "http://127.0.0.1:0"], extra)
    }

    /// [`Serve::start`] with the harness on WebSocket and the host on its own address.
    pub fn start_ws(dir: &Path, extra: &[&str]) -> Serve {
        let listen = [
            "--listen",
            "ws://127.0.0.1:0",
            "--host-listen",
            "http://127.0.0.1:0",
        ];
        Serve::start_on(dir, &listen, extra)
    }

    fn start_on(dir: &Path, listen: &[&str], extra: &[&str]) -> Serve {
        let (policy, tokens) = write_files(dir);
        let audit = dir.join("serve-audit.jsonl");
        let mut child = Command::new(crate::wrap_bin())
            .arg("serve")
            .args(listen)
            .args(["--log", "info", "--policy"])
            .arg(&policy)
            .arg("--host-token-file")
            .arg(&tokens)
            .arg("--audit-log")
            .arg(&audit)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let (mut harness, mut page) = (None, None);
        for line in lines.by_ref() {
            let line = line.unwrap();
            log.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(a) = line.strip_prefix("ahp-wrap serve: approvals page on ") {
                page = Some(a.trim_end_matches('/').to_owned());
            }
            if let Some(a) = line.strip_prefix("ahp-wrap serve: listening on ") {
                harness = Some(a.to_owned());
                break;
            }
        }
        let harness =
            harness.unwrap_or_else(|| panic!("serve did not start:\n{}", log.lock().unwrap()));
        // Serve says where its page is, whichever listener it shares.
        let base = page.unwrap_or_else(|| {
            panic!(
                "serve did not say where its approvals page is:\n{}",
                log.lock().unwrap()
            )
        });
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Serve {
            child,
            base,
            harness,
            audit,
            log,
        }
    }

    pub fn harness(&self) -> String {
        self.harness.clone()
    }

    /// The Agent Host Protocol endpoint.
    pub fn host(&self) -> String {
        format!("{}/host", self.base.replacen("http://", "ws://", 1))
    }

    /// What serve said on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The serve audit log's records of decided pre_action events.
    pub fn decisions(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.audit).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["event_type"] == "pre_action")
            .collect()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ahp-wrap --harness <serve> --intercept touch -- sh -c 'touch approval-marker'` in
/// `ws`: the PATH shim asks serve, whose policy escalates. Started, not waited for.
pub fn wrapped_touch(serve: &Serve, ws: &Path) -> Child {
    wrapped(serve, ws, "touch approval-marker")
}

/// `ahp-wrap --harness <serve> --intercept touch -- sh -c <script>` in `ws`.
pub fn wrapped(serve: &Serve, ws: &Path, script: &str) -> Child {
    Command::new(crate::wrap_bin())
        .args(["--harness", &serve.harness(), "--timeout", "60000"])
        .args(["--intercept", "touch", "--summary", "never"])
        .args(["--", "sh", "-c", script])
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `ahp-wrap --host-listen http://127.0.0.1:0 … --intercept touch -- sh -c 'touch
/// approval-marker'` in `ws`, with the embedded policy of [`write_files`] and an audit log
/// in `dir`: the run's own gate publishes its session. Returns the run and its host's
/// WebSocket endpoint (read from what it says on stderr; the rest of stderr is returned by
/// the reader thread).
pub fn hosted_touch(dir: &Path, ws: &Path) -> (Child, String, std::thread::JoinHandle<String>) {
    let (policy, tokens) = write_files(dir);
    let mut child = Command::new(crate::wrap_bin())
        .args(["--host-listen", "http://127.0.0.1:0", "--timeout", "60000"])
        .arg("--host-token-file")
        .arg(&tokens)
        .arg("--policy")
        .arg(&policy)
        .arg("--audit-log")
        .arg(dir.join("run-audit.jsonl"))
        .args(["--intercept", "touch", "--summary", "never"])
        .args(["--", "sh", "-c", "touch approval-marker"])
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    let mut page = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push_str(&format!("{line}\n"));
        if let Some(rest) = line.strip_prefix("ahp-wrap: approvals page on ") {
            page = rest.split_whitespace().next().map(str::to_owned);
            break;
        }
    }
    let page = page.unwrap_or_else(|| panic!("the wrapper did not start its host:\n{said}"));
    let rest = std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            said.push_str(&format!("{line}\n"));
        }
        said
    });
    let host = format!("{}host", page.replacen("http://", "ws://", 1));
    (child, host, rest)
}
