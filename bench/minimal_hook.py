#!/usr/bin/env python3
"""The baseline hook: the least a Claude Code PreToolUse hook can do in Python (read the
payload, print an allow). ahp-wrap's hook is compared with this and with /bin/true."""
import json
import sys

json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}))
