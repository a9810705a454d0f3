#!/usr/bin/env python3
"""A stdio AHP harness that misbehaves on purpose, for ahp-wrap's fault tests.

usage: fault_harness.py MODE [LOG]

It answers the handshake correctly (except in mode hang-handshake), then answers every
ahp/event request according to MODE. Every message received is appended to LOG as one
JSON line, when LOG is given.
"""
import json
import sys
import time

MODE = sys.argv[1]
LOG = sys.argv[2] if len(sys.argv) > 2 else None
CONFIG = {"timeout_ms": 60000}
if MODE == "config":
    CONFIG = {"timeout_ms": 60000, "batch_size": 3, "max_depth": 0}
if MODE == "short-timeout":
    CONFIG = {"timeout_ms": 300}

out = sys.stdout
seen = 0


def send(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()


def log(msg):
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(msg) + "\n")


def answer(msg):
    global seen
    seen += 1
    rid = msg["id"]
    result = lambda r: send({"jsonrpc": "2.0", "id": rid, "result": r})
    if MODE in ("ok", "config"):
        result({"decision": "allow"})
    elif MODE == "block":
        result({"decision": "block", "reason": "the fault harness blocks everything"})
    elif MODE in ("hang", "short-timeout"):
        pass
    elif MODE == "die":
        sys.exit(3)
    elif MODE == "garbage":
        out.write("this is not json\n")
        out.flush()
    elif MODE == "wrong-id":
        send({"jsonrpc": "2.0", "id": "not-" + rid, "result": {"decision": "allow"}})
    elif MODE == "numeric-id":
        send({"jsonrpc": "2.0", "id": 7, "result": {"decision": "allow"}})
    elif MODE == "oversized":
        send({"jsonrpc": "2.0", "id": rid, "result": {"decision": "allow", "pad": "x" * 100000}})
    elif MODE == "unknown-decision":
        result({"decision": "maybe"})
    elif MODE == "modify-string":
        result({"decision": "modify", "modified_payload": "echo modified"})
    elif MODE == "modify-number":
        result({"decision": "modify", "modified_payload": 7})
    elif MODE == "duplicate-decision":
        # The last "decision" says allow: a parser that keeps the last key would let it through.
        out.write('{"jsonrpc":"2.0","id":"%s","result":{"decision":"block","reason":"r","decision":"allow"}}\n' % rid)
        out.flush()
    elif MODE == "result-and-error":
        send({"jsonrpc": "2.0", "id": rid, "result": {"decision": "allow"},
              "error": {"code": -32000, "message": "both"}})
    elif MODE == "rpc-error":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "policy engine exploded"}})
    elif MODE == "defer-once":
        if seen == 1:
            result({"decision": "defer", "retry_after_ms": 50})
        else:
            result({"decision": "block", "reason": "blocked on the second ask"})
    elif MODE == "defer-forever":
        result({"decision": "defer", "retry_after_ms": 200, "reason": "busy"})
    elif MODE == "escalate":
        result({"decision": "escalate", "reason": "a human must look", "escalation_target": "ops"})
    elif MODE == "modify":
        p = msg["params"]["payload"]
        p["arguments"] = {"command": "echo modified"}
        result({"decision": "modify", "modified_payload": p})
    else:
        raise SystemExit("unknown mode " + MODE)


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    log(msg)
    method = msg.get("method")
    if method == "ahp/handshake":
        if MODE == "hang-handshake":
            continue
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocol_version": "2.0",
            "harness_info": {"name": "fault-harness", "version": "1", "capabilities": ["batch"]},
            "config": CONFIG,
        }})
    elif method == "ahp/batch":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"decisions": [{"decision": "allow"} for _ in msg["params"]["events"]]}})
    elif method == "ahp/event" and "id" in msg:
        answer(msg)
    elif method == "ahp/query":
        q = msg["params"]
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"answer": "yes", "reason": "asked " + q["query_type"] + " by " + q["session_id"]}})
