//! What tests/mcp_proxy.rs runs: the installed MCP servers (tests/mcp/setup.sh), the proxy
//! in-process between a client and one of them with a real session as its gate, and a raw
//! line client.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use ahp_wrap::audit::{AuditLog, Auditor};
use ahp_wrap::gate::{Decider, Embedded, FailMode, Gate, Harness, Mode};
use ahp_wrap::intercept::proxy::mcp::Mcp;
use ahp_wrap::intercept::proxy::{run, Ended, Options, Streams};
use ahp_wrap::policy::Policy;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::io::{ReadHalf, WriteHalf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

/// The time limit of every step (a hang fails, it never blocks the suite).
const LIMIT: Duration = Duration::from_secs(60);

pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("a step of the test took longer than its time limit")
}

/// `node_modules/@modelcontextprotocol/<name>/dist/index.js`, or a failure that says how
/// to install it.
fn server_js(name: &str) -> PathBuf {
    let js = crate::agents::root()
        .join("tests/.cache/mcp/node_modules/@modelcontextprotocol")
        .join(name)
        .join("dist/index.js");
    assert!(
        js.exists(),
        "the MCP {name} is not installed at {}: run tests/mcp/setup.sh first (it installs \
         the pinned servers from the npm registry), or set {}=mcp to skip these tests on \
         purpose",
        js.display(),
        crate::agents::SKIP_ENV,
    );
    js
}

/// A test's private directory: the workspace the servers see, and the audit log.
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        World { dir }
    }

    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws").canonicalize().unwrap()
    }

    /// Every record of the audit log.
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A run's gate: this embedded policy (the workspace set), fail mode closed, no
    /// person to ask, an audit log.
    fn gate(&self, policy: &str) -> Arc<Gate> {
        let policy = Policy::from_toml_str(policy)
            .unwrap()
            .with_workspace(self.ws());
        let log = AuditLog::open(&self.dir.path().join("audit.jsonl"), None).unwrap();
        let decider = Decider {
            harness: Harness::Embedded(Arc::new(Embedded::new(policy, Mode::Enforce))),
            fail_mode: FailMode::Closed,
            timeout: Duration::from_secs(10),
            approver: None,
        };
        Arc::new(Gate::new(
            "mcp-test".into(),
            "mcp-client".into(),
            0,
            decider,
            Auditor::new(log),
        ))
    }
}

/// How to start one MCP server.
pub struct Server {
    /// Its name in tool names (`mcp__<label>__<tool>`).
    label: &'static str,
    argv: Vec<String>,
}

/// A started server: the child (killed when dropped) and its stdout and stdin.
pub struct Spawned {
    pub child: Child,
    pub stdio: (ChildStdout, ChildStdin),
}

impl Server {
    /// server-filesystem, allowed to touch `ws` only.
    pub fn filesystem(ws: &Path) -> Server {
        let js = server_js("server-filesystem");
        Server {
            label: "fs",
            argv: vec!["node".into(), path(&js), path(ws)],
        }
    }

    /// server-everything over stdio.
    pub fn everything() -> Server {
        let js = server_js("server-everything");
        Server {
            label: "everything",
            argv: vec!["node".into(), path(&js), "stdio".into()],
        }
    }

    /// The same server, with every byte it reads also written to `file` (by `tee`).
    pub fn teed(self, file: &Path) -> Server {
        let script = r#"f=$1; shift; tee "$f" | exec "$@""#;
        self.wrapped(script, &[path(file)])
    }

