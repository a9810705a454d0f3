#!/usr/bin/env python3
"""Scripted fake Anthropic Messages API server (python stdlib only).

Usage:
  fake_anthropic.py --script script.json --log requests.jsonl [--port 0] [--port-file F]

Prints "PORT <n>" on stdout (flushed) once listening.

Script file format (JSON):
{
  "turns": [                                  # consumed in order by "main" requests
    {"tool_use": {"name": "Bash", "input": {"command": "touch /tmp/x", "description": "touch"}}},
    {"text": "All done."},
    {"content": [ ...raw content blocks... ], "stop_reason": "end_turn"}
  ],
  "side_text": "ok",                          # reply for side requests (no tools / not main)
  "exhausted_text": "(script exhausted)"      # reply when turns run out
}

A turn may contain several blocks: {"text": "...", "tool_use": {...}} -> text block then tool_use.
"tool_use" may also be a list of tool_use dicts.

A request is "main" if it carries a non-empty `tools` list (Claude Code's agent loop
always sends its tool definitions; side requests such as title generation, quota
probes, topic detection send none).  Override with "main_if": "any" to make every
/v1/messages request consume a turn.

Every request (any method, any path) is appended to the log as one JSON line:
  {"ts", "seq", "method", "path", "headers", "body" (parsed JSON or raw text),
   "kind": "main"|"side"|"other", "turn_index"}
"""
import argparse
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"turn": 0, "seq": 0}
SCRIPT = {}
LOG_PATH = None


def log_entry(entry):
    with LOCK:
        STATE["seq"] += 1
        entry["seq"] = STATE["seq"]
        entry["ts"] = time.time()
        if LOG_PATH:
            with open(LOG_PATH, "a") as f:
                f.write(json.dumps(entry) + "\n")


def next_turn():
    with LOCK:
        i = STATE["turn"]
        STATE["turn"] += 1
    turns = SCRIPT.get("turns", [])
    if i < len(turns):
        return i, turns[i]
    return i, {"text": SCRIPT.get("exhausted_text", "(script exhausted)")}


def build_blocks(turn):
    if "content" in turn:
        blocks = [dict(b) for b in turn["content"]]
    else:
        blocks = []
        if "text" in turn:
            blocks.append({"type": "text", "text": turn["text"]})
        tus = turn.get("tool_use")
        if tus:
            if isinstance(tus, dict):
                tus = [tus]
            for tu in tus:
                blocks.append({"type": "tool_use",
                               "id": tu.get("id") or "toolu_" + uuid.uuid4().hex[:24],
                               "name": tu["name"], "input": tu.get("input", {})})
    for b in blocks:
        if b.get("type") == "tool_use" and not b.get("id"):
            b["id"] = "toolu_" + uuid.uuid4().hex[:24]
    stop = turn.get("stop_reason") or (
        "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    return blocks, stop


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # silence default stderr logging
        pass

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
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

    def _json(self, code, obj, extra_headers=None):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _entry(self, body, kind, turn_index=None):
        log_entry({"method": self.command, "path": self.path,
                   "headers": {k.lower(): v for k, v in self.headers.items()
                               if k.lower() not in ("x-api-key", "authorization")},
                   "body": body, "kind": kind, "turn_index": turn_index})

    def do_GET(self):
        self._entry(None, "other")
        path = self.path.split("?")[0]
        if path.startswith("/v1/models"):
            models = [{"type": "model", "id": m, "display_name": m,
                       "created_at": "2025-01-01T00:00:00Z"}
                      for m in ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")]
            return self._json(200, {"data": models, "has_more": False,
                                    "first_id": models[0]["id"], "last_id": models[-1]["id"]})
        return self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                            "message": "fake: " + path}})

    def do_HEAD(self):
        self._entry(None, "other")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self._read_body()
        path = self.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            self._entry(body, "other")
            return self._json(200, {"input_tokens": 100})
        if path != "/v1/messages":
            self._entry(body, "other")
            return self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                "message": "fake: " + path}})
        body = body if isinstance(body, dict) else {}
        is_main = SCRIPT.get("main_if") == "any" or bool(body.get("tools"))
        if is_main:
            idx, turn = next_turn()
            blocks, stop = build_blocks(turn)
            self._entry(body, "main", idx)
        else:
            blocks, stop = [{"type": "text", "text": SCRIPT.get("side_text", "ok")}], "end_turn"
            self._entry(body, "side")
        model = body.get("model", "claude-sonnet-4-5")
        msg_id = "msg_fake_" + uuid.uuid4().hex[:20]
        usage = {"input_tokens": 10, "output_tokens": 5,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if body.get("stream"):
            return self._stream(msg_id, model, blocks, stop, usage)
        return self._json(200, {"id": msg_id, "type": "message", "role": "assistant",
                                "model": model, "content": blocks, "stop_reason": stop,
                                "stop_sequence": None, "usage": usage})

    def _stream(self, msg_id, model, blocks, stop, usage):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
        self.end_headers()
        self.close_connection = True

        def ev(name, data):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
            self.wfile.flush()

        ev("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(usage, output_tokens=1)}})
        ev("ping", {"type": "ping"})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "text", "text": ""}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "text_delta", "text": b["text"]}})
            elif b["type"] == "tool_use":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "tool_use", "id": b["id"],
                                                             "name": b["name"], "input": {}}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "input_json_delta",
                                                     "partial_json": json.dumps(b["input"])}})
            elif b["type"] == "thinking":
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "thinking", "thinking": "",
                                                             "signature": ""}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "thinking_delta",
                                                     "thinking": b.get("thinking", "")}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "signature_delta",
                                                     "signature": b.get("signature", "sig")}})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta",
                             "delta": {"stop_reason": stop, "stop_sequence": None},
                             "usage": {"output_tokens": usage["output_tokens"]}})
        ev("message_stop", {"type": "message_stop"})


def main():
    global SCRIPT, LOG_PATH
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    a = ap.parse_args()
    with open(a.script) as f:
        SCRIPT = json.load(f)
    LOG_PATH = a.log
    open(LOG_PATH, "a").close()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.replace(a.port_file + ".tmp", a.port_file)
    print("PORT %d" % port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
