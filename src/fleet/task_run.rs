//! One task's run: `ahp-wrap [run options] --audit-log LOG -- <agent>` started as a child
//! (so the run is supervised exactly as on a terminal: hooks, policy, audit, guardian),
//! the new lines of its audit log read as they are written, a stop (SIGTERM to the run,
//! which forwards it to the agent, then SIGKILL, after which the run's guardian ends the
//! agent's tree), and what the task produced: exit code, the end of its output, and the
//! JSON it may write to `$HCP_OUTPUT_FILE`.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::message::Task;

/// The placeholder in the agent's arguments replaced by the task's intent.
pub(crate) const PLACEHOLDER: &str = "{task}";
/// How much of the agent's stdout (and stderr) is kept for the result's summary.
const KEEP_OUTPUT: usize = 16 * 1024;
/// The longest summary sent, in characters.
const SUMMARY_CHARS: usize = 4000;
/// The largest `$HCP_OUTPUT_FILE` read.
const MAX_OUTPUT_FILE: u64 = 1024 * 1024;
/// How long output still arriving after the run's exit is waited for.
const DRAIN: Duration = Duration::from_secs(2);

/// How every task's run is started.
#[derive(Debug, Clone)]
pub(crate) struct Launcher {
    /// Our own executable.
    pub exe: PathBuf,
    /// Run options passed through to each run (`--harness`, `--policy`, …).
    pub wrap_args: Vec<OsString>,
    /// The agent's command; [`PLACEHOLDER`] in an argument is replaced by the intent, and
    /// without one the intent is the agent's stdin.
    pub agent: Vec<OsString>,
    /// The audit log every run appends to (one at a time: prefetch is one).
    pub audit_log: PathBuf,
    /// Where `$HCP_OUTPUT_FILE`s are made.
    pub work_dir: PathBuf,
    /// Between SIGTERM and SIGKILL when a run is stopped.
    pub grace: Duration,
}

/// A task's run in progress.
pub(crate) struct Running {
    child: Child,
    audit_log: PathBuf,
    offset: u64,
    pending: Vec<u8>,
    output_file: PathBuf,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
}

/// What a finished run left.
#[derive(Debug)]
pub(crate) struct Finished {
    /// How the child `ahp-wrap` run exited.
    pub status: std::process::ExitStatus,
    /// The last 16 KiB of the run's stdout (the agent's), read until 2 s after the exit.
    pub stdout: Vec<u8>,
    /// The last 16 KiB of the run's stderr, the summary when a failed run printed nothing.
    pub stderr: Vec<u8>,
    /// The output file's JSON; `Err` says why it is unusable; `None`: none was written.
    pub output: Option<Result<serde_json::Value, String>>,
}

impl Launcher {
    /// Why `task`'s intent cannot be given to this agent, if it cannot: an intent that
    /// would be a whole argument must not be read as an option (`--yolo`), and no
    /// argument can hold a NUL byte.
    pub(crate) fn refuses(&self, task: &Task) -> Option<String> {
        if task.intent.contains('\0') {
            return Some("the intent contains a NUL byte".into());
        }
        let whole = self.agent.iter().any(|a| a == PLACEHOLDER);
        if whole && task.intent.starts_with('-') {
            return Some(
                "the intent starts with '-' and would reach the agent as an option".into(),
            );
        }
        None
    }

    /// The agent's arguments for `task`, and whether the intent goes to stdin instead.
    fn agent_args(&self, task: &Task) -> (Vec<OsString>, bool) {
        let mut placed = false;
        let args = self
            .agent
            .iter()
            .map(|a| match a.to_str() {
                Some(s) if s.contains(PLACEHOLDER) => {
                    placed = true;
                    OsString::from(s.replace(PLACEHOLDER, &task.intent))
                }
                _ => a.clone(),
            })
            .collect();
        (args, !placed)
    }

    /// Starts the run of `task`.
    pub(crate) fn start(&self, task: &Task) -> std::io::Result<Running> {
        let offset = std::fs::metadata(&self.audit_log).map_or(0, |m| m.len());
        let output_file = self.work_dir.join(format!("output-{}.json", task.task_id));
        let _ = std::fs::remove_file(&output_file);
        let (agent, on_stdin) = self.agent_args(task);
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.wrap_args)
            .arg("--audit-log")
            .arg(&self.audit_log)
            .args(["--summary", "never", "--"])
            .args(agent)
            .env("HCP_TASK_ID", &task.task_id)
            .env("HCP_CAPABILITY", &task.capability)
            .env("HCP_TASK_INPUT", task.input.to_string())
            .env("HCP_OUTPUT_FILE", &output_file)
            // The broker's URI may hold its password: not for the agent.
            .env_remove("AHP_WRAP_AMQP")
            .stdin(if on_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: a Ctrl-C meant for the worker is the worker's to handle.
            .process_group(0)
            .kill_on_drop(true);
        // A worker killed mid-task takes the run with it (whose guardian then ends the
        // agent's tree), so the task is not finished twice.
        crate::child::dies_with_us(&mut cmd);
        let mut child = cmd.spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            let intent = task.intent.clone();
            tokio::spawn(async move {
                let _ = stdin.write_all(intent.as_bytes()).await;
                let _ = stdin.write_all(b"\n").await;
            });
        }
        let stdout = tokio::spawn(keep_tail(child.stdout.take()));
        let stderr = tokio::spawn(keep_tail(child.stderr.take()));
        Ok(Running {
            child,
            audit_log: self.audit_log.clone(),
            offset,
            pending: Vec::new(),
            output_file,
            stdout,
            stderr,
        })
    }
}

