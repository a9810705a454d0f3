//! What the tree serves is reachable from the user's machine: a program of the agent's tree
//! (a hookless agent, under the default floor, in its own network namespace) listens on a
//! port of its loopback, and a client on the test's side, on this machine's loopback, gets its
//! answer. The server's own log shows the connection; when the server stops, the port is
//! closed on this side too. A login's loopback callback (a random port, the URL printed, one
//! request with the code) completes. `publish = "none"` keeps the listener inside, refused and
//! audited; `--floor off` behaves as without the wrapper.

use ahp_wrap_testkit::common;

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// A login's callback listener: a random port (IPv4, or the IPv6 wildcard with `6`), the URL
/// printed once it listens, one request whose `code` it checks (exit 0 when it is right).
const LOGIN: &str = r#"
import http.server, socket, sys, urllib.parse
fam = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        self.server.code = q.get("code", [None])[0]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"you may close this window\n")
    def log_message(self, *a):
        pass
class S(http.server.HTTPServer):
    address_family = socket.AF_INET6 if fam == "6" else socket.AF_INET
srv = S(("::" if fam == "6" else "127.0.0.1", 0), H)
srv.code = None
print(f"open http://localhost:{srv.server_address[1]}/callback?code=...", flush=True)
srv.handle_request()
print("code:", srv.code, flush=True)
sys.exit(0 if srv.code == "abc123" else 3)
"#;

/// A dev server's script: serves the workspace on `$PORT` (its log in `server.log`) until
/// `stop` appears, then stops it and waits for `end`.
const DEV_SERVER: &str = r#"
python3 -u -m http.server "$PORT" --bind "$BIND" > server.log 2>&1 &
server=$!
while [ ! -e stop ]; do sleep 0.02; done
kill $server; wait $server
echo stopped > stopped
while [ ! -e end ]; do sleep 0.02; done
"#;

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new(policy: &str) -> World {
        let (dir, root) = outside_tree(
            "floor-publish-",
            &["ws", "home"],
            &[
                ("ws/hello.txt", "served from the tree\n"),
                ("login.py", LOGIN),
                ("policy.toml", policy),
            ],
        );
        World { _dir: dir, root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    fn audit(&self) -> PathBuf {
        self.root.join("audit.jsonl")
    }

    /// The wrapper with `args`, running `argv` as a hookless agent in the workspace.
    fn command(&self, args: &[&str], argv: &[&str]) -> Command {
        let mut cmd = Command::new(wrap_bin());
        cmd.args(["--no-intercept", "--summary", "always", "--audit-log"])
            .arg(self.audit())
            .arg("--policy")
            .arg(self.root.join("policy.toml"))
            .args(args)
            .arg("--")
            .args(argv)
            .current_dir(self.ws())
            .env("HOME", self.root.join("home"))
            .env_remove("AHP_WRAP_FLOOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// The audit log's `listen` decisions.
    fn listens(&self) -> Vec<serde_json::Value> {
        read_jsonl(&self.audit())
            .into_iter()
            .filter(|r| r["payload"]["arguments"]["direction"] == "listen")
            .collect()
    }
}

/// `GET path` on `addr`: the whole response, or why not.
fn get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    Ok(text)
}

/// Waits for `child` to end within 30 s (killed otherwise); its output.
fn finish(child: Child) -> std::process::Output {
    let pid = child.id() as i32;
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    if !eventually(|| waiter.is_finished(), Duration::from_secs(30)) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    waiter.join().unwrap()
}

fn touch(dir: &Path, name: &str) {
    std::fs::write(dir.join(name), "").unwrap();
}

/// What became of a dev server run.
struct Served {
    /// What the client on this side got.
    got: Result<String, String>,
    /// Whether the port closed on this side once the server stopped.
    closed: bool,
    /// The server's own log.
    log: String,
    /// Whether anything listened on this machine's wildcard address at the port meanwhile.
    on_wildcard: bool,
    /// The run's metrics, when it served them, read before the server stopped.
    metrics: Option<String>,
    out: std::process::Output,
}

impl Served {
    /// Asserts the client on this side got the tree's file.
    fn assert_reached(&self) {
        assert!(
            self.got
                .as_deref()
                .is_ok_and(|g| g.contains("served from the tree")),
            "{:?}\n{}\n{}",
            self.got,
            self.log,
            show(&self.out)
        );
    }
}

/// Whether a socket of this machine's network namespace listens on `0.0.0.0:port`.
fn wildcard_listener(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!("00000000:{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A")
    })
}

