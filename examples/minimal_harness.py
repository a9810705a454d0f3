#!/usr/bin/env python3
"""A minimal AHP harness: newline-delimited JSON-RPC 2.0 on stdin/stdout.

    ahp-wrap --harness 'stdio:python3 examples/minimal_harness.py' -- <agent> ...

It blocks a recursive forced delete (`rm -rf`, `rm -r -f`, `rm --recursive --force`, whether
the command comes as a shell line from a hooked agent or as an argv from a PATH shim),
explicitly allows "git status", and has no opinion on anything else (so the agent's own permission prompts still apply). Logs go to
stderr, which ahp-wrap copies into its own log.
"""
import json
import re
import sys

# `rm` with both -r (or -R, --recursive) and -f (or --force), in any order or spelling.
RECURSIVE = re.compile(r"(^|\s)-[a-zA-Z]*[rR]|--recursive")
FORCE = re.compile(r"(^|\s)-[a-zA-Z]*f|--force")


def command_text(arguments):
    """The command as one line: a shell tool sends a string, a PATH shim an argv array."""
    command = arguments.get("command")
    if isinstance(command, list):
        return " ".join(str(word) for word in command)
    if isinstance(command, str):
        return command
    return json.dumps(arguments)


def recursive_delete(command):
    for part in re.split(r"[;&|\n]+", command):
        words = part.split()
        if "rm" in [w.rsplit("/", 1)[-1] for w in words[:3]]:
            rest = " " + " ".join(words)
            if RECURSIVE.search(rest) and FORCE.search(rest):
                return True
    return False


def decide(event):
    payload = event.get("payload") or {}
    command = command_text(payload.get("arguments") or {})
    if event.get("event_type") == "pre_action" and recursive_delete(command):
        return {"decision": "block", "reason": "minimal harness: no recursive deletes"}
    if event.get("event_type") == "pre_action" and "git status" in command:
        return {"decision": "allow", "metadata": {"explicit": True}}
    return {"decision": "allow"}


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "ahp/handshake":
        result = {
            "protocol_version": "2.4",
            "harness_info": {"name": "minimal-harness", "version": "1.0", "capabilities": ["pre_action", "batch"]},
            "config": {"timeout_ms": 5000, "batch_size": 50, "max_depth": 4},
        }
    elif method == "ahp/event":
        result = decide(msg["params"])
    elif method == "ahp/batch":
        result = {"decisions": [decide(e) for e in msg["params"]["events"]]}
    elif method == "ahp/query":
        result = {"answer": None, "reason": "queries are not supported"}
    else:
        result = None
    print(f"minimal-harness: {method} {msg.get('params', {}).get('event_type', '')}", file=sys.stderr)
    if rid is not None:
        if result is None:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
