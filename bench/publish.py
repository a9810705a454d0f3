#!/usr/bin/env python3
"""The tree's listeners published on the user's loopback: what a published connection adds
over a direct one, and how long a new listener takes to be published.

    python3 bench/publish.py target/release/ahp-wrap [--conns N] [--listens K]

- Connections: the same small server (accept, read a line, answer it, close) runs once under
  the wrapper on the floor (its port published) and once directly on this machine; a client
  here connects, sends a line, reads the answer and closes, alternating between the two, N
  times each. Prints the median and p99 of each and what publishing adds.
- Listens: a process of the tree binds a port and times its own listen(2), K times. The call
  returns once the port is published (the wrapper answers it then), so its duration is the
  time to publish; the same loop without the wrapper is the baseline.
Never part of the test suite.
"""
import os, socket, statistics, subprocess, sys, tempfile, time

SERVER = r'''
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(128)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    f = c.makefile("rb")
    line = f.readline()
    c.sendall(line)
    c.close()
'''

LISTENS = r'''
import socket, sys, time
k = int(sys.argv[1]); out = []
for i in range(k):
    s = socket.socket(); s.bind(("127.0.0.1", 0))
    t = time.perf_counter_ns(); s.listen(16); out.append(time.perf_counter_ns() - t)
    s.close(); time.sleep(0.25)
print(" ".join(map(str, out)), flush=True)
'''


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def one(port):
    t = time.perf_counter_ns()
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"ping\n")
    got = c.recv(16)
    c.close()
    assert got == b"ping\n", got
    return time.perf_counter_ns() - t


def main():
    wrap = os.path.abspath(sys.argv[1])
    conns = int(sys.argv[sys.argv.index("--conns") + 1]) if "--conns" in sys.argv else 500
    listens = int(sys.argv[sys.argv.index("--listens") + 1]) if "--listens" in sys.argv else 20
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as d:
        srv = os.path.join(d, "server.py")
        open(srv, "w").write(SERVER)
        inside = subprocess.Popen([wrap, "-q", "--no-intercept", "--", "python3", srv],
                                  stdout=subprocess.PIPE, text=True, env=env, cwd=d)
        direct = subprocess.Popen(["python3", srv], stdout=subprocess.PIPE, text=True, cwd=d)
        pin, pdi = int(inside.stdout.readline()), int(direct.stdout.readline())
        for _ in range(20):
            one(pin), one(pdi)
        a, b = [], []
        for i in range(conns):
            if i % 2:
                a.append(one(pin)); b.append(one(pdi))
            else:
                b.append(one(pdi)); a.append(one(pin))
        inside.terminate(); direct.terminate(); inside.wait(); direct.wait()
        ms = lambda ns: ns / 1e6
        print(f"connection, published: p50 {ms(pct(a, 50)):.3f} ms, p99 {ms(pct(a, 99)):.3f} ms")
        print(f"connection, direct:    p50 {ms(pct(b, 50)):.3f} ms, p99 {ms(pct(b, 99)):.3f} ms")
        print(f"added: p50 +{ms(pct(a, 50) - pct(b, 50)):.3f} ms ({conns} each, alternated)")
        lst = os.path.join(d, "listens.py")
        open(lst, "w").write(LISTENS)
        run = lambda argv: [int(x) for x in subprocess.run(argv, stdout=subprocess.PIPE, text=True,
                                                          check=True, cwd=d).stdout.split()]
        on = run([wrap, "-q", "--no-intercept", "--", "python3", lst, str(listens)])
        off = run(["python3", lst, str(listens)])
        print(f"listen(2) until published: p50 {ms(pct(on, 50)):.3f} ms, max {ms(max(on)):.3f} ms "
              f"(without the wrapper: p50 {ms(pct(off, 50)):.3f} ms; {listens} listens)")


if __name__ == "__main__":
    main()
