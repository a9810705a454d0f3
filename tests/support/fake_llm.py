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
import json
import re
import time
import uuid

import fake_responses
from fake_common import SCRIPT, BaseHandler, next_turn, serve, turn_calls

DEFAULT_SIDE_JSON = {
    "reasoning": "fake server: the model turn is finished",
    "next_speaker": "user",                  # gemini-cli next-speaker check
    "model_choice": "flash",                 # gemini-cli classifier router
    "complexity_reasoning": "fake", "complexity_score": 1,
}


def gemini_has_tools(body):
    for t in body.get("tools") or []:
        if t.get("functionDeclarations"):
            return True
    return False


class Handler(BaseHandler):
    SECRET_HEADERS = ("x-api-key", "authorization", "x-goog-api-key", "api-key")

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
    do_HEAD = BaseHandler._head_ok

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
        fake_responses.respond(self, body, turn)

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


if __name__ == "__main__":
    serve(Handler)