/// Starts the dev server under `args` on `bind` (a free port) and waits until it serves;
/// the run, and where the server's port is on this machine's loopback.
fn start_dev_server(w: &World, args: &[&str], bind: &str) -> (Child, SocketAddr) {
    let port = free_port();
    let mut cmd = w.command(args, &["sh", "-c", DEV_SERVER]);
    cmd.env("PORT", port.to_string()).env("BIND", bind);
    let child = cmd.spawn().unwrap();
    // Python says it serves once it listens.
    eventually(
        || read(&w.ws(), "server.log").contains("Serving HTTP"),
        Duration::from_secs(20),
    );
    (child, format!("127.0.0.1:{port}").parse().unwrap())
}

/// Runs the dev server under `args` on `bind`, gets `hello.txt` from this side, stops it.
fn dev_server(w: &World, args: &[&str], bind: &str) -> Served {
    dev_server_with(w, args, bind, None)
}

/// [`dev_server`], with the run's metrics served on `metrics` and read while it serves.
fn dev_server_with(w: &World, args: &[&str], bind: &str, metrics: Option<SocketAddr>) -> Served {
    let listen = metrics.map(|m| m.to_string());
    let mut all: Vec<&str> = args.to_vec();
    if let Some(m) = &listen {
        all.extend(["--metrics-listen", m]);
    }
    let (child, addr) = start_dev_server(w, &all, bind);
    let port = addr.port();
    let log = w.ws().join("server.log");
    let got = get(addr, "/hello.txt");
    let on_wildcard = wildcard_listener(port);
    let metrics = metrics.and_then(|m| get(m, "/metrics").ok());
    touch(&w.ws(), "stop");
    eventually(|| w.ws().join("stopped").exists(), Duration::from_secs(10));
    let closed = eventually(
        || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
        Duration::from_secs(3),
    );
    touch(&w.ws(), "end");
    let out = finish(child);
    Served {
        got,
        closed,
        log: std::fs::read_to_string(log).unwrap_or_default(),
        on_wildcard,
        metrics,
        out,
    }
}

