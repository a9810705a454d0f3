//! The parent side of PATH shims: an `exec` request becomes a `pre_action` (tool `exec`,
//! the argv as the command, the caller's working directory, the watched environment that
//! changed, the process ancestry up to the agent), decided by the gate; the answer runs the
//! command, runs the changed command, or refuses with the reason.

use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::exec::{decode_items, encode_argv, EXIT_REFUSED};
use crate::child::procfs;
use crate::control::{CallerReply, Request};
use crate::gate::Gate;
use crate::protocol::{EventType, Final, ToolCall};

/// Answers `exec` requests for one run.
pub(crate) struct ExecService {
    gate: Arc<Gate>,
    /// The watched variables as the agent started with them (name, value if set).
    started: Mutex<Vec<(String, Option<String>)>>,
    /// The agent's pid, for the ancestry (0 until it runs).
    agent: std::sync::atomic::AtomicI32,
    /// Requests answered so far.
    answered: AtomicU64,
}

/// One decoded request.
struct Exec {
    argv: Vec<String>,
    /// Watched variables whose value differs from the agent's start.
    changed: Map<String, Value>,
}

impl ExecService {
    /// Decides through `gate`; the agent's start environment and pid come later
    /// (`started_with`, `agent_is`).
    pub(crate) fn new(gate: Arc<Gate>) -> ExecService {
        ExecService {
            gate,
            started: Mutex::default(),
            agent: Default::default(),
            answered: AtomicU64::new(0),
        }
    }

    /// Records the watched variables as the agent starts with them.
    pub(crate) fn started_with(&self, env: Vec<(String, Option<String>)>) {
        if let Ok(mut started) = self.started.lock() {
            *started = env;
        }
    }

    /// Records the agent's pid, where ancestries end.
    pub(crate) fn agent_is(&self, pid: i32) {
        self.agent.store(pid, Ordering::SeqCst);
    }

    /// How many commands were asked about.
    pub(crate) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Answers one `exec` request.
    pub(crate) async fn handle(&self, request: Request) -> CallerReply {
        self.answered.fetch_add(1, Ordering::Relaxed);
        let origin = crate::intercept::origin(request.peer, None);
        let exec = match self.decode(&request.payload) {
            Ok(e) => e,
            Err(why) => {
                let cause = format!("the PATH shim for {} sent {why}", request.name);
                return refused(&request.name, &self.gate.fail(cause).verdict);
            }
        };
        let payload = self.payload(&exec, &request);
        let mut metadata = Map::new();
        metadata.insert("interceptor".into(), "pathshim".into());
        let event = self.gate.event(EventType::PreAction, payload, metadata);
        let decision = self.gate.decide(&event, false, origin).await;
        answer(&request.name, &exec.argv, &decision.verdict)
    }

    /// Decodes the payload: the argv count, the argv, then the watched environment.
    fn decode(&self, payload: &[u8]) -> Result<Exec, String> {
        let items = decode_items(payload).ok_or("a payload that is not NUL-terminated")?;
        let (count, rest) = items.split_first().ok_or("an empty payload")?;
        let argc: usize = count
            .to_str()
            .and_then(|c| c.parse().ok())
            .ok_or("a payload without an argv count")?;
        if argc == 0 || argc > rest.len() {
            return Err(format!("an argv count ({argc}) the payload does not hold"));
        }
        let lossy = |s: &std::ffi::OsString| String::from_utf8_lossy(s.as_bytes()).into_owned();
        let argv = rest[..argc].iter().map(lossy).collect();
        let now: Vec<String> = rest[argc..].iter().map(lossy).collect();
        Ok(Exec {
            argv,
            changed: self.changed(&now),
        })
    }

    /// The watched variables whose value differs from the agent's start (`null`: unset).
    fn changed(&self, now: &[String]) -> Map<String, Value> {
        let started = self.started.lock().map(|s| s.clone()).unwrap_or_default();
        let mut changed = Map::new();
        for item in now {
            let (name, value) = match item.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (item.as_str(), None),
            };
            let before = started
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_deref());
            if before.is_some_and(|b| b != value) {
                changed.insert(name.to_owned(), value.map_or(Value::Null, Value::from));
            }
        }
        changed
    }

    /// The `pre_action` payload: tool `exec`, the argv as the command (argv form), where it
    /// runs and from which processes.
    fn payload(&self, exec: &Exec, request: &Request) -> Value {
        let cwd = request.cwd.display().to_string();
        // From the shim process's parent: the shim's own argv is the command.
        let me = std::process::id() as i32;
        let parent = request
            .peer
            .parent
            .or_else(|| procfs::stat(request.peer.pid).map(|st| st.ppid))
            .unwrap_or(me);
        let ancestry: Vec<Value> = procfs::ancestry(parent, self.agent.load(Ordering::SeqCst), me)
            .into_iter()
            .map(|(pid, argv)| json!({"pid": pid, "argv": argv}))
            .collect();
        let mut context = json!({
            "working_directory": cwd,
            "interceptor": "pathshim",
            "process_ancestry": ancestry,
        });
        if !exec.changed.is_empty() {
            context["env_changed"] = Value::Object(exec.changed.clone());
        }
        let arguments = json!({"command": exec.argv, "cwd": cwd});
        ToolCall::new("exec", arguments, context).into_payload()
    }
}

