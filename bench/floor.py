#!/usr/bin/env python3
"""The floor's costs, each beside the same run without it, interleaved (A B A B ...).

  bench/floor.py AHP_WRAP [--runs N] [--build-runs M]

- start-up: `ahp-wrap --no-intercept -- date +%s%N` on the floor against `--floor off`, N
  times each: the time until the agent's first instruction (the clock `date` reads as it
  starts, against the clock before the wrapper was started), and the whole run until the
  wrapper has exited; prints min / median / max ms of each, and the medians of the paired
  differences.
- build: a small generated crate with a dependency (`serde_json`, from the warm registry
  cache: `cargo build --offline`, debug, from clean) in a workspace under the target
  directory, on the floor (the cache an overlay) against `--floor off`, M times each; prints
  the medians and the ratio.
- npm: `npm ci --offline` of a real project (tests/mcp's package.json and lock file: the MCP
  servers the tests run, 100-odd packages) from the warm npm cache, from clean, K times each
  (`--npm-runs K`, default 5; tests/mcp/setup.sh fills the cache).
Never part of `cargo test`. Give it the release binary (`cargo build --release`) on a quiet machine.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, cwd=None, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000


def started(cmd):
    """(ms until the agent read the clock, ms until the wrapper exited) of one run."""
    t = time.time_ns()
    out = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, check=True).stdout
    end = time.time_ns()
    return (int(out.split()[-1]) - t) / 1e6, (end - t) / 1e6


def triple(xs):
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    wrap = os.path.abspath(args[0])
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 200
    build_runs = int(args[args.index("--build-runs") + 1]) if "--build-runs" in args else 5
    npm_runs = int(args[args.index("--npm-runs") + 1]) if "--npm-runs" in args else 5
    base = [wrap, "--no-intercept", "--summary", "never"]

    agent = ["--", "date", "+%s%N"]
    on, off = [], []
    for _ in range(5):
        started(base + agent)
    for _ in range(runs):
        on.append(started(base + agent))
        off.append(started(base + ["--floor", "off"] + agent))
    print(f"start-up, {runs} pairs (ms, min / median / max)")
    for i, what in ((0, "until the agent's first instruction"), (1, "the whole run (until the wrapper exited)")):
        a, b = [x[i] for x in on], [x[i] for x in off]
        diffs = [x - y for x, y in zip(a, b)]
        print(f"  {what}")
        print(f"    floor on   {triple(a)}")
        print(f"    floor off  {triple(b)}")
        print(f"    added by the floor (median of pair differences): {statistics.median(diffs):+.2f} ms")

    if build_runs == 0:
        return
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "target"))
    root = tempfile.mkdtemp(prefix="floor-bench-", dir=os.path.abspath(target))
    try:
        crate = os.path.join(root, "ws")
        os.makedirs(os.path.join(crate, "src"))
        with open(os.path.join(crate, "Cargo.toml"), "w") as f:
            f.write('[package]\nname = "floorbench"\nversion = "0.1.0"\nedition = "2021"\n'
                    '[dependencies]\nserde_json = "1"\n')
        with open(os.path.join(crate, "src", "main.rs"), "w") as f:
            for i in range(60):
                f.write(f"mod m{i} {{ pub fn f(x: u64) -> u64 {{ (0..x).map(|v| v * {i} + 1).filter(|v| v % 3 == 0).sum() }} }}\n")
            f.write("fn main() { let mut s = 0;\n")
            for i in range(60):
                f.write(f"  s += m{i}::f({i});\n")
            f.write("  println!(\"{}\", serde_json::to_string(&s).unwrap()); }\n")
        b_on, b_off = [], []
        for i in range(build_runs + 1):
            for floor, out in (([], b_on), (["--floor", "off"], b_off)):
                shutil.rmtree(os.path.join(crate, "target"), ignore_errors=True)
                ms = timed(base + floor + ["--", "cargo", "build", "-q", "--offline"], cwd=crate)
                if i > 0:  # the first pair warms the caches
                    out.append(ms)
        print(f"build of a small crate from clean, {build_runs} pairs (wall ms, min / median / max)")
        print(f"  floor on   {triple(b_on)}")
        print(f"  floor off  {triple(b_off)}")
        print(f"  ratio of medians: {statistics.median(b_on) / statistics.median(b_off) * 100:.1f} %")

        project = os.path.join(root, "npm")
        os.makedirs(project)
        mcp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "mcp")
        for f in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(mcp, f), project)
        n_on, n_off = [], []
        for i in range(npm_runs + 1):
            for floor, out in (([], n_on), (["--floor", "off"], n_off)):
                shutil.rmtree(os.path.join(project, "node_modules"), ignore_errors=True)
                ms = timed(base + floor + ["--", "npm", "ci", "--offline", "--no-audit", "--no-fund"], cwd=project)
                if i > 0:
                    out.append(ms)
        if npm_runs:
            print(f"npm ci --offline of a real project from clean, {npm_runs} pairs (wall ms, min / median / max)")
            print(f"  floor on   {triple(n_on)}")
            print(f"  floor off  {triple(n_off)}")
            print(f"  ratio of medians: {statistics.median(n_on) / statistics.median(n_off) * 100:.1f} %")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
