"""What the scripted fake model servers share (python stdlib only): the script and its turns,
the request log, HTTP body reading, JSON and server-sent-event replies, and the command line.

Each server (fake_anthropic.py, fake_responses.py, fake_llm.py) imports this module, subclasses
`BaseHandler` with its API's routes and reply shapes, and calls `serve(Handler)`:

  <server>.py --script script.json --log requests.jsonl [--port 0] [--port-file F]

prints "PORT <n>" on stdout (flushed) once listening, and writes the port to F (atomically).
Every request is appended to the log as one JSON line:
  {seq, ts, method, path, headers (auth headers removed), body, kind, turn_index}
"""
import argparse
import gzip
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"turn": 0, "seq": 0}
# The script, loaded by serve(); updated in place, so `from fake_common import SCRIPT` sees it.
SCRIPT = {}
CONFIG = {"log": None}


def log_entry(entry):
    with LOCK:
        STATE["seq"] += 1
        entry["seq"] = STATE["seq"]
        entry["ts"] = time.time()
        if CONFIG["log"]:
            with open(CONFIG["log"], "a") as f:
                f.write(json.dumps(entry) + "\n")


def next_turn():
    """The next scripted turn and its index; once they are used up, `exhausted_text`."""
    with LOCK:
        i = STATE["turn"]
        STATE["turn"] += 1
    turns = SCRIPT.get("turns", [])
    if i < len(turns):
        return i, turns[i]
    return i, {"text": SCRIPT.get("exhausted_text", "(script exhausted)")}


def turn_calls(turn):
    """A turn's `tool_calls` (one dict or a list), each with an `id`."""
    calls = turn.get("tool_calls") or []
    if isinstance(calls, dict):
        calls = [calls]
    return [dict(c, id=c.get("id") or "call_" + uuid.uuid4().hex[:20]) for c in calls]


class BaseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Request headers never written to the log.
    SECRET_HEADERS = ("authorization",)

    def log_message(self, fmt, *args):  # silence default stderr logging
        pass

    def extra_headers(self):
        """Headers this API sends with every JSON and event-stream reply."""
        return {}

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "zstd":
                return {"_undecoded_zstd_bytes": len(raw)}
        except Exception:
            pass
        try:
            return json.loads(raw) if raw else None
        except Exception:
            return raw.decode("utf-8", "replace")

    def _read_chunked(self):
        out = b""
        while True:
            line = self.rfile.readline().strip()
            size = int(line.split(b";")[0], 16)
            if size == 0:
                self.rfile.readline()
                break
            out += self.rfile.read(size)
            self.rfile.readline()
        return out

    def _entry(self, body, kind, turn_index=None):
        log_entry({"method": self.command, "path": self.path,
                   "headers": {k.lower(): v for k, v in self.headers.items()
                               if k.lower() not in self.SECRET_HEADERS},
                   "body": body, "kind": kind, "turn_index": turn_index})

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in self.extra_headers().items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for k, v in self.extra_headers().items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True

    def _sse(self, data, event=None):
        s = ""
        if event:
            s += "event: %s\n" % event
        s += "data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data))
        self.wfile.write(s.encode())
        self.wfile.flush()

    def _head_ok(self):
        """A HEAD answered 200 (servers that accept HEAD: `do_HEAD = BaseHandler._head_ok`)."""
        self._entry(None, "other")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def serve(handler):
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    a = ap.parse_args()
    with open(a.script) as f:
        SCRIPT.update(json.load(f))
    CONFIG["log"] = a.log
    open(a.log, "a").close()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(a.port_file + ".tmp", a.port_file)
    print("PORT %d" % port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
