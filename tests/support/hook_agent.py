#!/usr/bin/env python3
"""A small agent with Claude-style command hooks, for tests/shim_manifest.rs (stdlib only).

It stands for an agent nobody wrote a shim for in Rust: it reads the settings file given
with `--settings FILE` (its hooks: `hooks.<Event>: [{matcher?, hooks: [{type, command,
timeout (ms)}]}]`), fires `SessionStart`, then for each command of its script fires
`BeforeTool` (each registered hook command run through `sh -c`, the payload on stdin) and
runs the command unless a hook denied it: exit 2, or `{"decision": "deny"}` on stdout.

Usage: hook_agent.py [--settings FILE] SCRIPT.json
  SCRIPT.json: {"commands": ["touch x", ...]}
Prints `DENIED <reason>` for each denied command.
"""
import json
import subprocess
import sys


def fire(settings, event, payload):
    """("deny", reason) when a hook for `event` denied, else ("allow", "")."""
    for group in settings.get("hooks", {}).get(event, []):
        for hook in group["hooks"]:
            p = subprocess.run(["sh", "-c", hook["command"]], input=json.dumps(payload),
                               capture_output=True, text=True, timeout=hook["timeout"] / 1000)
            if p.returncode == 2:
                return "deny", p.stderr.strip()
            out = p.stdout.strip()
            if out and json.loads(out).get("decision") == "deny":
                return "deny", json.loads(out).get("reason", "")
    return "allow", ""


def main():
    args = sys.argv[1:]
    settings = {}
    if args[:1] == ["--settings"]:
        with open(args[1]) as f:
            settings = json.load(f)
        args = args[2:]
    with open(args[0]) as f:
        script = json.load(f)
    fire(settings, "SessionStart", {"session": "s-1"})
    for i, command in enumerate(script["commands"]):
        payload = {"session": "s-1", "tool": {"name": "shell", "id": i, "input": {"command": command}}}
        verdict, reason = fire(settings, "BeforeTool", payload)
        if verdict == "deny":
            print("DENIED", reason, flush=True)
        else:
            subprocess.run(["sh", "-c", command])


if __name__ == "__main__":
    main()