#[test]
fn a_dev_server_in_the_tree_answers_on_the_users_loopback_until_it_stops() {
    let w = World::new("version = 1\n");
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let Served {
        got,
        closed,
        log,
        out,
        metrics,
        ..
    } = dev_server_with(&w, &[], "127.0.0.1", Some(metrics));
    let got = got.unwrap_or_else(|e| {
        panic!(
            "the tree's server was not reached: {e}\n{log}\n{}",
            show(&out)
        )
    });
    assert!(
        got.starts_with("HTTP/1.0 200") && got.contains("served from the tree"),
        "{got}"
    );
    assert!(
        log.contains("\"GET /hello.txt HTTP/1.0\" 200"),
        "the server's log:\n{log}"
    );
    assert!(
        closed,
        "the port stayed open on this side after the server stopped\n{}",
        show(&out)
    );
    assert!(out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let metrics = metrics.unwrap_or_default();
    for line in [
        "ahp_wrap_floor_published_total{what=\"port\"} 1",
        "ahp_wrap_floor_published_total{what=\"connection\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }
    assert!(
        stderr.contains("1 listener(s) of the tree published")
            && stderr.contains("1 connection(s) carried"),
        "{stderr}"
    );
    // Each carried connection is audited with the process that made it: this test's.
    let inbound: Vec<serde_json::Value> = read_jsonl(&w.audit())
        .into_iter()
        .filter(|r| r["payload"]["arguments"]["direction"] == "inbound")
        .collect();
    assert_eq!(inbound.len(), 1, "{inbound:#?}");
    assert_eq!(
        inbound[0]["payload"]["context"]["client"]["pid"],
        std::process::id(),
        "{inbound:#?}"
    );
    let listens = w.listens();
    assert_eq!(listens.len(), 1, "{listens:#?}");
    assert_eq!(listens[0]["decision"], "allow", "{listens:#?}");
    assert!(
        listens[0]["payload"]["context"]["process"]["argv"]
            .to_string()
            .contains("http.server"),
        "the listening process is named: {listens:#?}"
    );
}

#[test]
fn a_listener_of_a_tree_whose_mounts_are_sealed_is_published_too() {
    // With sandboxes of the tree's own allowed, the tree lives in a user namespace nested in
    // the floor's: the porter joins the one that owns the network namespace.
    let w = World::new("version = 1\n");
    let s = dev_server(&w, &["--nested-sandboxes", "on"], "127.0.0.1");
    s.assert_reached();
}

#[test]
fn a_wildcard_listener_is_published_on_loopback_only() {
    let w = World::new("version = 1\n");
    let s = dev_server(&w, &[], "0.0.0.0");
    s.assert_reached();
    // Published on loopback, never on this machine's wildcard address.
    assert!(!s.on_wildcard, "published on 0.0.0.0");
    // With the floor off, the same server listens on the wildcard: the check can fail.
    let w = World::new("version = 1\n");
    let s = dev_server(&w, &["--floor", "off"], "0.0.0.0");
    assert!(s.on_wildcard && s.got.is_ok(), "{:?}", s.got);
}

#[test]
fn a_login_callback_on_a_random_port_reaches_the_tree() {
    for (family, host) in [("4", "127.0.0.1"), ("6", "[::1]")] {
        let w = World::new("version = 1\n");
        let login = w.root.join("login.py");
        let mut child = w
            .command(&[], &["python3", login.to_str().unwrap(), family])
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line
            .split("localhost:")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no URL printed: {line:?}"));
        // At once, as a browser opened on the URL would.
        let addr: SocketAddr = format!("{host}:{port}").parse().unwrap();
        let got = get(addr, "/callback?code=abc123");
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        let out = finish(child);
        assert!(
            got.as_deref().is_ok_and(|g| g.contains("you may close")),
            "IPv{family}: {got:?}"
        );
        assert!(rest.contains("code: abc123"), "IPv{family}: {rest}");
        assert!(out.status.success(), "IPv{family}: {}", show(&out));
    }
}

#[test]
fn publish_none_keeps_the_listener_inside_refused_and_audited() {
    let w = World::new("version = 1\n[floor.net]\npublish = \"none\"\n");
    let Served { got, log, .. } = dev_server(&w, &[], "127.0.0.1");
    assert!(got.is_err(), "reached with publish = \"none\": {got:?}");
    // It still works inside.
    assert!(log.contains("Serving HTTP"), "{log}");
    let listens = w.listens();
    assert_eq!(listens.len(), 1, "{listens:#?}");
    assert_eq!(listens[0]["decision"], "block", "{listens:#?}");
    assert!(
        listens[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("publish = \"none\"")
            || listens[0].to_string().contains("publish = \\\"none\\\""),
        "{listens:#?}"
    );
}

#[test]
fn without_the_floor_the_server_is_reached_as_without_the_wrapper() {
    let w = World::new("version = 1\n");
    let s = dev_server(&w, &["--floor", "off"], "127.0.0.1");
    s.assert_reached();
    assert!(s.closed);
    assert!(
        w.listens().is_empty(),
        "nothing to publish without the floor"
    );
}

#[test]
fn a_port_taken_on_this_side_is_published_elsewhere_said_and_audited_and_works_inside() {
    let w = World::new("version = 1\n");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let script = format!(
        "python3 -c 'import socket,sys\ns=socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen()\nc=socket.create_connection((\"127.0.0.1\", {port})); a,_=s.accept(); a.sendall(b\"inside\"); print(c.recv(10).decode())'"
    );
    let out = finish(w.command(&[], &["sh", "-c", &script]).spawn().unwrap());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("inside"),
        "{}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "listener on 127.0.0.1:{port} is published on this machine at 127.0.0.1:"
        )) && stderr.contains("a program of yours listened on"),
        "{stderr}"
    );
    let said = read_jsonl(&w.audit()).into_iter().any(|r| {
        r["event_type"] == "error" && r["payload"]["listen"] == format!("127.0.0.1:{port}")
    });
    assert!(said, "not audited");
    drop(taken);
}

/// The tree's server that logs what it is sent, on `$PORT`, until `stop` appears.
const LOGGING_SERVER: &str = r#"
python3 -u -c '
import socket, os, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["PORT"]))); s.listen(); s.settimeout(0.1)
print("listening", flush=True)
while not os.path.exists("stop"):
    try:
        c, _ = s.accept()
    except OSError:
        continue
    c.settimeout(2)
    with open("received.log", "ab") as f:
        f.write(c.recv(4096))
    c.close()
