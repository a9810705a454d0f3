//! A real headless Chromium (Debian's `chromium`, installed by tests/approvals/setup.sh),
//! driven over its DevTools protocol: open a page, evaluate JavaScript in it, take a
//! screenshot. Started in its own process group, which is ended (by its recorded id) when
//! the browser is dropped.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// Where the setup installs the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct Browser {
    child: Child,
    ws: Ws,
    next: u64,
    /// The page's DevTools session.
    session: String,
    _profile: tempfile::TempDir,
}

/// The browser, or a failure that says how to install it.
pub fn chromium() -> PathBuf {
    let bin = std::env::var_os("AHP_WRAP_CHROMIUM").map_or(PathBuf::from(CHROMIUM), PathBuf::from);
    assert!(
        bin.exists(),
        "Chromium is not installed at {}: run tests/approvals/setup.sh first (it installs \
         Debian's chromium package), or set AHP_WRAP_SKIP_AGENT_E2E=approvals to skip the \
         approvals page tests on purpose",
        bin.display()
    );
    bin
}

impl Browser {
    /// Starts Chromium headless and opens `url` in a new page.
    pub async fn open(url: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1100,800",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let endpoint = devtools_endpoint(&mut child);
        let (ws, _) = tokio_tungstenite::connect_async(endpoint.as_str())
            .await
            .expect("connect to DevTools");
        let mut b = Browser {
            child,
            ws,
            next: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = b
            .call("Target.createTarget", json!({"url": url}), false)
            .await;
        let attach = json!({"targetId": target["targetId"], "flatten": true});
        let attached = b.call("Target.attachToTarget", attach, false).await;
        b.session = attached["sessionId"].as_str().unwrap().to_owned();
        b
    }

    /// One DevTools command (on the page's session when `page`); its result.
    async fn call(&mut self, method: &str, params: Value, page: bool) -> Value {
        match self.try_call(method, params, page).await {
            Ok(v) => v,
            Err(e) => panic!("{method}: {e}"),
        }
    }

    /// [`Browser::call`], with DevTools' error as an `Err`.
    async fn try_call(&mut self, method: &str, params: Value, page: bool) -> Result<Value, Value> {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if page {
            msg["sessionId"] = json!(self.session);
        }
        self.ws.send(Message::Text(msg.to_string())).await.unwrap();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("DevTools did not answer {method}"));
            let Some(Ok(Message::Text(text))) = next else {
                continue;
            };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                return match v.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(v["result"].clone()),
                };
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    pub async fn eval(&mut self, expression: &str) -> Value {
        match self.try_eval(expression).await {
            Ok(v) => v,
            Err(e) => panic!("{expression}: {e}"),
        }
    }

    /// [`Browser::eval`], with an exception (or a page still loading) as an `Err`.
    async fn try_eval(&mut self, expression: &str) -> Result<Value, Value> {
        let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
        let r = self.try_call("Runtime.evaluate", params, true).await?;
        match r.get("exceptionDetails") {
            Some(e) => Err(e.clone()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Evaluates `expression` until it is true (a page still loading is not yet true), or
    /// fails after `limit`.
    pub async fn wait_for(&mut self, expression: &str, limit: Duration) {
        let start = Instant::now();
        while self.try_eval(expression).await != Ok(json!(true)) {
            assert!(
                start.elapsed() < limit,
                "the page never showed: {expression}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A PNG of the page, written to `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        let r = self
            .call("Page.captureScreenshot", json!({"format": "png"}), true)
            .await;
        let png = base64_decode(r["data"].as_str().unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
        eprintln!("approvals page screenshot: {}", path.display());
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group we started: the browser and its helper processes.
        let pgid = self.child.id() as i32;
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.wait();
    }
}

/// Reads Chromium's stderr until it says where DevTools listens.
fn devtools_endpoint(child: &mut Child) -> String {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        if let Some(url) = line.strip_prefix("DevTools listening on ") {
            let url = url.trim().to_owned();
            std::thread::spawn(move || for _ in lines {});
            return url;
        }
        said.push_str(&line);
        said.push('\n');
    }
    panic!("chromium did not start DevTools:\n{said}");
}

fn base64_decode(s: &str) -> Vec<u8> {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = ABC.iter().position(|&a| a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
