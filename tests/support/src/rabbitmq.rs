//! A private RabbitMQ broker for one test: Debian's `rabbitmq-server` (installed by
//! tests/rabbitmq/setup.sh) started on free ports, with its own node name, database, logs,
//! Erlang cookie (HOME) and epmd port under a temporary directory; stopped (and its epmd
//! ended) when dropped. `restart` stops and starts the same broker: durable queues and
//! persistent messages survive it.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;

/// Where Debian installs the broker's start script.
pub const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";
/// How long a broker may take to start (a loaded 2-core machine takes ~10 s).
const START_LIMIT: Duration = Duration::from_secs(120);
const STOP_LIMIT: Duration = Duration::from_secs(30);

pub struct Broker {
    pub dir: tempfile::TempDir,
    pub port: u16,
    dist_port: u16,
    epmd_port: u16,
    node: String,
    server: std::sync::Mutex<Option<Child>>,
}

/// Runs `f` on a fresh single-threaded runtime.
pub fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

impl Broker {
    /// Starts a private broker, or fails saying how to install one.
    pub fn start() -> Broker {
        assert!(
            std::path::Path::new(SERVER).exists(),
            "RabbitMQ is not installed ({SERVER} is missing): run tests/rabbitmq/setup.sh \
             (it installs Debian's rabbitmq-server), or set AHP_WRAP_SKIP_AGENT_E2E=rabbitmq \
             to skip the fleet tests on purpose"
        );
        let dir = tempfile::Builder::new()
            .prefix("ahp-rmq")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("enabled_plugins"), "[].\n").unwrap();
        let broker = Broker {
            port: crate::common::free_port(),
            dist_port: crate::common::free_port(),
            epmd_port: crate::common::free_port(),
            node: format!(
                "ahpwrap{}@localhost",
                std::process::id() as u64 * 1000 + u64::from(crate::common::free_port() % 1000)
            ),
            dir,
            server: Default::default(),
        };
        broker.spawn();
        broker
    }

    pub fn url(&self) -> String {
        format!("amqp://127.0.0.1:{}/%2f", self.port)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn spawn(&self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("server.log"))
            .unwrap();
        let mut cmd = Command::new(SERVER);
        cmd.current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", self.path("mnesia"))
            .env("RABBITMQ_LOG_BASE", self.path("log"))
            .env("RABBITMQ_CONF_ENV_FILE", self.path("none.conf"))
            .env("RABBITMQ_CONFIG_FILE", self.path("none"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", self.path("none.config"))
            .env(
                "RABBITMQ_ENABLED_PLUGINS_FILE",
                self.path("enabled_plugins"),
            )
            .env("RABBITMQ_PID_FILE", self.path("pid"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        *self.server.lock().unwrap() = Some(cmd.spawn().expect("start rabbitmq-server"));
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let start = Instant::now();
        loop {
            let exited = self
                .server
                .lock()
                .unwrap()
                .as_mut()
                .unwrap()
                .try_wait()
                .unwrap();
            if let Some(status) = exited {
                panic!(
                    "rabbitmq-server exited ({status}) while starting:\n{}",
                    self.log()
                );
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.amqp_ok() {
                return;
            }
            assert!(
                start.elapsed() < START_LIMIT,
                "rabbitmq-server did not accept AMQP connections within {START_LIMIT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn amqp_ok(&self) -> bool {
        block_on(async {
            let c = lapin::Connection::connect(&self.url(), Default::default()).await;
            match c {
                Ok(c) => {
                    let _ = c.close(200, "ready".into()).await;
                    true
                }
                Err(_) => false,
            }
        })
    }

    /// The broker's console output and the end of its log, for failures.
    pub fn log(&self) -> String {
        let console = std::fs::read_to_string(self.path("server.log")).unwrap_or_default();
        let mut logs = String::new();
        if let Ok(dir) = std::fs::read_dir(self.path("log")) {
            for e in dir.flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: String = text
                    .chars()
                    .rev()
                    .take(3000)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                logs.push_str(&format!("--- {}\n{tail}\n", e.path().display()));
            }
        }
        format!("--- console\n{console}\n{logs}")
    }

    /// Stops the broker (SIGTERM to its process group, SIGKILL after a limit).
    pub fn stop(&self) {
        let Some(mut server) = self.server.lock().unwrap().take() else {
            return;
        };
        let group = -(server.id() as i32);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGTERM,
        );
        let start = Instant::now();
        while server.try_wait().unwrap().is_none() {
            if start.elapsed() > STOP_LIMIT {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(group),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = server.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // The Erlang VM may still be going down after the start script returned.
        let start = Instant::now();
        while nix::sys::signal::kill(nix::unistd::Pid::from_raw(group), None).is_ok()
            && start.elapsed() < STOP_LIMIT
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(group),
            nix::sys::signal::Signal::SIGKILL,
        );
    }

    /// Stops and starts the same broker (same node, ports and database).
    pub fn restart(&self) {
        self.stop();
        self.spawn();
    }

    /// Ready messages and consumers of `queue` (declared passively: it must exist).
    pub fn queue_counts(&self, queue: &str) -> (u32, u32) {
        block_on(async {
            let c = lapin::Connection::connect(&self.url(), Default::default())
                .await
                .unwrap();
            let ch = c.create_channel().await.unwrap();
            let passive = QueueDeclareOptions {
                passive: true,
                ..Default::default()
            };
            let q = ch
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
                .unwrap_or_else(|e| panic!("queue {queue}: {e}"));
            let _ = c.close(200, "done".into()).await;
            (q.message_count(), q.consumer_count())
        })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.teardown();
    }
}

impl Broker {
    /// Stops the broker and its epmd and removes its directory (what `Drop` does; call it
    /// from `atexit` for a broker in a `static`, which is never dropped).
    pub fn teardown(&self) {
        self.stop();
        // Our epmd (on our private port) outlives the node: end it too.
        let _ = Command::new("epmd")
            .arg("-kill")
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

/// One broker for a whole test binary, torn down when the process exits.
pub fn shared() -> &'static Broker {
    static BROKER: std::sync::OnceLock<Broker> = std::sync::OnceLock::new();
    extern "C" fn teardown() {
        if let Some(b) = BROKER.get() {
            b.teardown();
        }
    }
    BROKER.get_or_init(|| {
        ahp_wrap::at_exit(teardown);
        Broker::start()
    })
}
