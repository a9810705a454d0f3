#!/usr/bin/env python3
"""A Unix-socket AHP harness whose first connection breaks mid-request.

usage: flaky_unix_harness.py SOCKET

Connection 1: handshake, the first ahp/event is allowed, the second gets no answer: the
connection is closed under it. Connection 2 and later: every ahp/event is blocked with
"reconnected harness says no".
"""
import json
import socket
import sys

srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(8)
connection = 0
while True:
    conn, _ = srv.accept()
    connection += 1
    events = 0
    f = conn.makefile("rwb")
    for line in f:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        if msg["method"] == "ahp/handshake":
            result = {"protocol_version": "2.4", "harness_info": {"name": "flaky", "version": "1", "capabilities": []}}
        elif msg["method"] == "ahp/event":
            events += 1
            if connection == 1 and events == 2:
                break
            if connection == 1:
                result = {"decision": "allow"}
            else:
                result = {"decision": "block", "reason": "reconnected harness says no"}
        else:
            result = {"decisions": []}
        f.write((json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n").encode())
        f.flush()
    f.close()
    conn.close()
