#!/usr/bin/env python3
"""A scripted fake OpenAI Responses API on 127.0.0.1 for the Codex CLI (python stdlib only).

Usage: fake_responses.py --script script.json --log requests.jsonl [--port 0] [--port-file F]

Codex is pointed at it with a `model_providers` entry whose `base_url` is
http://127.0.0.1:PORT/v1 and `wire_api = "responses"`; it POSTs /v1/responses with
`stream: true` and reads the server-sent events below.

Script (JSON):
{
  "turns": [
    {"tool_calls": [{"name": "exec_command", "args": {"cmd": "echo hi"}}]},   # one or more calls
    {"text": "All done."},                                                     # a plain answer
    {"text": "Running it", "tool_calls": [...]}                                # text, then calls
  ],
  "exhausted_text": "(script exhausted)"   # the answer once the turns are used up
}
Only requests that offer tools consume a turn ("main"); others are answered with text ("side").
Every request is logged as one JSON line:
  {seq, ts, method, path, headers (auth headers removed), body, kind: main|side|other, turn_index}
"""
import argparse
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"turn": 0, "seq": 0}
SCRIPT = {}
LOG_PATH = None
SECRET_HEADERS = ("authorization", "x-api-key", "api-key")


def log_entry(entry):
    with LOCK:
        STATE["seq"] += 1
        entry["seq"] = STATE["seq"]
        entry["ts"] = time.time()
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


def turn_calls(turn):
    calls = turn.get("tool_calls") or []
    if isinstance(calls, dict):
        calls = [calls]
    return [dict(c, id=c.get("id") or "call_" + uuid.uuid4().hex[:20]) for c in calls]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            import gzip
            raw = gzip.decompress(raw)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _entry(self, body, kind, turn_index=None):
        log_entry({"method": self.command, "path": self.path,
                   "headers": {k.lower(): v for k, v in self.headers.items()
                               if k.lower() not in SECRET_HEADERS},
                   "body": body, "kind": kind, "turn_index": turn_index})

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, name, data):
        self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
        self.wfile.flush()

    def do_GET(self):
        self._entry(None, "other")
        if self.path.split("?")[0].endswith("/models"):
            return self._json(200, {"object": "list", "models": [], "data": [
                {"id": "gpt-fake", "object": "model", "created": 0, "owned_by": "fake"}]})
        return self._json(404, {"error": {"message": "fake: no GET " + self.path}})

    def do_POST(self):
        body = self._read_body()
        if not self.path.split("?")[0].endswith("/responses"):
            self._entry(body, "other")
            return self._json(404, {"error": {"message": "fake: no POST " + self.path}})
        b = body if isinstance(body, dict) else {}
        if b.get("tools"):
            idx, turn = next_turn()
            self._entry(body, "main", idx)
        else:
            self._entry(body, "side")
            turn = {"text": "ok"}
        self._respond(b, turn)

    def _respond(self, body, turn):
        rid = "resp_" + uuid.uuid4().hex[:20]
        items = []
        if turn.get("text"):
            items.append({"type": "message", "role": "assistant", "status": "completed",
                          "id": "msg_" + uuid.uuid4().hex[:20],
                          "content": [{"type": "output_text", "text": turn["text"],
                                       "annotations": []}]})
        for c in turn_calls(turn):
            items.append({"type": "function_call", "status": "completed",
                          "id": "fc_" + uuid.uuid4().hex[:20], "call_id": c["id"],
                          "name": c["name"], "arguments": json.dumps(c.get("args", {}))})
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 15}
        resp = {"id": rid, "object": "response", "created_at": int(time.time()),
                "model": body.get("model", "gpt-fake"), "status": "in_progress", "output": []}
        if not body.get("stream"):
            return self._json(200, dict(resp, status="completed", output=items, usage=usage))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        seq = [0]

        def ev(name, data):
            self._sse(name, dict(data, type=name, sequence_number=seq[0]))
            seq[0] += 1

        ev("response.created", {"response": resp})
        ev("response.in_progress", {"response": resp})
        for i, it in enumerate(items):
            if it["type"] == "message":
                text = it["content"][0]["text"]
                ev("response.output_item.added",
                   {"output_index": i, "item": dict(it, status="in_progress", content=[])})
                ev("response.content_part.added",
                   {"output_index": i, "item_id": it["id"], "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}})
                ev("response.output_text.delta",
                   {"output_index": i, "item_id": it["id"], "content_index": 0, "delta": text})
                ev("response.output_text.done",
                   {"output_index": i, "item_id": it["id"], "content_index": 0, "text": text})
                ev("response.content_part.done",
                   {"output_index": i, "item_id": it["id"], "content_index": 0,
                    "part": it["content"][0]})
            else:
                ev("response.output_item.added",
                   {"output_index": i, "item": dict(it, status="in_progress", arguments="")})
                ev("response.function_call_arguments.delta",
                   {"output_index": i, "item_id": it["id"], "delta": it["arguments"]})
                ev("response.function_call_arguments.done",
                   {"output_index": i, "item_id": it["id"], "arguments": it["arguments"]})
            ev("response.output_item.done", {"output_index": i, "item": it})
        ev("response.completed",
           {"response": dict(resp, status="completed", output=items, usage=usage)})


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
        os.replace(a.port_file + ".tmp", a.port_file)
    print("PORT %d" % port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