/// Reads `from` to its end, keeping the last [`KEEP_OUTPUT`] bytes.
async fn keep_tail(from: Option<impl AsyncRead + Unpin>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut from) = from else { return kept };
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * KEEP_OUTPUT {
            kept.drain(..kept.len() - KEEP_OUTPUT);
        }
    }
    if kept.len() > KEEP_OUTPUT {
        kept.drain(..kept.len() - KEEP_OUTPUT);
    }
    kept
}

impl Running {
    /// Waits for the run's end. Cancellation-safe (tokio's `Child::wait`).
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// The audit log's new complete lines since the last call.
    pub(crate) fn new_audit_lines(&mut self) -> Vec<Vec<u8>> {
        if let Ok(mut f) = std::fs::File::open(&self.audit_log) {
            if f.seek(SeekFrom::Start(self.offset)).is_ok() {
                let mut buf = Vec::new();
                if let Ok(n) = f.read_to_end(&mut buf) {
                    self.offset += n as u64;
                    self.pending.extend_from_slice(&buf);
                }
            }
        }
        super::events::take_lines(&mut self.pending)
    }

    /// Stops the run: SIGTERM (the run forwards it to the agent), then after `grace`
    /// SIGKILL (the run's guardian then ends the agent's whole tree).
    pub(crate) async fn stop(
        &mut self,
        grace: Duration,
    ) -> std::io::Result<std::process::ExitStatus> {
        if let Some(pid) = self.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                tracing::warn!("the run did not stop within {grace:?} of SIGTERM: SIGKILL");
                self.child.start_kill()?;
                self.child.wait().await
            }
        }
    }

    /// What the ended run left (`status` from [`Running::wait`] or [`Running::stop`]).
    pub(crate) async fn finish(
        self,
        status: std::process::ExitStatus,
        schema: Option<&super::capability::Schema>,
    ) -> Finished {
        let drain = |h: JoinHandle<Vec<u8>>| async move {
            tokio::time::timeout(DRAIN, h)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        let stdout = drain(self.stdout).await;
        let stderr = drain(self.stderr).await;
        let output = read_output(&self.output_file, schema);
        let _ = std::fs::remove_file(&self.output_file);
        Finished {
            status,
            stdout,
            stderr,
            output,
        }
    }
}

/// The JSON the agent wrote to its output file, checked against the output schema.
fn read_output(
    path: &Path,
    schema: Option<&super::capability::Schema>,
) -> Option<Result<serde_json::Value, String>> {
    let file = std::fs::File::open(path).ok()?;
    let mut text = Vec::new();
    if let Err(e) = file.take(MAX_OUTPUT_FILE + 1).read_to_end(&mut text) {
        return Some(Err(format!("cannot read the output file: {e}")));
    }
    if text.len() as u64 > MAX_OUTPUT_FILE {
        return Some(Err(format!(
            "the output file is larger than {MAX_OUTPUT_FILE} bytes"
        )));
    }
    let value: serde_json::Value = match serde_json::from_slice(&text) {
        Ok(v) => v,
        Err(e) => return Some(Err(format!("the output file is not JSON: {e}"))),
    };
    if let Some(s) = schema {
        if let Err(e) = s.validate(&value) {
            return Some(Err(format!(
                "the output does not fit the capability's output schema: {e}"
            )));
        }
    }
    Some(Ok(value))
}

/// The end of `bytes` as text, at most `SUMMARY_CHARS` characters, trimmed.
pub(crate) fn summary_of(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let count = text.chars().count();
    if count <= SUMMARY_CHARS {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - SUMMARY_CHARS).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::capability::{DataClass, Risk};

    fn launcher(agent: &[&str]) -> Launcher {
        Launcher {
            exe: "ahp-wrap".into(),
            wrap_args: vec![],
            agent: agent.iter().map(OsString::from).collect(),
            audit_log: "/nonexistent/a".into(),
            work_dir: "/nonexistent".into(),
            grace: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_intent_goes_into_the_placeholder_or_stdin() {
        let task = Task::new("c", "fix it", Risk::R1, DataClass::T1);
        let (args, stdin) = launcher(&["claude", "-p", "do: {task}"]).agent_args(&task);
        assert_eq!(args, vec!["claude", "-p", "do: fix it"]);
        assert!(!stdin);
        let (args, stdin) = launcher(&["agent.sh"]).agent_args(&task);
        assert_eq!(args, vec!["agent.sh"]);
        assert!(stdin);
    }

    #[test]
    fn an_intent_is_never_an_option() {
        let mut task = Task::new("c", "--yolo", Risk::R1, DataClass::T1);
        let whole = launcher(&["codex", "exec", "{task}"]);
        assert!(whole.refuses(&task).unwrap().contains("option"));
        assert_eq!(
            launcher(&["claude", "-p", "do: {task}"]).refuses(&task),
            None
        );
        assert_eq!(launcher(&["agent.sh"]).refuses(&task), None);
        task.intent = "a\0b".into();
        assert!(launcher(&["agent.sh"]).refuses(&task).is_some());
    }

    #[test]
    fn summaries_keep_the_end() {
        assert_eq!(summary_of(b"  done\n"), "done");
        let long = "a".repeat(SUMMARY_CHARS) + "END";
        let s = summary_of(long.as_bytes());
        assert!(s.starts_with('…') && s.ends_with("END"));
        assert_eq!(s.chars().count(), SUMMARY_CHARS + 1);
    }
}
