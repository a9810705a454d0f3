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
Every request is logged as one JSON line (see fake_common.py), kind: main|side|other.
`respond` is also what fake_llm.py answers on /v1/responses.
"""
import json
import time
import uuid

from fake_common import BaseHandler, next_turn, serve, turn_calls


def respond(handler, body, turn):
    """Answers one Responses API request with `turn`: JSON, or events when `stream` is set."""
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
        return handler._json(200, dict(resp, status="completed", output=items, usage=usage))
    handler._sse_start()
    seq = [0]

    def ev(name, data):
        handler._sse(dict(data, type=name, sequence_number=seq[0]), event=name)
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


class Handler(BaseHandler):
    SECRET_HEADERS = ("authorization", "x-api-key", "api-key")

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
        respond(self, b, turn)


if __name__ == "__main__":
    serve(Handler)
