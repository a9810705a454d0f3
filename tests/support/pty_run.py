#!/usr/bin/env python3
"""Runs a command on a fresh pseudo-terminal, as a person at a terminal would.

usage: pty_run.py WAIT_FOR KEYS -- command...

Starts the command as the session leader of a new pty (so it is the terminal's foreground
process group), waits until WAIT_FOR appears in its output, types KEYS (Python escapes,
e.g. '\\x03' for Ctrl-C), then echoes everything the command printed and exits with its exit
code (128+N for signal N).
"""
import os
import pty
import select
import sys
import time

wait_for = sys.argv[1].encode()
keys = sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
cmd = sys.argv[sys.argv.index("--") + 1:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
out = b""
sent = False
deadline = time.time() + 30
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    if not sent and wait_for in out:
        time.sleep(0.2)
        os.write(fd, keys)
        sent = True
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        try:
            while True:
                r, _, _ = select.select([fd], [], [], 0.1)
                if not r:
                    break
                data = os.read(fd, 4096)
                if not data:
                    break
                out += data
        except OSError:
            pass
        sys.stdout.write(out.decode(errors="replace"))
        sys.exit(os.waitstatus_to_exitcode(status) % 256 if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
sys.stdout.write(out.decode(errors="replace"))
if time.time() >= deadline:
    os.kill(pid, 9)
    sys.exit(99)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) % 256 if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
