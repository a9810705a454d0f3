#!/usr/bin/env python3
"""A connection that comes late, from a process of the agent's tree that is not the agent
(stdlib only): the moment the test chooses, while the agent waits for the person's input.

usage:
  late_fetch.py serve PORT_FILE      an HTTP server on 127.0.0.1 (a port of the person's
                                     loopback), its port written to PORT_FILE; answers
                                     every GET with `late-fetch-reply`
  late_fetch.py mcp GO URL OUT       a stdio MCP server with no tools: once the file GO
                                     exists it fetches URL and writes the reply (or the
                                     error) to OUT
"""
import http.server
import json
import os
import sys
import threading
import time
import urllib.request


def serve(port_file):
    class Reply(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"late-fetch-reply"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Reply)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_port))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


def fetch_when(go, url, out):
    while not os.path.exists(go):
        time.sleep(0.1)
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        text = opener.open(url, timeout=60).read().decode()
    except Exception as e:  # the reply or the error, for the test to read
        text = "error: %s" % e
    with open(out + ".tmp", "w") as f:
        f.write(text)
    os.rename(out + ".tmp", out)


def mcp(go, url, out):
    threading.Thread(target=fetch_when, args=(go, url, out), daemon=True).start()
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg:
            continue
        method = msg.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": msg.get("params", {}).get("protocolVersion", "2024-11-05"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "late-fetch", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": []}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"],
                     "error": {"code": -32601, "message": "no such method"}}
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        mcp(*sys.argv[2:5])
