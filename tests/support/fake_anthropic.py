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
import json
import uuid

from fake_common import SCRIPT, BaseHandler, next_turn, serve


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


class Handler(BaseHandler):
    SECRET_HEADERS = ("x-api-key", "authorization")

    def extra_headers(self):
        return {"request-id": "req_fake_" + uuid.uuid4().hex[:12]}

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

    do_HEAD = BaseHandler._head_ok

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
        self._sse_start()

        def ev(name, data):
            self._sse(data, event=name)

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


if __name__ == "__main__":
    serve(Handler)
