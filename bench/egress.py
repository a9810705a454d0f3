#!/usr/bin/env python3
"""The network floor's costs: a new connection and a bulk transfer through the egress proxy,
beside the same without the floor.

  bench/egress.py AHP_WRAP [--conns N] [--mib M] [--repeat R]

A web server on this machine's loopback serves a small and a large body. A client under the
wrapper then, N times, opens a connection, fetches the small body and closes:
- floor off, direct (the reference);
- floor on, through the proxy (a CONNECT tunnel: the gate's decision, the asking process
  looked up, the upstream connection);
- floor on, direct to loopback (carried out by the connect bridge);
and, for the throughput, curl fetches the large body (M MiB) R times per way (a client that
spends little CPU of its own, as a download tool does). Prints the median per connection, the
added median, and the median MiB/s. Never part of `cargo test`; give it the release
binary on a quiet machine.
"""
import http.server
import statistics
import os
import subprocess
import sys
import tempfile
import threading

CLIENT = r'''
import os, socket, statistics, sys, time
port, conns, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def open_conn():
    if mode == "proxy":
        p = os.environ["HTTP_PROXY"].rsplit(":", 1)
        s = socket.create_connection((p[0].split("//")[1], int(p[1])))
        s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port))
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        assert head.startswith(b"HTTP/1.1 200"), head
        return s
    return socket.create_connection(("127.0.0.1", port))
def fetch(path):
    s = open_conn()
    s.sendall(b"GET " + path + b" HTTP/1.0\r\n\r\n")
    n = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    s.close()
    return n
times = []
for _ in range(conns):
    t = time.perf_counter()
    fetch(b"/small")
    times.append((time.perf_counter() - t) * 1000)
print(f"{statistics.median(times):.3f}")
'''


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    wrap = os.path.abspath(args[0])
    conns = int(args[args.index("--conns") + 1]) if "--conns" in args else 300
    mib = int(args[args.index("--mib") + 1]) if "--mib" in args else 512
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 5
    large = b"x" * (mib << 20)

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            body = large if self.path == "/large" else b"hello\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CLIENT)
        client = f.name
    base = [wrap, "--no-intercept", "--summary", "never"]
    results = {}
    for name, floor, mode in [
        ("floor off, direct", ["--floor", "off"], "direct"),
        ("floor on, through the proxy", [], "proxy"),
        # (A port of this machine's loopback is reached only where the run names it.)
        ("floor on, direct to loopback (bridged)", ["--loopback-port", str(port)], "direct"),
    ]:
        out = subprocess.run(base + floor + ["--", sys.executable, client, str(port), str(conns), mode],
                             capture_output=True, text=True, check=True)
        per = float(out.stdout.split()[0])
        proxy = '-p -x "$HTTP_PROXY"' if mode == "proxy" else "--noproxy '*'"
        curl = f"curl -s -o /dev/null -w '%{{speed_download}}\\n' {proxy} http://127.0.0.1:{port}/large"
        rates = []
        for _ in range(repeat):
            out = subprocess.run(base + floor + ["--", "sh", "-c", curl], capture_output=True, text=True, check=True)
            rates.append(float(out.stdout.split()[0]) / (1 << 20))
        results[name] = (per, statistics.median(rates))
    os.unlink(client)
    ref_per, ref_rate = results["floor off, direct"]
    print(f"{conns} connections each (open, GET a 6-byte body, close); {repeat} curl downloads of {mib} MiB each")
    for name, (per, rate) in results.items():
        print(f"  {name:40} {per:7.3f} ms/connection ({per - ref_per:+.3f})  {rate:8.1f} MiB/s ({rate / ref_rate * 100:5.1f} %)")


if __name__ == "__main__":
    main()
