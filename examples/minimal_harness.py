#!/usr/bin/env python3
"""A minimal AHP harness: newline-delimited JSON-RPC 2.0 on stdin/stdout.

    ahp-wrap --harness 'stdio:python3 examples/minimal_harness.py' -- <agent> ...

It blocks shell commands that mention "rm -rf", explicitly allows "git status", and has no
opinion on anything else (so the agent's own permission prompts still apply). Logs go to
stderr, which ahp-wrap copies into its own log.
"""
import json
import sys


def decide(event):
    payload = event.get("payload") or {}
    command = json.dumps((payload.get("arguments") or {}))
    if event.get("event_type") == "pre_action" and "rm -rf" in command:
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
