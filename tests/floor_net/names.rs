//! Programs that ignore the proxy variables reach the outside by name: the tree's resolver
//! gives each name an address of the run's, and a connection to it is decided by name and
//! carried out by the wrapper. Real clients against real servers in the test's namespace:
//! Node's `fetch` (which never reads the proxy variables in Node 20), Python's
//! `socket.create_connection`, OpenSSH's `ssh` to an `sshd`, `git` over SSH, and
//! `redis-cli` to a `redis-server`. Each server listens on two addresses: the allowed name's
//! (198.51.100.1) and the one the unknown name leads to (198.51.100.2), so that its log says
//! whether a refused connection reached it. The SSH key is never readable by the tree: it is
//! held by an ssh-agent outside it, whose socket the policy grants (`[floor.unix] allow`).

use super::*;

/// The namespace's extra servers and keys, before the usual set-up. sshd needs its
/// privilege-separation user, so this namespace keeps the machine's users (no user
/// namespace: the test runs it as root).
const NAMES_SETUP: &str = r#"
set -e
d="$NET_DIR"
ssh-keygen -q -t ed25519 -N '' -f "$d/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$d/id_test"
cp "$d/id_test.pub" "$d/authorized_keys"
eval "$(ssh-agent -s -a "$d/agent.sock")" >/dev/null
ssh-add -q "$d/id_test"
rm "$d/id_test"
cat > "$d/sshd_config" <<EOF
ListenAddress 198.51.100.1:22
ListenAddress 198.51.100.2:22
HostKey $d/hostkey
AuthorizedKeysFile $d/authorized_keys
PidFile $d/sshd.pid
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
LogLevel VERBOSE
EOF
git init -q --bare "$d/repo.git"
git init -q "$d/src"
echo "carried over ssh" > "$d/src/README"
git -C "$d/src" add README
git -C "$d/src" -c user.name=t -c user.email=t@t commit -q -m one
git -C "$d/src" push -q "$d/repo.git" HEAD:refs/heads/main
git -C "$d/repo.git" symbolic-ref HEAD refs/heads/main
echo $$ > "$d/pid"
ip link set lo up
for a in 198.51.100.1 198.51.100.2 198.51.100.53; do ip addr add $a/32 dev lo; done
ip addr add 127.0.0.53/8 dev lo
mount --bind "$d/hosts" /etc/hosts
mount --bind "$d/resolv.conf" /etc/resolv.conf
mkdir -p /run/sshd && chmod 755 /run/sshd
/usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log"
for a in 1 2; do
  redis-server --bind 198.51.100.$a --port 6379 --save '' --appendonly no --protected-mode no \
    --loglevel verbose --logfile "$d/redis-$a.log" --daemonize yes --pidfile "$d/redis-$a.pid" \
    --dir "$d"
done
"$PYTHON" "$d/outside.py" "$d" </dev/null >/dev/null 2>&1 &
outside=$!
"$PYTHON" "$d/tcp.py" "$d" </dev/null >/dev/null 2>&1 &
tcp=$!
for i in $(seq 100); do
  [ -e "$d/ready" ] && [ -e "$d/tcp-ready" ] && [ -e "$d/redis-1.pid" ] && [ -e "$d/redis-2.pid" ] && break
  sleep 0.05
done
set +e
"$WRAP" "$@"
code=$?
cp "$d/redis-2.log" "$d/redis-2.during.log"
redis-cli -h 198.51.100.1 get carried > "$d/redis-1.value"
redis-cli -h 198.51.100.2 get carried > "$d/redis-2.value"
kill $outside $tcp $SSH_AGENT_PID $(cat "$d/sshd.pid") $(cat "$d/redis-1.pid") $(cat "$d/redis-2.pid")
exit $code
"#;

