#!/usr/bin/env python3
"""Drives a command on a fresh pseudo-terminal through steps, as a person would.

usage: pty_steps.py [--cols N] [--limit SECS] [--repeat-last N] WAIT KEYS [WAIT KEYS ...] -- command...

Starts the command as the session leader of a new pty, then for each step waits until WAIT
appears in the output since the previous step (an empty WAIT waits for nothing, `@SECS`
waits that many seconds after the previous step) and types
KEYS (Python escapes: '\\r' for Enter, '\\x03' for Ctrl-C, '\\x1b[B' for the down arrow). Answers the terminal's cursor
position queries (ESC[6n) as a terminal would. Echoes everything the command printed and
exits with its exit code (128+N for signal N; 99 when the limit is reached, after a line
that names the steps still waiting). With --repeat-last N, the last N steps run again, and
again, while the command is still running once every step has run (a quit whose keys the
command dropped, busy, is typed again rather than waited on until the limit).
"""
import os
import pty
import select
import struct
import sys
import time
import fcntl
import termios

args = sys.argv[1:]
cols, limit, repeat = 200, 60.0, 0
while args and args[0].startswith("--") and args[0] != "--":
    if args[0] == "--cols":
        cols = int(args[1])
    elif args[0] == "--limit":
        limit = float(args[1])
    elif args[0] == "--repeat-last":
        repeat = int(args[1])
    args = args[2:]
sep = args.index("--")
pairs = args[:sep]
cmd = args[sep + 1:]
steps = [(pairs[i].encode(), pairs[i + 1].encode().decode("unicode_escape").encode("latin-1"))
         for i in range(0, len(pairs), 2)]
again = steps[len(steps) - repeat:] if repeat else []
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
out = b""
mark = 0
last_step = time.time()


def ready(wait):
    """Whether a step may run: its text has appeared since the last step, or (`@SECS`) that
    many seconds have passed since it."""
    if wait.startswith(b"@"):
        return time.time() - last_step >= float(wait[1:])
    return wait in out[mark:]

deadline = time.time() + limit
status = None


def code(st):
    return os.waitstatus_to_exitcode(st) % 256 if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)


while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        if b"\x1b[6n" in data:
            os.write(fd, b"\x1b[1;1R")
        out += data
    if not steps and again:
        steps = list(again)
    if steps and ready(steps[0][0]):
        wait, keys = steps.pop(0)
        last_step = time.time()
        mark = out.index(wait, mark) + len(wait) if wait and not wait.startswith(b"@") else len(out)
        time.sleep(0.3)
        i = 0
        while i < len(keys):
            # An escape sequence (an arrow key: ESC [ B) goes in one write: split, its ESC
            # alone would read as the Escape key.
            j = i + 1
            if keys[i] == 0x1b and keys[i + 1:i + 2] == b"[":
                j = i + 2
                while j < len(keys) and not (0x40 <= keys[j] <= 0x7e):
                    j += 1
                j += 1
            try:
                os.write(fd, keys[i:j])
            except OSError:
                break  # the command has exited: nothing more to type
            i = j
            time.sleep(0.02)
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
        try:
            while True:
                r, _, _ = select.select([fd], [], [], 0.2)
                if not r:
                    break
                data = os.read(fd, 65536)
                if not data:
                    break
                out += data
        except OSError:
            pass
        break
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.flush()
if status is None:
    if time.time() >= deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        # Which step never came: what a failing test prints with the screen.
        left = [w.decode(errors="replace") for w, _ in steps]
        sys.stdout.write(f"\n[pty_steps: limit reached; still waiting for {left!r}]\n")
        sys.stdout.flush()
        sys.exit(99)
    _, status = os.waitpid(pid, 0)
sys.exit(code(status))
