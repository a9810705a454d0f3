#!/usr/bin/env python3
"""Reliability figures for ahp-wrap: hook storm, soak, harness fault matrix, parent and
harness death, audit tampering. Run by bench/reliability.sh (never part of `cargo test`).

usage: reliability.py AHP_WRAP [--storm N] [--soak N] [--write FILE...]

Prints a Markdown table; with --write, replaces the block between
<!-- reliability:begin --> and <!-- reliability:end --> in each FILE.

The same script is also the agent the wrapper runs (argv[1] == "__agent"): it then drives
the storm or the soak from inside the wrapped run, where the hook environment is.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAULT_HARNESS = os.path.join(ROOT, "tests", "support", "fault_harness.py")
BEGIN, END = "<!-- reliability:begin -->", "<!-- reliability:end -->"

BLOCK = {"event_type": "pre_action", "payload": {"action_type": "tool_call", "tool_name": "bash",
         "arguments": {"command": "rm -rf /"}}}
ALLOW = {"event_type": "pre_action", "payload": {"action_type": "tool_call", "tool_name": "bash",
         "arguments": {"command": "ls -la"}}}
NOTE = {"event_type": "post_action", "payload": {"action_type": "tool_call", "tool_name": "bash",
        "result": {"output": "x" * 200}}}


def pct(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def proc_status(pid):
    rss = 0
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds


# ---------------------------------------------------------------------------------------
# The agent side (runs inside the wrapper).

def hook_call(payload):
    """One real hook process; returns (exit code, seconds)."""
    start = time.perf_counter()
    p = subprocess.run([os.environ["AHP_WRAP_HOOK_BIN"], "hook", "generic", "pre_action"],
                       input=json.dumps(payload).encode(), capture_output=True)
    return p.returncode, time.perf_counter() - start, p.stdout


def agent_storm(n, out):
    parent = os.getppid()
    before = proc_status(parent)
    results = [None] * n
    go = threading.Event()

    def one(i):
        go.wait()
        results[i] = (i % 2 == 0,) + hook_call(BLOCK if i % 2 == 0 else ALLOW)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    after = proc_status(parent)
    json.dump({"results": [[b, c, s, o.decode(errors="replace")] for b, c, s, o in results],
               "before": before, "after": after}, open(out, "w"))


def wire_call(sock_path, token, payload):
    """One hook request spoken directly on the control socket (the `AHPW/1` framing of
    src/control/wire.rs), to soak the parent without paying a process per event."""
    body = json.dumps(payload).encode()
    cwd = b"/"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + sock_path[1:] if sock_path.startswith("@") else sock_path)
    s.sendall(f"AHPW/1 {token} generic pre_action {len(cwd)} {len(body)}\n".encode() + cwd + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1])


def agent_soak(n, out):
    parent = os.getppid()
    sock_path, token = os.environ["AHP_WRAP_SOCKET"], os.environ["AHP_WRAP_TOKEN"]
    samples = []
    wrong = 0
    warm = 2000
    for i in range(n + warm):
        if i == warm:
            samples.append((0, proc_status(parent)))
        kind = i % 3
        payload = (BLOCK, ALLOW, NOTE)[kind]
        code = wire_call(sock_path, token, payload)
        if kind == 0 and code == 0:
            wrong += 1
        if i >= warm and (i - warm + 1) % max(1, n // 4) == 0:
            samples.append((i - warm + 1, proc_status(parent)))
    json.dump({"samples": samples, "wrong": wrong}, open(out, "w"))


# ---------------------------------------------------------------------------------------
# The driver side.

def wrapped(ahp, args, agent, env=None, timeout=600, **kw):
    e = dict(os.environ)
    e.pop("AHP_WRAP_LOG", None)
    e.update(env or {})
    return subprocess.run([ahp] + args + ["--"] + agent, capture_output=True, env=e,
                          timeout=timeout, **kw)


def storm(ahp, tmp, n):
    out = os.path.join(tmp, "storm.json")
    audit = os.path.join(tmp, "storm-audit.jsonl")
    wrapped(ahp, ["--audit-log", audit, "--summary", "never"],
            [sys.executable, __file__, "__agent", "storm", str(n), out],
            env={"XDG_STATE_HOME": tmp})
    r = json.load(open(out))
    res = r["results"]
    answered = sum(1 for _, c, _, o in res if c in (0, 2) and o.strip().startswith("{"))
    blocked = sum(1 for b, c, _, _ in res if c == 2)
    should = sum(1 for b, *_ in res if b)
    leaked = sum(1 for b, c, _, _ in res if b and c == 0)
    refused = sum(1 for b, c, _, _ in res if not b and c != 0)
    lat = [s * 1000 for _, _, s, _ in res]
    (rss0, fd0), (rss1, fd1) = r["before"], r["after"]
    return [
        ("Hook storm", f"{n} concurrent hook processes (half `rm -rf /`, half `ls`), embedded policy, durable audit log",
         f"answered {answered}/{n}; blocked {blocked} (should block {should}); allowed-that-should-block **{leaked}**; "
         f"safe calls refused {refused}; latency p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms; "
         f"parent RSS {rss0 / 1024:.1f} → {rss1 / 1024:.1f} MiB, fds {fd0} → {fd1}"),
    ]


def soak(ahp, tmp, n):
    out = os.path.join(tmp, "soak.json")
    # On a tmpfs when there is one: fdatasync on this disk would make 100k events take
    # many minutes, and the soak is about the parent's memory, not the disk.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tmp
    audit = os.path.join(tempfile.mkdtemp(prefix="ahp-soak-", dir=shm), "soak-audit.jsonl")
    t0 = time.time()
    wrapped(ahp, ["--audit-log", audit, "--summary", "never"],
            [sys.executable, __file__, "__agent", "soak", str(n), out],
            env={"XDG_STATE_HOME": tmp}, timeout=1800)
    secs = time.time() - t0
    r = json.load(open(out))
    s = r["samples"]
    (_, (rss0, fd0)), (done, (rss1, fd1)) = s[0], s[-1]
    growth = (rss1 - rss0) / 1024 / (done / 100000)
    steps = ", ".join(f"{k:,}: {v[0] / 1024:.1f}" for k, v in s)
    verify = subprocess.run([ahp, "audit", "verify", audit], capture_output=True,
                            env={**os.environ, "XDG_STATE_HOME": tmp})
    shutil.rmtree(os.path.dirname(audit), ignore_errors=True)
    where = "on a tmpfs" if shm != tmp else "on disk"
    return [
        ("Soak", f"{done:,} events after 2,000 warm-up (1/3 blocked, 1/3 allowed, 1/3 post_action notifications), each a connection on the control socket, audit log {where}, {secs:.0f} s",
         f"RSS growth **{growth:+.2f} MiB per 100k events** (MiB at {steps}); fds {fd0} → {fd1}; "
         f"allowed-that-should-block {r['wrong']}; the {done + 2000:,}-record audit log verifies: exit {verify.returncode}"),
    ]


FAULTS = [
    ("ok", "control: answers allow"),
    ("block", "control: answers block"),
    ("die", "exits at the first event"),
    ("hang", "never answers (--timeout 1000)"),
    ("hang-handshake", "never answers the handshake"),
    ("garbage", "answers a line that is not JSON"),
    ("wrong-id", "answers with an id never sent"),
    ("numeric-id", "answers with a numeric id"),
    ("oversized", "answers 100 kB past --max-frame 65536"),
    ("unknown-decision", "decision \"maybe\""),
    ("rpc-error", "JSON-RPC error instead of a result"),
    ("defer-forever", "defers past the deadline"),
    ("escalate", "escalates, no terminal"),
]


def fault_matrix(ahp, tmp):
    cells = []
    allows = 0
    for mode, what in FAULTS:
        out = wrapped(ahp, ["--harness", f"stdio:{sys.executable} {FAULT_HARNESS} {mode}",
                            "--timeout", "1000", "--max-frame", "65536", "--summary", "never"],
                      ["sh", "-c", f"printf '%s' '{json.dumps(ALLOW)}' | \"$AHP_WRAP_HOOK_BIN\" hook generic pre_action"],
                      env={"XDG_STATE_HOME": tmp}, timeout=60)
        try:
            decision = json.loads(out.stdout.decode().splitlines()[-1])["decision"]
        except (IndexError, ValueError, KeyError):
            decision = f"exit {out.returncode}"
        if decision == "allow" and mode != "ok":
            allows += 1
        cells.append(f"{mode} → {decision}")
    return [("Harness fault matrix", f"{len(FAULTS)} harness behaviours (tests/support/fault_harness.py), one `ls` hook each, fail mode closed",
             "; ".join(cells) + f". **Faults answered allow: {allows}**")]


def wait_gone(pid, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def deaths(ahp, tmp):
    rows = []
    # Parent death: SIGKILL the wrapper mid-run; the agent must not survive it, and a hook
    # that can no longer reach the parent must block.
    marker = os.path.join(tmp, "agent.pid")
    agent = (f"echo $$ > {marker}; sleep 0.3; while :; do sleep 0.1; done")
    e = dict(os.environ)
    e["XDG_STATE_HOME"] = tmp
    w = subprocess.Popen([ahp, "--", "sh", "-c", agent], env=e, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    while not os.path.exists(marker) or not open(marker).read().strip():
        time.sleep(0.05)
    agent_pid = int(open(marker).read())
    env_of_agent = open(f"/proc/{agent_pid}/environ", "rb").read().split(b"\0")
    hook_env = {k.decode(): v.decode() for k, _, v in (x.partition(b"=") for x in env_of_agent) if k}
    os.kill(w.pid, signal.SIGKILL)
    w.wait()
    t0 = time.time()
    gone = wait_gone(agent_pid, 5)
    gone_ms = (time.time() - t0) * 1000
    hook = subprocess.run([hook_env.get("AHP_WRAP_HOOK_BIN", ahp), "hook", "generic", "pre_action"],
                          input=json.dumps(ALLOW).encode(), capture_output=True, env=hook_env)
    rows.append(("Parent death", "SIGKILL to the wrapper mid-run",
                 f"agent {'gone after %.0f ms' % gone_ms if gone else 'STILL RUNNING after 5 s'}; "
                 f"a hook call after it: exit {hook.returncode} ({'blocked' if hook.returncode == 2 else 'NOT blocked'})"))
    # Harness death: the harness exits at its first question; the run goes on, every hook
    # blocks, the agent's exit code is kept.
    script = (f"for i in 1 2 3; do printf '%s' '{json.dumps(ALLOW)}' | \"$AHP_WRAP_HOOK_BIN\" hook generic pre_action "
              f">/dev/null 2>&1; echo $?; done; exit 7")
    out = wrapped(ahp, ["--harness", f"stdio:{sys.executable} {FAULT_HARNESS} die", "--summary", "never"],
                  ["sh", "-c", script], env={"XDG_STATE_HOME": tmp}, timeout=60)
    codes = out.stdout.decode().split()
    rows.append(("Harness death", "the stdio harness exits at its first event; 3 hook calls follow",
                 f"hook exits {' '.join(codes)} (2 = blocked); wrapper exit {out.returncode} (the agent's 7)"))
    return rows


def tamper(ahp, tmp):
    key = os.path.join(tmp, "audit.key")
    open(key, "w").write("0123456789abcdef0123456789abcdef\n")
    base = os.path.join(tmp, "tamper-base.jsonl")
    state = os.path.join(tmp, "tamper-state")
    script = "; ".join([f"printf '%s' '{json.dumps(p)}' | \"$AHP_WRAP_HOOK_BIN\" hook generic pre_action >/dev/null 2>&1"
                        for p in (ALLOW, BLOCK, ALLOW, BLOCK, ALLOW)])
    wrapped(ahp, ["--audit-log", base, "--audit-key-file", key, "--summary", "never"], ["sh", "-c", script],
            env={"XDG_STATE_HOME": state})
    lines = open(base, "rb").read().splitlines(keepends=True)

    def verify(path, with_head=True):
        env = {**os.environ, "XDG_STATE_HOME": state if with_head else os.path.join(tmp, "nohead")}
        return subprocess.run([ahp, "audit", "verify", path, "--key-file", key], capture_output=True,
                              env=env).returncode

    def edited(i, f):
        v = json.loads(lines[i])
        f(v)
        return json.dumps(v, separators=(",", ":"), sort_keys=True).encode() + b"\n"

    mid = len(lines) // 2
    blocked = next(i for i, l in enumerate(lines) if json.loads(l)["decision"] == "block")
    last = lines[-1]
    kinds = {
        "intact (control)": lines,
        "block edited to allow": lines[:blocked] + [edited(blocked, lambda v: v.update(decision="allow"))]
        + lines[blocked + 1:],
        "line deleted": lines[:mid] + lines[mid + 1:],
        "lines swapped": lines[:mid] + [lines[mid + 1], lines[mid]] + lines[mid + 2:],
        "line duplicated": lines[:mid + 1] + [lines[mid]] + lines[mid + 1:],
        "forged line appended (no key)": lines + [edited(-1, lambda v: v.update(seq=v["seq"] + 1, prev=v["hash"]))],
        "garbage in the middle": lines[:mid] + [b"{\"agent\": \"x\"\n"] + lines[mid:],
        "last record cut in half": lines[:-1] + [last[:len(last) // 2]],
        "last record removed": lines[:-1],
    }
    cells = []
    caught = 0
    for name, content in kinds.items():
        path = os.path.join(tmp, "tamper-" + name.replace(" ", "-").replace("(", "").replace(")", "") + ".jsonl")
        open(path, "wb").write(b"".join(content))
        code = verify_in_place_of(ahp, path, base, key, state)
        code_elsewhere = verify(path, with_head=False)
        if name != "intact (control)" and code != 0:
            caught += 1
        cells.append(f"{name}: {code} ({code_elsewhere})")
    return [("Audit tampering", f"a keyed log of a real run ({len(lines)} records), each edit then `audit verify` (exit 0 intact, 1 tampered, 3 crash-truncated, 4 recovered damage; in brackets on a machine without the commit head)",
             "; ".join(cells) + f". **Caught {caught} of {len(kinds) - 1}**")]


def verify_in_place_of(ahp, path, base, key, state):
    """Verifies `path` where the base log was, so that the base's commit head (kept per log
    path) applies to it."""
    saved = base + ".saved"
    shutil.copyfile(base, saved)
    shutil.copyfile(path, base)
    try:
        return subprocess.run([ahp, "audit", "verify", base, "--key-file", key], capture_output=True,
                              env={**os.environ, "XDG_STATE_HOME": state}).returncode
    finally:
        shutil.move(saved, base)


def table(rows):
    out = ["| Figure | How | Result |", "|---|---|---|"]
    for name, how, result in rows:
        out.append(f"| {name} | {how} | {result} |")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "__agent":
        {"storm": agent_storm, "soak": agent_soak}[sys.argv[2]](int(sys.argv[3]), sys.argv[4])
        return
    args = sys.argv[1:]
    ahp = os.path.abspath(args.pop(0))
    n_storm, n_soak, write = 200, 100000, []
    while args:
        a = args.pop(0)
        if a == "--storm":
            n_storm = int(args.pop(0))
        elif a == "--soak":
            n_soak = int(args.pop(0))
        elif a == "--write":
            write += args
            args = []
    tmp = tempfile.mkdtemp(prefix="ahp-reliability-", dir=os.environ.get("AHP_BENCH_TMPDIR"))
    rows = []
    for name, step in [("storm", lambda: storm(ahp, tmp, n_storm)), ("faults", lambda: fault_matrix(ahp, tmp)),
                       ("deaths", lambda: deaths(ahp, tmp)), ("tamper", lambda: tamper(ahp, tmp)),
                       ("soak", lambda: soak(ahp, tmp, n_soak))]:
        t0 = time.time()
        rows += step()
        print(f"{name}: {time.time() - t0:.0f} s", file=sys.stderr)
    text = table(rows)
    machine = f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, `{os.path.basename(ahp)}` release build"
    text += f"\nMeasured by `bench/reliability.sh` on {machine}.\n"
    print(text)
    for f in write:
        s = open(f).read()
        if BEGIN not in s or END not in s:
            sys.exit(f"{f} has no {BEGIN} … {END} block")
        s = s[:s.index(BEGIN) + len(BEGIN)] + "\n" + text + s[s.index(END):]
        open(f, "w").write(s)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