/// A plain TCP server on port 7000 of both addresses, logging what reaches it and where.
const TCP: &str = r#"
import socket, sys, threading, os
d = sys.argv[1]
def serve(addr):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 7000)); s.listen()
    while True:
        c, _ = s.accept()
        c.settimeout(5)
        try:
            data = c.recv(100)
        except Exception:
            data = b""
        with open(os.path.join(d, "tcp.log"), "a") as f:
            f.write(addr + " " + data.decode(errors="replace") + "\n")
        c.sendall(b"ok\n"); c.close()
for a in ["198.51.100.1", "198.51.100.2"]:
    threading.Thread(target=serve, args=(a,), daemon=True).start()
open(os.path.join(d, "tcp-ready"), "w").close()
threading.Event().wait()
"#;

/// Each client once to the allowed name, once to the unknown one; Node also to a denied
/// name no hosts file lists (it must never be looked up).
const CLIENTS: &str = r#"
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy NO_PROXY no_proxy NODE_USE_ENV_PROXY
fetch() {
  node -e 'fetch(process.argv[1]).then(r => r.text()).then(t => console.log(process.argv[2] + "=" + t.trim()),
    e => console.log(process.argv[2] + "=" + ((e.cause && e.cause.code) || e)))' "$1" "$2"
}
fetch http://allowed.test/node node
fetch http://other.test/node-unknown node-unknown
fetch http://secret.exfil.test/node-denied node-denied
"$PYTHON" - <<'EOF'
import socket
for host, key in [("allowed.test", "python"), ("other.test", "python-unknown"),
                  ("meta.test", "python-metadata")]:
    try:
        c = socket.create_connection((host, 7000), 10)
        c.sendall(b"python-hello")
        print(key + "=" + c.recv(10).decode().strip())
    except OSError as e:
        print(key + "=errno" + str(e.errno))
# A non-blocking IPv6 socket to a name whose host has only IPv4 (reached through its mapped
# address): EINPROGRESS, then writable with no error, like its own connection.
import select
addr = socket.getaddrinfo("allowed.test", 7000, socket.AF_INET6, socket.SOCK_STREAM)[0][4]
s = socket.socket(socket.AF_INET6)
s.setblocking(False)
err = s.connect_ex(addr)
select.select([], [s], [], 10)
print("python-v6=%d,%d,%s" % (err, s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), addr[0]))
s.setblocking(True)
s.sendall(b"python-v6")
print("python-v6-answer=" + s.recv(10).decode().strip())
# TCP Fast Open (data in the SYN) to a name's address: refused, only connect is carried.
t = socket.socket()
try:
    t.sendto(b"python-tfo", socket.MSG_FASTOPEN, ("allowed.test", 7000))
    print("tfo=sent")
except OSError as e:
    print("tfo=errno" + str(e.errno))
EOF
export SSH_AUTH_SOCK="$NET_DIR/agent.sock"
SSH="ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -o LogLevel=ERROR"
echo "ssh=$($SSH root@allowed.test echo ssh-says-hello)"
$SSH root@other.test echo ssh-says-hello; echo "ssh-unknown=$?"
GIT_SSH_COMMAND="$SSH" git clone -q "root@allowed.test:$NET_DIR/repo.git" clone; echo "git=$?"
echo "cloned=$(cat clone/README)"
GIT_SSH_COMMAND="$SSH" git ls-remote "root@other.test:$NET_DIR/repo.git"; echo "git-unknown=$?"
redis-cli -h allowed.test set carried from-the-tree; echo "redis=$?"
redis-cli -h other.test set carried from-the-tree; echo "redis-unknown=$?"
"#;

fn names_usable() -> bool {
    let tools = [
        "/usr/sbin/sshd",
        "/usr/bin/redis-server",
        "/usr/bin/redis-cli",
    ];
    let missing: Vec<_> = tools.iter().filter(|t| !Path::new(t).exists()).collect();
    assert!(
        missing.is_empty(),
        "{missing:?} missing: tests/floor_net/setup.sh installs them"
    );
    // sshd switches to its own user: the test's namespace keeps the machine's users.
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: sshd in the test's namespace needs root");
        return false;
    }
    usable()
}