/// What the shim does with a verdict: run the command as asked (empty answer), run the
/// changed command, or refuse.
fn answer(name: &str, argv: &[String], verdict: &Final) -> CallerReply {
    match verdict {
        Final::Allow {
            modified_payload: Some(changed),
            ..
        }
        | Final::Modify {
            modified_payload: changed,
        } => match changed_argv(changed) {
            Some(new) if new != argv => CallerReply {
                stdout: encode_argv(&new),
                ..CallerReply::default()
            },
            Some(_) => CallerReply::default(),
            None => refused(
                name,
                &Final::Block {
                    reason: "the harness changed the command into something that is not one".into(),
                },
            ),
        },
        Final::Allow { .. } => CallerReply::default(),
        other => refused(name, other),
    }
}

/// The command in a changed payload: an argv, or a shell command line (run by `sh -c`).
fn changed_argv(payload: &Value) -> Option<Vec<String>> {
    match payload.pointer("/arguments/command")? {
        Value::Array(items) => {
            let argv: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            argv.filter(|a| !a.is_empty())
        }
        Value::String(line) => Some(vec!["sh".into(), "-c".into(), line.clone()]),
        _ => None,
    }
}

/// A refusal: the reason on stderr, exit 126.
fn refused(name: &str, verdict: &Final) -> CallerReply {
    let reason = verdict.reason().unwrap_or("refused by the harness");
    CallerReply {
        stdout: Vec::new(),
        stderr: format!("ahp-wrap: {name}: blocked: {reason}\n").into_bytes(),
        exit_code: EXIT_REFUSED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intercept::pathshim::exec::encode;

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_verdict_becomes_run_change_or_refuse() {
        let asked = argv(&["rm", "-rf", "x"]);
        let run = answer("rm", &asked, &Final::no_opinion());
        assert_eq!((run.exit_code, run.stdout.len()), (0, 0));
        let blocked = answer(
            "rm",
            &asked,
            &Final::Block {
                reason: "no".into(),
            },
        );
        assert_eq!(blocked.exit_code, EXIT_REFUSED);
        assert_eq!(blocked.stderr, b"ahp-wrap: rm: blocked: no\n");
        let changed = Final::Modify {
            modified_payload: json!({"arguments": {"command": ["rm", "x"]}}),
        };
        let c = answer("rm", &asked, &changed);
        assert_eq!((c.exit_code, c.stdout.as_slice()), (0, &b"rm\0x\0"[..]));
        let line = Final::Modify {
            modified_payload: json!({"arguments": {"command": "echo hi"}}),
        };
        assert_eq!(answer("rm", &asked, &line).stdout, b"sh\0-c\0echo hi\0");
        let junk = Final::Modify {
            modified_payload: json!({"arguments": {"command": 42}}),
        };
        assert_eq!(answer("rm", &asked, &junk).exit_code, EXIT_REFUSED);
        let empty = Final::Modify {
            modified_payload: json!({"arguments": {"command": []}}),
        };
        assert_eq!(answer("rm", &asked, &empty).exit_code, EXIT_REFUSED);
    }

    #[test]
    fn the_payload_round_trips_and_junk_is_refused() {
        let gate = Arc::new(crate::gate::Gate::new(
            "s".into(),
            "a".into(),
            0,
            crate::gate::Decider {
                harness: crate::gate::Harness::Embedded(Arc::new(crate::gate::Embedded::new(
                    crate::policy::Policy::default_policy(),
                    crate::gate::Mode::Enforce,
                ))),
                fail_mode: crate::gate::FailMode::Closed,
                timeout: std::time::Duration::from_secs(1),
                approver: None,
            },
            crate::audit::Auditor::default(),
        ));
        let service = ExecService::new(gate);
        service.started_with(vec![
            ("GIT_DIR".into(), None),
            ("HOME".into(), Some("/h".into())),
        ]);
        let raw = encode(&["git".into(), "".into(), "a b".into()]);
        let exec = service.decode(&raw).unwrap();
        assert_eq!(exec.argv, ["git", "", "a b"]);
        // What this test process has differs from the recorded start only where it does.
        let home = std::env::var("HOME").ok();
        assert_eq!(
            exec.changed.contains_key("HOME"),
            home.as_deref() != Some("/h")
        );
        assert_eq!(
            exec.changed.contains_key("GIT_DIR"),
            std::env::var_os("GIT_DIR").is_some()
        );
        for junk in [&b""[..], b"2\0rm\0", b"x\0rm\0", b"0\0", b"no terminator"] {
            assert!(service.decode(junk).is_err(), "{junk:?}");
        }
    }
}
