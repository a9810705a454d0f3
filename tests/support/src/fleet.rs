//! What the HCP fleet suites share: a test's private directory with a capability file and
//! agent scripts, `ahp-wrap worker` processes (killed when dropped), and `ahp-wrap task
//! submit` runs whose JSON lines are read back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agents::{run_within, Run};
use crate::rabbitmq::Broker;

pub use crate::common::process::alive;

/// One test's directory: `home/` (HOME of every process), `ws/` (their working
/// directory), capability files and agent scripts.
pub struct Fleet {
    pub dir: tempfile::TempDir,
}

impl Fleet {
    pub fn new() -> Fleet {
        let dir = tempfile::Builder::new()
            .prefix("ahp-fleet")
            .tempdir()
            .unwrap();
        for d in ["home", "ws"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        Fleet { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes an executable shell script.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.path(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Writes a capability file.
    pub fn capability(&self, name: &str, toml: &str) -> PathBuf {
        let p = self.path(&format!("{name}.toml"));
        std::fs::write(&p, toml).unwrap();
        p
    }

    /// A command in this test's environment: ours cleared, PATH kept, HOME and TMPDIR
    /// here (a worker's temporary directory, left behind when it is SIGKILLed, goes with
    /// the test's).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(crate::wrap_bin());
        cmd.args(args)
            .current_dir(self.path("ws"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path("home"))
            .env("TMPDIR", self.dir.path())
            .stdin(Stdio::null());
        cmd
    }

    /// Starts `ahp-wrap worker --amqp … --capability CAP [extra] -- agent`, with `TAG`
    /// in its (and so its agents') environment, and waits until it consumes.
    pub fn worker(
        &self,
        broker: &Broker,
        cap: &Path,
        tag: &str,
        extra: &[&str],
        agent: &[&str],
    ) -> Worker {
        let log = self.path(&format!("worker-{tag}.log"));
        let url = broker.url();
        let mut args = vec![
            "worker",
            "--amqp",
            &url,
            "--capability",
            cap.to_str().unwrap(),
        ];
        args.extend_from_slice(&["--reconnect-max", "1", "--abort-grace", "1"]);
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(agent);
        let mut cmd = self.command(&args);
        let file = std::fs::File::create(&log).unwrap();
        cmd.env("TAG", tag)
            .env("AHP_WRAP_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file);
        let child = cmd.spawn().unwrap();
        let w = Worker {
            child,
            log,
            tag: tag.into(),
        };
        w.wait_log("consuming", Duration::from_secs(60));
        w
    }

    /// `ahp-wrap task submit --json …`, to its end (at most `limit`).
    pub fn submit(&self, broker: &Broker, extra: &[&str], limit: Duration) -> Submitted {
        let url = broker.url();
        let secs = limit.as_secs().saturating_sub(5).max(1).to_string();
        let mut args = vec![
            "task",
            "submit",
            "--json",
            "--amqp",
            &url,
            "--timeout",
            &secs,
        ];
        args.extend_from_slice(extra);
        let mut cmd = self.command(&args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let run = run_within(cmd, limit);
        let lines: Vec<Value> = run
            .stdout()
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{run}"))
            })
            .collect();
        Submitted { run, lines }
    }
}

/// A finished `task submit`.
pub struct Submitted {
    pub run: Run,
    pub lines: Vec<Value>,
}

impl Submitted {
    /// The result message; fails with everything when there is none.
    pub fn result(&self) -> &Value {
        let r = self.lines.iter().find(|l| l["type"] == "result");
        r.unwrap_or_else(|| panic!("no result\n{}", self.run))
    }

    pub fn events(&self) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == "event").collect()
    }

    pub fn code(&self) -> Option<i32> {
        self.run.output.status.code()
    }

    #[track_caller]
    pub fn check(&self, ok: bool, what: &str) {
        self.run.check(ok, what)
    }
}

/// A worker process; stopped when dropped (SIGTERM, then SIGKILL after 10 s).
pub struct Worker {
    pub child: Child,
    pub log: PathBuf,
    pub tag: String,
}

impl Worker {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the worker's log has `text` at least `n` times.
    pub fn wait_log_n(&self, text: &str, n: usize, limit: Duration) {
        let start = Instant::now();
        while self.log_text().matches(text).count() < n {
            assert!(
                start.elapsed() < limit,
                "worker {} never logged {text:?} ({n}x):\n{}",
                self.tag,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_log(&self, text: &str, limit: Duration) {
        self.wait_log_n(text, 1, limit)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let start = Instant::now();
            while let Ok(None) = self.child.try_wait() {
                if start.elapsed() > Duration::from_secs(10) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill();
    }
}

/// Waits until `path` exists.
pub fn wait_file(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until process `pid` is gone; false if it is still alive after `limit`.
pub fn wait_gone(pid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    while alive(pid) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// The pid written in `path`.
/// The pid a process of a run's tree wrote to `path` ([`crate::common::say_pid`]), as this
/// process sees it; -1 (no process) once the process it names is gone.
pub fn read_pid(path: &Path) -> i32 {
    crate::common::pid_from(&std::fs::read_to_string(path).unwrap()).unwrap_or(-1)
}

/// Publishes `body` as a task for `capability` and returns the first reply.
pub fn raw_task(broker: &Broker, capability: &str, body: &[u8], id: &str) -> Value {
    use futures_util::StreamExt;
    use lapin::options::*;
    crate::rabbitmq::block_on(async {
        let c = lapin::Connection::connect(&broker.url(), Default::default())
            .await
            .unwrap();
        let ch = c.create_channel().await.unwrap();
        let (reply, mut replies) =
            ahp_wrap::fleet::amqp::private_queue(&ch, "reply queue", None, "t")
                .await
                .unwrap();
        let props = lapin::BasicProperties::default()
            .with_reply_to(reply.as_str().into())
            .with_correlation_id(id.into());
        ch.basic_publish(
            "hcp.tasks".into(),
            capability.into(),
            BasicPublishOptions::default(),
            body,
            props,
        )
        .await
        .unwrap();
        let next = tokio::time::timeout(Duration::from_secs(30), replies.next()).await;
        let d = next.expect("a reply within 30 s").unwrap().unwrap();
        assert_eq!(
            d.properties.correlation_id().as_ref().map(|c| c.as_str()),
            Some(id)
        );
        serde_json::from_slice(&d.data).unwrap()
    })
}

/// Waits for a child spawned with piped output, at most `limit` (then kills it and fails).
pub fn finish(child: Child, shown: &str, limit: Duration) -> Run {
    let start = Instant::now();
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => Run {
            output: output.unwrap(),
            elapsed: start.elapsed(),
            shown: shown.to_owned(),
        },
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("{shown} did not finish within {limit:?}");
        }
    }
}
