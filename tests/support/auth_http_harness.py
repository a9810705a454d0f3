#!/usr/bin/env python3
"""An HTTP AHP harness that demands a credential.

usage: auth_http_harness.py PORTFILE HEADER VALUE

Listens on 127.0.0.1 (port 0; the port is written to PORTFILE). A POST without
`HEADER: VALUE` gets 401. Otherwise: handshake answered, pre_action blocked when the payload
mentions BLOCK_ME and allowed otherwise, notifications answered 204.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTFILE, HEADER, VALUE = sys.argv[1], sys.argv[2], sys.argv[3]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get(HEADER) != VALUE:
            self.send_response(401)
            self.end_headers()
            return
        msg = json.loads(body)
        if "id" not in msg:
            self.send_response(204)
            self.end_headers()
            return
        if msg["method"] == "ahp/handshake":
            result = {"protocol_version": "2.4", "harness_info": {"name": "auth", "version": "1", "capabilities": []}}
        elif msg["method"] == "ahp/event":
            blocked = "BLOCK_ME" in json.dumps(msg["params"]["payload"])
            result = {"decision": "block", "reason": "auth harness says no"} if blocked else {"decision": "allow"}
        else:
            result = {"decisions": []}
        out = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
