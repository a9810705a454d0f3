#!/usr/bin/env python3
"""What a declared credential costs ([[floor.credentials]], docs/floor.md).

  bench/credentials.py AHP_WRAP [--requests N] [--repeat R] [--startup-vs OTHER --runs M]

In a user and network namespace of its own (as tests/floor_net/credentials.rs makes), an
HTTPS server (Python's, a certificate from a test CA the wrapper trusts through its
SSL_CERT_FILE) answers under two names at one address: `bound.test`, which GITHUB_TOKEN is
bound to (the proxy terminates TLS, puts the real token in the Authorization header and
forwards over TLS), and `tunnel.test`, which no credential names (a CONNECT tunnel, as every
connection is without credentials). A Python client under the wrapper sends N requests with
the placeholder in its Authorization header, through the proxy, each way:
- a new connection (CONNECT, TLS, one request) per request;
- one connection kept alive for all N;
and prints the median per request and what interception adds. R repeats alternate the ways.

--startup-vs OTHER times whole runs of `ahp-wrap -- true` on the floor, M pairs alternating
this binary and OTHER (an earlier build), with no credential declared (the wrapper's
GITHUB_TOKEN unset: the default policy's entries are skipped), and then this binary with
GITHUB_TOKEN set (the CA made, the bundle written). Never part of `cargo test`; give it
release binaries on a quiet machine.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REAL = "ghp_R3alT0kenValueNeverInTheTree0123456789"

SERVER = r'''
import http.server, os, socket, ssl, sys, threading
d = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"ok\n" if "ghp_R3al" in self.headers.get("Authorization", "") else b"placeholder\n"
        # One write, without Nagle: the answer's parts never wait on a delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
        self.wfile.write(head + body)
    def log_message(self, *a):
        pass
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ctx.load_cert_chain(os.path.join(d, "srv.pem"), os.path.join(d, "srv.key"))
s = http.server.ThreadingHTTPServer(("198.51.100.1", 443), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
open(os.path.join(d, "ready"), "w").close()
s.serve_forever()
'''

CLIENT = r'''
import http.client, os, ssl, statistics, sys, time
host, n, keep = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "keep"
ph, pp = os.environ["HTTPS_PROXY"].split("//")[1].rsplit(":", 1)
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
hdr = {"Authorization": "Bearer " + os.environ["GITHUB_TOKEN"]}
def conn():
    c = http.client.HTTPSConnection(ph, int(pp), context=ctx)
    c.set_tunnel(host, 443)
    return c
times, c, bodies = [], None, set()
for i in range(n + 5):
    t = time.perf_counter()
    if c is None or not keep:
        c = conn()
    c.request("GET", "/small", headers=hdr)
    r = c.getresponse()
    bodies.add(r.read())
    if not keep:
        c.close()
    if i >= 5:
        times.append((time.perf_counter() - t) * 1000)
print(f"{statistics.median(times):.3f} {sorted(bodies)}")
'''

SETUP = r'''
set -e
ip link set lo up
ip addr add 198.51.100.1/32 dev lo
mount --bind "$D/hosts" /etc/hosts
cd "$D"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
  -out ca.pem -days 2 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key \
  -out srv.csr -subj /CN=bound.test 2>/dev/null
printf 'subjectAltName=DNS:bound.test,DNS:tunnel.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n' > ext.cnf
openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 \
  -extfile ext.cnf 2>/dev/null
python3 server.py "$D" </dev/null >/dev/null 2>&1 &
server=$!
trap 'kill $server' EXIT
for i in $(seq 100); do [ -e ready ] && break; sleep 0.05; done
export SSL_CERT_FILE="$D/ca.pem"
set +e
sh "$D/steps.sh"
'''

POLICY = '''version = 1
[floor.net]
allow = ["bound.test", "tunnel.test"]
unknown = "block"

[[floor.credentials]]
env = "GITHUB_TOKEN"
hosts = ["bound.test"]
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wrap")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--startup-vs")
    ap.add_argument("--runs", type=int, default=100)
    a = ap.parse_args()
    wrap = os.path.abspath(a.wrap)
    with tempfile.TemporaryDirectory(prefix="bench-credentials-", dir="/var/tmp") as d:
        files = {
            "server.py": SERVER,
            "client.py": CLIENT,
            "policy.toml": POLICY,
            "hosts": "127.0.0.1 localhost\n198.51.100.1 bound.test tunnel.test\n",
        }
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        os.makedirs(os.path.join(d, "ws"))
        steps = []
        run = f'"{wrap}" --no-intercept --summary never --audit-log none --policy "$D/policy.toml" --'
        for r in range(a.repeat):
            for host in ["tunnel.test", "bound.test"]:
                for keep in ["new", "keep"]:
                    steps.append(
                        f'echo "{host} {keep} $(cd "$D/ws" && {run} python3 "$D/client.py" {host} {a.requests} {keep})"'
                    )
        with open(os.path.join(d, "steps.sh"), "w") as f:
            f.write("\n".join(steps) + "\n")
        env = dict(os.environ, D=d, GITHUB_TOKEN=REAL)
        for v in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]:
            env.pop(v, None)
        out = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--net", "--mount", "--", "sh", "-c", SETUP],
            env=env, capture_output=True, text=True, timeout=3600,
        )
        got = {}
        for line in out.stdout.splitlines():
            parts = line.split(" ", 3)
            if len(parts) < 3:
                continue
            host, keep, ms = parts[0], parts[1], parts[2]
            try:
                got.setdefault((host, keep), []).append(float(ms))
            except ValueError:
                print("failed:", line, out.stderr[-2000:], file=sys.stderr)
                sys.exit(1)
            if host == "bound.test" and "ok" not in parts[3]:
                print("the token was not injected:", line, file=sys.stderr)
                sys.exit(1)
        if len(got) < 4:
            print(out.stdout, out.stderr[-3000:], file=sys.stderr)
            sys.exit(1)
        print(f"{a.requests} requests x {a.repeat} repeats, median per request (ms):")
        for keep, what in [("new", "a new connection each"), ("keep", "one kept-alive connection")]:
            t = statistics.median(got[("tunnel.test", keep)])
            b = statistics.median(got[("bound.test", keep)])
            print(f"  {what}: tunnel {t:.3f}, intercepted {b:.3f}, added {b - t:+.3f}")
        if a.startup_vs:
            startup(wrap, os.path.abspath(a.startup_vs), a.runs, d)


def startup(wrap, other, runs, d):
    """Whole runs of `ahp-wrap -- true` in an empty workspace, the default policy: OTHER (an
    earlier build), this binary, and this binary with GITHUB_TOKEN set (the default policy's
    entry: the CA made, the bundle written). (A policy file of one's own costs its loading at
    start, for every build alike: not used here.)"""
    def once(binary, token, policy):
        env = dict(os.environ)
        env.pop("GITHUB_TOKEN", None)
        if token:
            env["GITHUB_TOKEN"] = REAL
        args = [binary, "--no-intercept", "--summary", "never", "--audit-log", "none"]
        if policy:
            args += ["--policy", policy]
        t = time.perf_counter()
        subprocess.run(args + ["--", "true"], env=env, cwd=os.path.join(d, "ws"), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return (time.perf_counter() - t) * 1000
    ways = {
        "earlier build": (other, False, None),
        "this build": (wrap, False, None),
        "this build, GITHUB_TOKEN set": (wrap, True, None),
    }
    rows = {k: [] for k in ways}
    for _ in range(5):
        for (b, t, p) in ways.values():
            once(b, t, p)
    for _ in range(runs):
        for k, (b, t, p) in ways.items():
            rows[k].append(once(b, t, p))
    print(f"whole runs of `ahp-wrap -- true` on the floor, an empty workspace, {runs} rounds, median (ms):")
    for k, v in rows.items():
        print(f"  {k}: {statistics.median(v):.2f}")


if __name__ == "__main__":
    main()
