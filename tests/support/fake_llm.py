#!/usr/bin/env python3
"""Scripted fake LLM server speaking three wire protocols (python stdlib only).

  * OpenAI Responses API      POST /v1/responses            (codex; SSE when stream:true)
  * OpenAI Chat Completions   POST /v1/chat/completions     (qwen-code, copilot BYOK)
  * Google Gemini API         POST /v1beta/models/<m>:generateContent
                              POST /v1beta/models/<m>:streamGenerateContent?alt=sse
                              POST /v1beta/models/<m>:countTokens

Usage:
  fake_llm.py --script script.json --log requests.jsonl [--port 0] [--port-file F]
Prints "PORT <n>" on stdout (flushed) once listening.

Script (JSON):
{
  "turns": [
    {"tool_calls": [{"name": "exec_command", "args": {"cmd": "echo hi"}}]},   # one or more calls
    {"text": "All done."},                                                     # plain text answer
    {"text": "I'll run it", "tool_calls": [...]}                                # text then calls
  ],
  "main_if": "tools",          # "tools" (default): only requests carrying a non-empty tool list
                               #   consume a turn; "any": every generation request does
  "side_text": "ok",           # text reply for side requests
  "side_json": {...},          # reply for side requests that ask for JSON (Gemini responseMimeType
                               #   application/json); default covers next_speaker + model router
  "exhausted_text": "(script exhausted)"
}
Every request (any method/path) is logged as one JSON line:
  {seq, ts, method, path, headers (auth headers removed), body, kind: main|side|other, turn_index}
"""
import argparse
import json
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"turn": 0, "seq": 0}
SCRIPT = {}
LOG_PATH = None
SECRET_HEADERS = ("x-api-key", "authorization", "x-goog-api-key", "api-key")

DEFAULT_SIDE_JSON = {
    "reasoning": "fake server: the model turn is finished",
    "next_speaker": "user",                  # gemini-cli next-speaker check
    "model_choice": "flash",                 # gemini-cli classifier router
    "complexity_reasoning": "fake", "complexity_score": 1,
}


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


def turn_calls(turn):
    calls = turn.get("tool_calls") or []
    if isinstance(calls, dict):
        calls = [calls]
    return [dict(c, id=c.get("id") or "call_" + uuid.uuid4().hex[:20]) for c in calls]


