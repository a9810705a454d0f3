#!/usr/bin/env python3
"""Connections by name on the floor: what carrying a connection to a name adds over a direct
connection to the same server, and how long the tree's resolver takes to answer.

    sudo python3 bench/names.py target/release/ahp-wrap [--conns N] [--queries Q]

Runs in a network and mount namespace of its own (as the tests do): a small server (accept,
read a line, answer it, close) on 198.51.100.1:7000, which the namespace's hosts file names
`bench.test`.
- Connections: the same client (resolve the name once, then N times connect, send a line,
  read the answer, close) runs directly in the namespace (the hosts file gives the server's
  address) and under the wrapper on the floor (the tree's resolver gives the name an address
  of the run's, and each connection is decided by name and carried out), alternating in
  rounds. Prints the median and p99 of each and what carrying adds.
- Resolver: a process of the tree sends Q A questions to the tree's resolver (a UDP
  socket connected to port 53 of its loopback) and times each answer: half for one name
  (answered from the run's table), half each for a new name (given an address then). The
  asking process runs on CPU 0, the wrapper on CPU 0 and then on CPU 1; the baseline is the
  same questions sent back by a UDP echo server on the same CPU as the resolver was (on a
  virtual machine, waking an idle CPU for each answer costs far more than answering).
Never part of the test suite.
"""
import os, statistics, subprocess, sys, tempfile, time

SERVER = r'''
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.51.100.1", 7000)); s.listen(512)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.makefile("rb").readline())
    c.close()
'''

CLIENT = r'''
import socket, sys, time
host, n = sys.argv[1], int(sys.argv[2])
addr = socket.getaddrinfo(host, 7000, socket.AF_INET, socket.SOCK_STREAM)[0][4]
out = []
for i in range(n):
    t = time.perf_counter_ns()
    c = socket.create_connection(addr)
    c.sendall(b"ping\n")
    got = c.recv(16)
    c.close()
    out.append(time.perf_counter_ns() - t)
    assert got == b"ping\n", got
print(addr[0], " ".join(map(str, out)), flush=True)
'''

QUERIES = r'''
import os, socket, struct, sys, time
q, port, cpu = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
os.sched_setaffinity(0, {cpu})
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("127.0.0.1", port))
def ask(name, i):
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    msg = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 1, 1)
    t = time.perf_counter_ns(); s.send(msg); r = s.recv(512); d = time.perf_counter_ns() - t
    assert r[:2] == msg[:2] and (port != 53 or r[3] & 0xF == 0), r
    return d
known = [ask("bench.test", i) for i in range(q // 2)]
new = [ask("n%d.bench.test" % i, i) for i in range(q // 2)]
print(" ".join(map(str, known)), "|", " ".join(map(str, new)), flush=True)
'''

# The baseline: a UDP server that sends each datagram back (another process, no wrapper).
ECHO = r'''
import os, socket, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 5399))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(512); s.sendto(d, a)
'''

POLICY = 'version = 1\n[floor.net]\nallow = ["bench.test", "*.bench.test"]\nunknown = "block"\n'


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def ms(ns):
    return ns / 1e6


def inside(wrap, conns, queries):
    tmp = tempfile.mkdtemp(prefix="names-bench-")
    for name, text in [("hosts", "127.0.0.1 localhost\n198.51.100.1 bench.test\n"),
                       ("resolv.conf", "nameserver 198.51.100.53\n"),
                       ("policy.toml", POLICY)]:
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "198.51.100.1/32", "dev", "lo"], check=True)
    for f in ["hosts", "resolv.conf"]:
        subprocess.run(["mount", "--bind", os.path.join(tmp, f), "/etc/" + f], check=True)
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    under = [wrap, "--no-intercept", "--summary", "never", "-q", "--policy",
             os.path.join(tmp, "policy.toml"), "--"]
    direct, carried, seen = [], [], set()
    rounds = 5
    for _ in range(rounds):
        for cmd, into in [([], direct), (under, carried)]:
            out = subprocess.run(cmd + [sys.executable, "-c", CLIENT, "bench.test",
                                        str(conns // rounds)],
                                 capture_output=True, text=True, check=True).stdout.split()
            seen.add(out[0])
            into.extend(int(x) for x in out[1:])
    # The resolver's thread runs on the wrapper's CPU, the asking process on CPU 0: the same
    # CPU, then the other one (each answer then wakes an idle CPU), each beside a UDP echo
    # server placed the same way.
    resolver = {}
    for where, cpu in [("same CPU", "0"), ("other CPU", "1")]:
        out = subprocess.run(["taskset", "-c", cpu] + under +
                             [sys.executable, "-c", QUERIES, str(queries), "53", "0"],
                             capture_output=True, text=True, check=True).stdout
        known, new = out.split("|")
        echo = subprocess.Popen([sys.executable, "-c", ECHO, cpu], stdout=subprocess.PIPE, text=True)
        assert echo.stdout.readline().strip() == "ready"
        base = subprocess.run([sys.executable, "-c", QUERIES, str(queries), "5399", "0"],
                              capture_output=True, text=True, check=True).stdout
        echo.kill()
        resolver[where] = ([int(x) for x in known.split()], [int(x) for x in new.split()],
                           [int(x) for x in base.replace("|", " ").split()])
    server.kill()
    print(f"addresses the client connected to: {sorted(seen)}")
    print(f"connections: {len(direct)} direct, {len(carried)} carried by name")
    for label, v in [("direct", direct), ("carried by name", carried)]:
        print(f"  {label:>16}: p50 {ms(statistics.median(v)):.3f} ms, p99 {ms(pct(v, 99)):.3f} ms")
    print(f"  carrying adds: p50 {ms(statistics.median(carried) - statistics.median(direct)):+.3f} ms,"
          f" p99 {ms(pct(carried, 99) - pct(direct, 99)):+.3f} ms")
    for where, (known, new, base) in resolver.items():
        print(f"resolver, asked from the {where}:")
        for label, v in [("a name it gave out", known), ("a new name", new),
                         ("baseline: a UDP echo server", base)]:
            print(f"  {label:>28}: p50 {statistics.median(v) / 1e3:.1f} µs,"
                  f" p99 {pct(v, 99) / 1e3:.1f} µs ({len(v)} questions)")


def main():
    wrap = os.path.abspath(sys.argv[1])
    conns = int(sys.argv[sys.argv.index("--conns") + 1]) if "--conns" in sys.argv else 1000
    queries = int(sys.argv[sys.argv.index("--queries") + 1]) if "--queries" in sys.argv else 2000
    if os.environ.get("NAMES_BENCH_INSIDE") == "1":
        return inside(wrap, conns, queries)
    env = dict(os.environ, NAMES_BENCH_INSIDE="1")
    for v in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]:
        env.pop(v, None)
    sys.exit(subprocess.run(["unshare", "--net", "--mount", "--", sys.executable,
                             os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode)


if __name__ == "__main__":
    main()
