#!/usr/bin/env python3
"""A scripted AHP harness on stdio (newline-delimited JSON-RPC 2.0), python stdlib only.

Usage: script_harness.py RULES.json

RULES.json:
{
  "log": "/path/events.jsonl",          # every message received is appended here (required)
  "handshake": {"timeout_ms": 5000},    # merged into the handshake result's "config"
  "hang_handshake": false,              # never answer the handshake
  "exit_after_handshake": false,        # answer the handshake, then exit (harness "down")
  "rules": [                            # first match wins, for blocking events
    {"event": "pre_action",             # optional: event_type to match
     "contains": "touch",               # optional: substring of the JSON-encoded payload
     "contains_all": ["a", "b"],        # optional: substrings that must all be there
     "decision": {"decision": "block", "reason": "R"}},
    {"contains": "sleep", "hang": true},# never answer this event
    {"event": "pre_action", "exit": true} # exit at once (a harness that crashes)
  ],
  "default": {"decision": "allow"}      # when no rule matches
}

Notifications (no id) are only logged. `ahp/batch` requests get one decision per event.
"""
import json
import sys


def main():
    rules_file = sys.argv[1]
    with open(rules_file) as f:
        cfg = json.load(f)
    log_path = cfg["log"]
    rules = cfg.get("rules", [])
    default = cfg.get("default", {"decision": "allow"})

    def log(msg):
        with open(log_path, "a") as f:
            f.write(json.dumps(msg) + "\n")

    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    def decide(event):
        """The decision for one event, or None to hang."""
        text = json.dumps(event.get("payload", {}))
        for rule in rules:
            if "event" in rule and rule["event"] != event.get("event_type"):
                continue
            if "contains" in rule and rule["contains"] not in text:
                continue
            if not all(s in text for s in rule.get("contains_all", [])):
                continue
            if rule.get("exit"):
                sys.exit(3)
            if rule.get("hang"):
                return None
            return rule["decision"]
        return default

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        log(msg)
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue
        if method == "ahp/handshake":
            if cfg.get("hang_handshake"):
                continue
            config = {"timeout_ms": 10000}
            config.update(cfg.get("handshake", {}))
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocol_version": "2.4",
                "harness_info": {"name": "script-harness", "version": "0.1.0",
                                 "capabilities": ["pre_action", "pre_prompt", "batch"]},
                "config": config}})
            if cfg.get("exit_after_handshake"):
                return
        elif method == "ahp/event":
            decision = decide(msg.get("params", {}))
            if decision is not None:
                send({"jsonrpc": "2.0", "id": mid, "result": decision})
        elif method == "ahp/batch":
            decisions = [decide(e) for e in msg.get("params", {}).get("events", [])]
            if all(d is not None for d in decisions):
                send({"jsonrpc": "2.0", "id": mid, "result": {"decisions": decisions}})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "method not found: %s" % method}})


if __name__ == "__main__":
    main()