def gemini_has_tools(body):
    for t in body.get("tools") or []:
        if t.get("functionDeclarations"):
            return True
    return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    # ---------------------------------------------------------------- plumbing
    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                import gzip
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
                               if k.lower() not in SECRET_HEADERS},
                   "body": body, "kind": kind, "turn_index": turn_index})

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, data, event=None):
        s = ""
        if event:
            s += "event: %s\n" % event
        s += "data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data))
        self.wfile.write(s.encode())
        self.wfile.flush()

    def _pick(self, body, is_main):
        if is_main:
            idx, turn = next_turn()
            self._entry(body, "main", idx)
            return turn
        self._entry(body, "side")
        return {"text": SCRIPT.get("side_text", "ok")}

    def _main(self, has_tools):
        return SCRIPT.get("main_if", "tools") == "any" or has_tools

    # ---------------------------------------------------------------- verbs
    def do_HEAD(self):
        self._entry(None, "other")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_CONNECT(self):
        # only reached when a client is pointed at this server as an HTTP(S) proxy: logs outbound attempts
        self._entry(None, "proxy-connect")
        self._json(403, {"error": {"message": "fake proxy: outbound blocked"}})

    def do_GET(self):
        if self.path.startswith("http://"):
            self._entry(None, "proxy-http")
            return self._json(403, {"error": {"message": "fake proxy: outbound blocked"}})
        self._entry(None, "other")
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            # OpenAI list shape + codex's {"models": []} shape
            return self._json(200, {"object": "list", "data": [
                {"id": "gpt-fake", "object": "model", "created": 0, "owned_by": "fake"}],
                "models": []})
        return self._json(404, {"error": {"message": "fake: no GET " + path, "code": 404}})

    def do_POST(self):
        body = self._read_body()
        path = self.path.split("?")[0]
        b = body if isinstance(body, dict) else {}
        if path.endswith("/responses"):
            return self._responses(b)
        if path.endswith("/chat/completions"):
            return self._chat(b)
        m = re.match(r".*/models/([^/:]+):(\w+)$", path)
        if m:
            model, verb = m.group(1), m.group(2)
            if verb == "countTokens":
                self._entry(body, "other")
                return self._json(200, {"totalTokens": 100})
            if verb in ("generateContent", "streamGenerateContent"):
                return self._gemini(b, model, verb == "streamGenerateContent")
            if verb in ("embedContent", "batchEmbedContents"):
                self._entry(body, "other")
                return self._json(200, {"embedding": {"values": [0.0] * 8}})
        self._entry(body, "other")
        return self._json(404, {"error": {"message": "fake: no POST " + path, "code": 404}})

    # ---------------------------------------------------------------- Responses API
    def _responses(self, body):
        turn = self._pick(body, self._main(bool(body.get("tools"))))
        rid = "resp_" + uuid.uuid4().hex[:20]
        model = body.get("model", "gpt-fake")
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
                "model": model, "status": "in_progress", "output": []}
        if not body.get("stream"):
            return self._json(200, dict(resp, status="completed", output=items, usage=usage))
        self._sse_start()
        seq = [0]

        def ev(name, data):
            data = dict(data, type=name, sequence_number=seq[0])
            seq[0] += 1
            self._sse(data, event=name)

        ev("response.created", {"response": resp})
        ev("response.in_progress", {"response": resp})
        for i, it in enumerate(items):
            if it["type"] == "message":
                ev("response.output_item.added", {"output_index": i,
                                                  "item": dict(it, status="in_progress", content=[])})
                ev("response.content_part.added", {"output_index": i, "item_id": it["id"],
                                                   "content_index": 0,
                                                   "part": {"type": "output_text", "text": "",
                                                            "annotations": []}})
                ev("response.output_text.delta", {"output_index": i, "item_id": it["id"],
                                                  "content_index": 0,
                                                  "delta": it["content"][0]["text"]})
                ev("response.output_text.done", {"output_index": i, "item_id": it["id"],
                                                 "content_index": 0,
                                                 "text": it["content"][0]["text"]})
                ev("response.content_part.done", {"output_index": i, "item_id": it["id"],
                                                  "content_index": 0, "part": it["content"][0]})
            else:
                ev("response.output_item.added", {"output_index": i,
                                                  "item": dict(it, status="in_progress",
                                                               arguments="")})
                ev("response.function_call_arguments.delta", {"output_index": i,
                                                              "item_id": it["id"],
                                                              "delta": it["arguments"]})
                ev("response.function_call_arguments.done", {"output_index": i,
                                                             "item_id": it["id"],
                                                             "arguments": it["arguments"]})
            ev("response.output_item.done", {"output_index": i, "item": it})
        ev("response.completed", {"response": dict(resp, status="completed", output=items,
                                                   usage=usage)})

    # ---------------------------------------------------------------- Chat Completions
    def _chat(self, body):
        turn = self._pick(body, self._main(bool(body.get("tools"))))
        cid = "chatcmpl-" + uuid.uuid4().hex[:20]
        model = body.get("model", "gpt-fake")
        calls = turn_calls(turn)
        text = turn.get("text")
        finish = "tool_calls" if calls else "stop"
        tcs = [{"index": i, "id": c["id"], "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}))}}
               for i, c in enumerate(calls)]
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            msg = {"role": "assistant", "content": text}
            if tcs:
                msg["tool_calls"] = [{k: v for k, v in t.items() if k != "index"} for t in tcs]
            return self._json(200, {"id": cid, "object": "chat.completion",
                                    "created": int(time.time()), "model": model,
                                    "choices": [{"index": 0, "message": msg,
                                                 "finish_reason": finish}], "usage": usage})
        self._sse_start()

        def chunk(delta, fin=None, **extra):
            d = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": model, "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": fin}]}
            d.update(extra)
            self._sse(d)

        chunk({"role": "assistant", "content": ""})
        if text:
            chunk({"content": text})
        if tcs:
            chunk({"tool_calls": tcs})
        chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": model, "choices": [], "usage": usage})
        self._sse("[DONE]")

    # ---------------------------------------------------------------- Gemini
    def _gemini(self, body, model, stream):
        gc = body.get("generationConfig") or body.get("config") or {}
        wants_json = gc.get("responseMimeType") == "application/json"
        is_main = (not wants_json) and self._main(gemini_has_tools(body))
        if wants_json:
            self._entry(body, "side")
            turn = {"text": json.dumps(SCRIPT.get("side_json", DEFAULT_SIDE_JSON))}
        else:
            turn = self._pick(body, is_main)
        parts = []
        if turn.get("text"):
            parts.append({"text": turn["text"]})
        for c in turn_calls(turn):
            fc = {"name": c["name"], "args": c.get("args", {})}
            if c.get("with_id"):
                fc["id"] = c["id"]
            parts.append({"functionCall": fc})
        resp = {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                  "totalTokenCount": 15},
                "modelVersion": model, "responseId": "fake-" + uuid.uuid4().hex[:12]}
        if not stream:
            return self._json(200, resp)
        self._sse_start()
        self._sse(resp)


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