    /// The same server, whose output gets `n` bytes of `x` without a newline after its
    /// first progress notification.
    pub fn with_garbage_after_progress(self, n: usize) -> Server {
        let script = r#"n=$1; shift; "$@" | {
            while IFS= read -r l; do
                printf '%s\n' "$l"
                case $l in *notifications/progress*) break ;; esac
            done
            head -c "$n" /dev/zero | tr '\0' x
            cat
        }"#;
        self.wrapped(script, &[n.to_string()])
    }

    fn wrapped(self, script: &str, extra: &[String]) -> Server {
        let mut argv = vec!["sh".into(), "-c".into(), script.into(), "sh".into()];
        argv.extend(extra.iter().cloned());
        argv.extend(self.argv);
        Server { argv, ..self }
    }

    /// Starts it with piped stdin and stdout (stderr, its banner, is dropped here).
    pub fn spawn(&self) -> Spawned {
        let mut child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", self.argv));
        let stdio = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        Spawned { child, stdio }
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

type ClientHalves = (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>);

/// The proxy running in-process between an in-memory client and a real server.
pub struct Proxied {
    /// The client's ends (read, write).
    pub client: ClientHalves,
    pub proxy: JoinHandle<Ended>,
    pub server: Child,
}

impl Proxied {
    pub fn start(world: &World, server: Server, policy: &str, options: Options) -> Proxied {
        let Spawned { child, stdio } = server.spawn();
        let gate = world.gate(policy);
        let mcp = Mcp::new(server.label, Some(world.ws()));
        let (client, ours) = tokio::io::duplex(1 << 16);
        let (client_in, client_out) = tokio::io::split(ours);
        let proxy = tokio::spawn(async move {
            let streams = Streams {
                client_in,
                client_out,
                server_in: stdio.1,
                server_out: stdio.0,
            };
            run(
                std::sync::Arc::new(mcp),
                gate,
                streams,
                options,
                std::future::pending(),
            )
            .await
        });
        Proxied {
            client: tokio::io::split(client),
            proxy,
            server: child,
        }
    }
}

/// A client that writes and reads raw lines.
pub struct LineClient {
    r: BufReader<Box<dyn AsyncRead + Unpin + Send>>,
    w: Box<dyn AsyncWrite + Unpin + Send>,
    _server: Option<Child>,
}

impl LineClient {
    pub fn new((r, w): ClientHalves) -> LineClient {
        LineClient {
            r: BufReader::new(Box::new(r)),
            w: Box::new(w),
            _server: None,
        }
    }

    /// Straight to a server, without the proxy.
    pub fn over_child(s: Spawned) -> LineClient {
        LineClient {
            r: BufReader::new(Box::new(s.stdio.0)),
            w: Box::new(s.stdio.1),
            _server: Some(s.child),
        }
    }

    pub async fn send(&mut self, line: &str) {
        within(self.w.write_all(format!("{line}\n").as_bytes()))
            .await
            .unwrap();
    }

    /// The next line, `\n` included ("" at the end of the stream).
    pub async fn recv_line(&mut self) -> String {
        let mut line = String::new();
        within(self.r.read_line(&mut line)).await.unwrap();
        line
    }

    /// Reads until a JSON message satisfies `want`, and returns it.
    pub async fn recv_until(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self.recv_line().await;
            assert!(
                !line.is_empty(),
                "the stream ended before the message awaited"
            );
            if let Ok(m) = serde_json::from_str::<Value>(&line) {
                if want(&m) {
                    return m;
                }
            }
        }
    }

    pub async fn handshake(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"line-client","version":"1.0"}}}"#).await;
        self.recv_until(|m| m["id"] == 1).await;
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }

    /// Sends each line; after a request, reads up to its answer. Returns every line read.
    pub async fn exchange(&mut self, lines: &[String]) -> Vec<String> {
        let mut got = Vec::new();
        for line in lines {
            self.send(line).await;
            let id = serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|m| m.get("id").cloned());
            let Some(id) = id else { continue };
            loop {
                let answer = self.recv_line().await;
                assert!(!answer.is_empty(), "the stream ended; read so far: {got:?}");
                got.push(answer.clone());
                if serde_json::from_str::<Value>(&answer).is_ok_and(|m| m["id"] == id) {
                    break;
                }
            }
        }
        got
    }
}
