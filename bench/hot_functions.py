#!/usr/bin/env python3
"""Writes bench/hot-functions.txt: the functions of `ahp-wrap` a run executes, in link order.

    sudo python3 bench/hot_functions.py target/release/ahp-wrap [--out bench/hot-functions.txt]

install.sh and bench/run.sh link the wrapper with this list as lld's symbol ordering file, so
the code a run executes lies together at the start of `.text` instead of being spread over
the 13 MB of it. Why it matters: a page fault on an executable's code maps the whole 64 KiB
around it (the kernel's fault-around), so a run that touches a few bytes in most 64 KiB
windows of its code carries most of the executable in its resident memory. BENCHMARKS.md has
the figures.

How the list is found: with the block device's read-ahead set to 0 and the executable dropped
from the page cache, a page of it enters the cache only when some process executes or reads
it. The script runs the scenarios below, then asks the kernel which pages of the file are
cached (`mincore`): each such page of code brings the functions on it that valgrind's
callgrind saw run in the same scenarios, or all of them where it saw none (code valgrind does
not run the same way). Needs valgrind, and root (it sets the device's `read_ahead_kb` for the run, and puts it
back). Symbol names do not change when only the link order does, so the list can be taken
from a build linked with an older list. A name the code no longer has is skipped by the
linker; a new function missing from the list is only laid out elsewhere (slower to fault in,
never wrong).

Scenarios (what the benchmarks and a user's runs execute): `ahp-wrap -- true` (start-up and
exit, PATH shims, the floor); `--framework claude-code` with every sample hook of Claude Code
answered by the embedded policy, with and without a durable audit log; `--framework path`
running `cp` and `git` through their shims.
"""

import argparse
import ctypes
import ctypes.util
import mmap
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = mmap.PAGESIZE


def device_readahead(path):
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    sysdir = os.path.realpath(f"/sys/dev/block/{major}:{minor}")
    for d in (sysdir, os.path.dirname(sysdir)):  # a partition's queue is its disk's
        ra = os.path.join(d, "queue", "read_ahead_kb")
        if os.path.exists(ra):
            return ra
    sys.exit(f"hot_functions.py: no read_ahead_kb for the device of {path} ({sysdir})")


def drop_from_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages (a file just copied) are not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_pages(path):
    """The page indices of the file that are in the page cache."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            sys.exit("hot_functions.py: mmap failed")
        pages = (size + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(pages)
        if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
            sys.exit(f"hot_functions.py: mincore: {os.strerror(ctypes.get_errno())}")
        return {i for i in range(pages) if vec.raw[i] & 1}
    finally:
        os.close(fd)


def text_functions(path):
    """(file offset, size, mangled name) of each function in the executable's .text."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[1] == ".text":
            vaddr, offset = int(parts[3], 16), int(parts[4], 16)
            break
    else:
        sys.exit("hot_functions.py: no .text section")
    funcs = []
    out = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwW":
            a, s = int(p[0], 16), int(p[1], 16)
            funcs.append((a - vaddr + offset, s, p[3]))
    return funcs


def run_scenarios(wrap, prefix=()):
    hook = os.path.join(os.path.dirname(wrap), "ahp-wrap-hook")
    samples = os.path.join(ROOT, "shims", "claude-code", "samples")
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="ahp-hot-") as work:
        calls = " ; ".join(
            f"{hook} hook claude-code {name[:-5]} < {samples}/{name} > /dev/null"
            for name in sorted(os.listdir(samples)) if name.endswith(".json")
        )
        # A script, not `sh -c`: the shim adds its own arguments to the agent's command line.
        driver = os.path.join(work, "driver.sh")
        with open(driver, "w") as f:
            f.write(f"#!/bin/sh\nfor i in 1 2 3; do {calls}; done\n")
        os.chmod(driver, 0o755)
        with open(os.path.join(work, "small.txt"), "w") as f:
            f.write("x" * 1024)
        runs = [
            [wrap, "--", "true"],
            [wrap, "--framework", "claude-code", "--", driver],
            [wrap, "--framework", "claude-code", "--audit-log",
             os.path.join(work, "audit.jsonl"), "--", driver],
            [wrap, "--framework", "path", "--", "sh", "-c",
             "cp small.txt copy.txt && git --version"],
        ]
        for argv in runs:
            r = subprocess.run([*prefix, *argv], cwd=work, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit(f"hot_functions.py: {argv[1:4]} exited {r.returncode}: {r.stderr}")


def executed_functions(wrap):
    """The names of the functions the scenarios execute, each one, as valgrind's callgrind
    sees them (every process the wrapper forks too, up to its `exec`)."""
    with tempfile.TemporaryDirectory(prefix="ahp-hot-cg-") as out:
        prefix = ["valgrind", "--tool=callgrind", "--demangle=no", "-q",
                  f"--callgrind-out-file={out}/cg.%p"]
        run_scenarios(wrap, prefix)
        names = set()
        for f in os.listdir(out):
            with open(os.path.join(out, f), errors="replace") as cg:
                for line in cg:
                    if line.startswith(("fn=(", "cfn=(")) and ") " in line:
                        names.add(line.split(") ", 1)[1].strip())
        return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wrap", help="the ahp-wrap executable (its ahp-wrap-hook beside it)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "hot-functions.txt"))
    args = ap.parse_args()
    wrap = os.path.realpath(args.wrap)
    ra = device_readahead(wrap)
    with open(ra) as f:
        saved = f.read().strip()
    try:
        with open(ra, "w") as f:
            f.write("0")
        drop_from_cache(wrap)
        if len(cached_pages(wrap)) > 16:
            sys.exit("hot_functions.py: the executable stayed in the page cache (is it mapped?)")
        run_scenarios(wrap)
        pages = cached_pages(wrap)
    finally:
        with open(ra, "w") as f:
            f.write(saved)
    # A cached page of code is explained by the functions on it that callgrind saw run; one
    # with none of those (code valgrind does not run the same way: it lacks the Landlock and
    # pidfd system calls) brings every function on it.
    executed = executed_functions(wrap)
    on_page = {}
    for off, size, name in text_functions(wrap):
        for p in range(off // PAGE, (off + max(size, 1) - 1) // PAGE + 1):
            if p in pages:
                on_page.setdefault(p, []).append((off, name))
    hot = set()
    for funcs in on_page.values():
        seen = [f for f in funcs if f[1] in executed]
        hot.update(seen or funcs)
    hot = sorted(hot)
    with open(args.out, "w") as f:
        for _, name in hot:
            f.write(name + "\n")
    print(f"{len(hot)} functions on {len(pages)} cached pages -> {args.out}")


if __name__ == "__main__":
    main()