#[test]
fn programs_that_ignore_the_proxy_reach_allowed_names_and_nothing_else() {
    if !names_usable() {
        return;
    }
    let hosts = "127.0.0.1 localhost\n::1 localhost\n\
                 198.51.100.1 allowed.test\n198.51.100.2 other.test\n\
                 169.254.169.254 meta.test\n";
    let net = Net::with_files("", hosts, &[("tcp.py", TCP)]);
    // The ssh-agent's socket (outside the tree) is the one path socket the policy grants. A
    // `deny` list given replaces the default one: the metadata range is named again.
    let policy = format!(
        "version = 1\n[floor.unix]\nallow = [\"{}\"]\n[floor.net]\n\
         allow = [\"allowed.test\", \"meta.test\"]\ndeny = [\"*.exfil.test\", \"169.254.0.0/16\"]\nunknown = \"block\"\n",
        net.root.join("agent.sock").display()
    );
    std::fs::write(net.root.join("policy.toml"), policy).unwrap();
    let out = net.run_in(&[], NAMES_SETUP, &[], CLIENTS);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let logs = [
        "http.log",
        "tcp.log",
        "sshd.log",
        "redis-1.log",
        "redis-2.log",
        "dns.log",
    ];
    let mut why = show(&out);
    for l in logs {
        why.push_str(&format!("\n--- {l}:\n{}", net.read(l)));
    }

    // Every client reached the allowed name, with no proxy setting.
    assert_eq!(line(&stdout, "node"), Some("outside says hello"), "{why}");
    assert_eq!(line(&stdout, "python"), Some("ok"), "{why}");
    let v6 = line(&stdout, "python-v6").unwrap_or_default();
    assert!(
        v6.starts_with(&format!("{},0,fd8a:77e3:52c1::", libc::EINPROGRESS)),
        "{why}"
    );
    assert_eq!(line(&stdout, "python-v6-answer"), Some("ok"), "{why}");
    assert_eq!(
        line(&stdout, "tfo"),
        Some(format!("errno{}", libc::EACCES).as_str()),
        "{why}"
    );
    assert!(!net.read("tcp.log").contains("python-tfo"), "{why}");
    assert_eq!(line(&stdout, "ssh"), Some("ssh-says-hello"), "{why}");
    assert_eq!(line(&stdout, "git"), Some("0"), "{why}");
    assert_eq!(line(&stdout, "cloned"), Some("carried over ssh"), "{why}");
    assert_eq!(line(&stdout, "redis"), Some("0"), "{why}");
    // ...as the servers saw it, on the allowed name's address.
    assert!(
        net.read("http.log").contains("198.51.100.1 /node\n"),
        "{why}"
    );
    for data in ["python-hello", "python-v6"] {
        assert!(
            net.read("tcp.log")
                .contains(&format!("198.51.100.1 {data}\n")),
            "{why}"
        );
    }
    let sshd = net.read("sshd.log");
    assert!(sshd.contains("on 198.51.100.1 port 22"), "{why}");
    assert_eq!(net.read("redis-1.value").trim(), "from-the-tree", "{why}");

    // The unknown name was refused to each of them (EACCES, where the client says it) and
    // reached none of their servers.
    assert_eq!(line(&stdout, "python-unknown"), Some("errno13"), "{why}");
    assert_eq!(line(&stdout, "node-unknown"), Some("EACCES"), "{why}");
    for key in ["ssh-unknown", "git-unknown", "redis-unknown"] {
        assert_ne!(line(&stdout, key), Some("0"), "{key}: {why}");
    }
    assert!(!net.read("http.log").contains("198.51.100.2"), "{why}");
    assert!(!net.read("tcp.log").contains("198.51.100.2"), "{why}");
    assert!(
        !sshd
            .lines()
            .any(|l| l.starts_with("Connection from") && l.contains("on 198.51.100.2 port 22")),
        "{why}"
    );
    assert!(
        !net.read("redis-2.during.log").contains("Accepted"),
        "{why}"
    );
    assert_eq!(net.read("redis-2.value").trim(), "", "{why}");
    // An allowed name that leads to the metadata endpoint is refused once the wrapper has
    // looked it up (the addresses are checked again).
    assert_eq!(line(&stdout, "python-metadata"), Some("errno13"), "{why}");
    // The gate's allow, then the floor's refusal of what the name led to.
    let meta = net.net_records("meta.test");
    assert!(
        meta.iter().any(|r| r["decision"] == "block"
            && r["reason"]
                .as_str()
                .is_some_and(|t| t.contains("169.254.169.254"))),
        "{meta:#?}\n{why}"
    );
    // A denied name does not exist for the tree.
    assert_eq!(line(&stdout, "node-denied"), Some("ENOTFOUND"), "{why}");
    assert!(!net.read("http.log").contains("/node-denied"), "{why}");

    // No question left the namespace: not the tree's, and not the wrapper's about a name it
    // refused (only the allowed ones were looked up, in the hosts file).
    assert_eq!(net.read("dns.log"), "", "{why}");

    // The audit log: each connection a `net` decision by name, with the process that made it.
    let by_name: Vec<serde_json::Value> = net
        .records()
        .into_iter()
        .filter(|r| r.pointer("/payload/tool_name").and_then(|v| v.as_str()) == Some("net"))
        .filter(|r| r.pointer("/payload/context/via").and_then(|v| v.as_str()) == Some("name"))
        .collect();
    let field = |r: &serde_json::Value, p: &str| {
        r.pointer(p)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default()
    };
    let allowed = |port: &str| {
        by_name
            .iter()
            .filter(|r| {
                field(r, "/payload/arguments/host") == "allowed.test"
                    && field(r, "/payload/arguments/port") == port
                    && field(r, "/decision") == "allow"
            })
            .map(|r| field(r, "/payload/context/process/argv/0"))
            .collect::<Vec<_>>()
    };
    assert_eq!(allowed("80"), ["node"], "{by_name:#?}");
    // create_connection, then the non-blocking IPv6 socket.
    assert_eq!(allowed("7000").len(), 2, "{by_name:#?}");
    assert!(
        allowed("7000").iter().all(|p| p.contains("python")),
        "{by_name:#?}"
    );
    // ssh itself, then git's ssh.
    assert_eq!(allowed("22"), ["ssh", "ssh"], "{by_name:#?}");
    assert_eq!(allowed("6379"), ["redis-cli"], "{by_name:#?}");
    for port in ["80", "7000", "22", "6379"] {
        let refused: Vec<_> = by_name
            .iter()
            .filter(|r| {
                field(r, "/payload/arguments/host") == "other.test"
                    && field(r, "/payload/arguments/port") == port
            })
            .collect();
        assert!(!refused.is_empty(), "other.test:{port}: {by_name:#?}");
        // One decision per process, though each client tried both of the name's addresses
        // (the second was refused without asking again).
        let mut pids: Vec<String> = refused
            .iter()
            .map(|r| field(r, "/payload/context/process/pid"))
            .collect();
        let all = pids.len();
        pids.sort();
        pids.dedup();
        assert_eq!(pids.len(), all, "other.test:{port}: {refused:#?}");
        for r in refused {
            assert_eq!(field(r, "/decision"), "block", "{r}");
            assert_eq!(field(r, "/source"), "floor", "{r}");
            assert!(r.pointer("/payload/context/process/pid").is_some(), "{r}");
        }
    }
    let denied = net.net_records("secret.exfil.test");
    assert!(
        denied
            .iter()
            .any(|r| field(r, "/payload/context/via") == "dns"
                && field(r, "/decision") == "block"
                && field(r, "/payload/context/process/argv/0") == "node"),
        "{denied:#?}\n{why}"
    );
}
