#!/usr/bin/env python3
"""A full-screen agent on a terminal, as an agent's TUI is (stdlib only): the terminal in raw
mode, every key read as it is typed, its screen drawn whole again on SIGWINCH.

usage: raw_agent.py [--alt] DIR

Draws its screen (on the alternate screen with `--alt`) and reads keys: each is appended to
DIR/keys and shown on the `typed:` line; `!` runs a tool call through the wrapper's generic
hook in the background (its exit code in DIR/hook_rc, then DIR/ran when it was allowed), as
an agent with no dialog of its own would; `q` ends it. Its pid is in DIR/pid.
"""
import json
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import tty

args = sys.argv[1:]
alt = args[:1] == ["--alt"]
if alt:
    args = args[1:]
out_dir = args[0]
fd = sys.stdin.fileno()
typed = []
hook = ["not run"]
lock = threading.Lock()


def draw():
    with lock:
        lines = [
            "RAW-AGENT " + ("alternate" if alt else "main") + " screen",
            "typed: " + "".join(typed),
            "hook: " + hook[0],
            "END-OF-SCREEN",
        ]
        os.write(1, ("\x1b[H\x1b[2J" + "\r\n".join(lines)).encode())


def run_hook():
    payload = json.dumps({"event_type": "pre_action", "payload": {
        "action_type": "tool_call", "tool_name": "bash",
        "arguments": {"command": "echo from the agent"}}})
    p = subprocess.run([os.environ["AHP_WRAP_BIN"], "hook", "generic", "pre_action"],
                       input=payload.encode(), capture_output=True)
    with open(os.path.join(out_dir, "hook_rc"), "w") as f:
        f.write(str(p.returncode))
    if p.returncode == 0:
        open(os.path.join(out_dir, "ran"), "w").close()
    hook[0] = "exit %d" % p.returncode
    draw()


with open(os.path.join(out_dir, "pid"), "w") as f:
    f.write(str(os.getpid()))
saved = termios.tcgetattr(fd)
tty.setraw(fd)
if alt:
    os.write(1, b"\x1b[?1049h")
signal.signal(signal.SIGWINCH, lambda *_: draw())
draw()
try:
    while True:
        try:
            r, _, _ = select.select([fd], [], [])
        except InterruptedError:
            continue
        if not r:
            continue
        data = os.read(fd, 64)
        if not data:
            break
        with open(os.path.join(out_dir, "keys"), "ab") as f:
            f.write(data)
        text = data.decode("latin-1")
        if "q" in text:
            break
        with lock:
            typed.extend(c if c.isprintable() else "<%02x>" % ord(c) for c in text)
        if "!" in text:
            threading.Thread(target=run_hook, daemon=True).start()
        draw()
finally:
    if alt:
        os.write(1, b"\x1b[?1049l")
    termios.tcsetattr(fd, termios.TCSANOW, saved)
    os.write(1, b"\r\nRAW-AGENT done\r\n")