' > server.log 2>&1
"#;

/// A program of the person's polls its own server's port with its token: a port the wrapper
/// saw a program of theirs listen on (in an earlier run here) is never the tree's, nor a
/// well-known service's. The tree's listener is published on another port, said; the
/// person's client finds its own port closed, and the tree never gets the token.
#[test]
fn a_port_the_persons_programs_listen_on_is_never_taken() {
    let w = World::new("version = 1\n");
    // The person's own server listens while an earlier run starts (on a port below the
    // ephemeral range, as a server's port is: those are remembered between runs).
    let theirs = (20000..30000)
        .step_by(37)
        .find_map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok())
        .unwrap();
    let port = theirs.local_addr().unwrap().port();
    let out = finish(w.command(&[], &["sleep", "1"]).spawn().unwrap());
    assert!(out.status.success(), "{}", show(&out));
    drop(theirs);
    for port in [port, 27017] {
        let _ = std::fs::remove_file(w.ws().join("stop"));
        let _ = std::fs::remove_file(w.ws().join("received.log"));
        let mut cmd = w.command(&[], &["sh", "-c", LOGGING_SERVER]);
        cmd.env("PORT", port.to_string());
        let child = cmd.spawn().unwrap();
        assert!(
            eventually(
                || read(&w.ws(), "server.log").contains("listening"),
                Duration::from_secs(20)
            ),
            "the tree's server did not start"
        );
        std::thread::sleep(Duration::from_millis(300));
        // The person's client, which sends its token to its own server's port.
        let sent = TcpStream::connect_timeout(
            &format!("127.0.0.1:{port}").parse().unwrap(),
            Duration::from_secs(1),
        )
        .and_then(|mut c| c.write_all(b"token=secret-of-theirs\n"));
        std::thread::sleep(Duration::from_millis(300));
        touch(&w.ws(), "stop");
        let out = finish(child);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            sent.is_err(),
            "the person's port {port} reached something: {stderr}"
        );
        assert!(
            !read(&w.ws(), "received.log").contains("secret"),
            "the tree got the person's token on {port}"
        );
        let published = stderr
            .split(&format!(
                "listener on 127.0.0.1:{port} is published on this machine at "
            ))
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap_or_else(|| panic!("the run says where it published: {stderr}"));
        assert!(!published.ends_with(&format!(":{port}")), "{published}");
    }
}

#[test]
fn nothing_listens_after_the_wrapper_is_killed() {
    let w = World::new("version = 1\n");
    let (mut child, addr) = start_dev_server(&w, &[], "127.0.0.1");
    let port = addr.port();
    assert!(get(addr, "/hello.txt").is_ok(), "not published");
    child.kill().unwrap();
    child.wait().unwrap();
    let closed = eventually(
        || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
        Duration::from_secs(5),
    );
    assert!(
        closed,
        "something still listens on {addr} after the wrapper was killed"
    );
    // The tree's server is gone too (the guardian ends the tree).
    let alive = || {
        let out = Command::new("pgrep")
            .args(["-f", &format!("http.server {port}")])
            .output()
            .unwrap();
        !out.stdout.is_empty()
    };
    assert!(
        eventually(|| !alive(), Duration::from_secs(5)),
        "the tree's server outlived the run"
    );
}

#[test]
fn with_the_network_floor_off_the_server_is_reached_as_without_the_wrapper() {
    let w = World::new("version = 1\n[floor.net]\nenabled = false\n");
    let s = dev_server(&w, &[], "127.0.0.1");
    s.assert_reached();
    assert!(s.closed);
    assert!(
        w.listens().is_empty(),
        "nothing published: the tree shares this network"
    );
}

#[test]
fn publish_all_publishes_a_wildcard_listener_on_this_machines_wildcard() {
    let w = World::new("version = 1\n[floor.net]\npublish = \"all\"\n");
    let s = dev_server(&w, &[], "0.0.0.0");
    s.assert_reached();
    assert!(s.on_wildcard, "not on 0.0.0.0 with publish = \"all\"");
    assert_eq!(w.listens().len(), 1);
}
