#!/usr/bin/env python3
"""A scripted model server on 127.0.0.1 for driving the real Claude Code and Codex CLIs.

Speaks just enough of two wire APIs, always streaming (SSE) when asked to:
  POST /v1/messages   Anthropic Messages API (Claude Code via ANTHROPIC_BASE_URL)
  POST /v1/responses  OpenAI Responses API (Codex via a model_providers entry, wire_api="responses")

The answers are deterministic and derived from the last user text, so fixtures say which prompt
each reply belongs to:
  - a prompt containing "TOOL" gets one tool call first (Claude: Bash `echo tool-ran`; Codex:
    exec_command `echo tool-ran`), then, once the tool result is back, a text reply;
  - a prompt containing "THINK" gets a thinking/reasoning block before the text;
  - a summarisation request (compaction) gets "SUMMARY-OF-EARLIER: ..." text;
  - a title request gets a short JSON title;
  - anything else: "reply to <prompt>".
Every request is appended (method, path, a digest of the body) to the log named by --log; with
--bodies, every POST body is also appended whole, one JSON line each (what the model received).

Usage: mock_model.py --port-file FILE --log FILE [--bodies FILE]
  (binds an ephemeral port, writes it to FILE)
"""
import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTER = [0]


def next_id(prefix):
    with LOCK:
        COUNTER[0] += 1
        return f"{prefix}_{COUNTER[0]:04d}"


def text_of(content):
    """Plain text of an Anthropic or Responses content value."""
    if isinstance(content, str):
        return content
    out = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                if block.get("type") in ("text", "input_text", "output_text"):
                    out.append(block.get("text", ""))
    return "\n".join(out)


def typed_texts(content):
    """Text blocks of one message that are not injected context (<system-reminder> and such)."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    out = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") in ("text", "input_text"):
            t = re.sub(r"<system-reminder>.*?</system-reminder>", "", block.get("text", ""), flags=re.S).strip()
            if t and not t.startswith("<") and not t.startswith("# AGENTS.md"):
                out.append(t)
    return out


def last_prompt(messages):
    for m in reversed(messages):
        if m.get("role") == "user" and m.get("type", "message") == "message":
            texts = typed_texts(m.get("content"))
            if texts:
                return texts[-1]
    return ""


def clean(prompt):
    prompt = re.sub(r"<system-reminder>.*?</system-reminder>", "", prompt, flags=re.S)
    prompt = " ".join(prompt.split())
    return prompt[:80]


def is_summary_request(texts):
    joined = "\n".join(texts).lower()
    return "summar" in joined and (
        "create a detailed summary" in joined
        or "your task is to create" in joined
        or "context checkpoint" in joined
        or "handoff summary" in joined
        or "summarize the conversation" in joined
        or "compaction" in joined
    )


def is_title_request(system_text, texts, tools):
    s = (system_text or "").lower()
    return not tools and len(s) < 4000 and "title" in s


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_path = None
    bodies_path = None

    def log_message(self, fmt, *args):
        pass

    def note(self, what):
        if self.log_path:
            with LOCK, open(self.log_path, "a") as f:
                f.write(json.dumps(what) + "\n")

    def body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, name, data):
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def do_GET(self):
        self.note({"method": "GET", "path": self.path})
        if "models" in self.path:
            self.send_json({"data": [{"id": "mock-model", "object": "model"}], "models": []})
        else:
            self.send_json({})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        req = self.body()
        if self.bodies_path:
            with LOCK, open(self.bodies_path, "a") as f:
                f.write(json.dumps({"path": self.path, "body": req}) + "\n")
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            self.note({"method": "POST", "path": path})
            return self.send_json({"input_tokens": 100})
        if path.endswith("/messages"):
            return self.anthropic(req)
        if path.endswith("/responses"):
            return self.openai_responses(req)
        self.note({"method": "POST", "path": path, "unknown": True})
        self.send_json({"error": {"message": "not mocked"}}, 404)

    # ---- Anthropic Messages API -------------------------------------------------------------
    def anthropic(self, req):
        messages = req.get("messages") or []
        system = req.get("system")
        system_text = text_of(system) if not isinstance(system, str) else system
        user_texts = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
        last = messages[-1] if messages else {}
        last_content = last.get("content")
        tool_result = isinstance(last_content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last_content
        )
        prompt = last_prompt(messages)
        blocks = []
        if is_title_request(system_text, user_texts, req.get("tools")):
            kind = "title"
            words = clean(prompt).split()[:4]
            blocks.append({"type": "text", "text": json.dumps({"title": "Mock title " + " ".join(words)})})
        elif is_summary_request([prompt]):
            kind = "summary"
            blocks.append({"type": "text", "text": "<summary>SUMMARY-OF-EARLIER: the earlier turns, compacted by the mock.</summary>"})
        elif "TOOL" in prompt and not tool_result:
            kind = "tool"
            if "THINK" in prompt:
                blocks.append({"type": "thinking", "thinking": "thinking-before-tool"})
            blocks.append({"type": "tool_use", "id": next_id("toolu"), "name": "Bash",
                           "input": {"command": "echo tool-ran", "description": "Echo"}})
        else:
            kind = "text"
            if "THINK" in prompt:
                blocks.append({"type": "thinking", "thinking": "thinking-hidden-words"})
            what = "tool result seen, " if tool_result else ""
            blocks.append({"type": "text", "text": f"reply to {clean(prompt)} ({what}done)"})
        self.note({"method": "POST", "path": self.path, "api": "messages", "kind": kind,
                   "model": req.get("model"), "stream": bool(req.get("stream")),
                   "prompt": clean(prompt), "n_messages": len(messages),
                   "system_len": len(system_text or ""), "n_tools": len(req.get("tools") or []),
                   "system_head": (system_text or "")[:160]})
        msg_id = next_id("msg")
        model = req.get("model") or "mock-model"
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        if not req.get("stream"):
            content = []
            for b in blocks:
                b = dict(b)
                if b["type"] == "thinking":
                    b["signature"] = "mock-signature"
                content.append(b)
            return self.send_json({"id": msg_id, "type": "message", "role": "assistant", "model": model,
                                   "content": content, "stop_reason": stop, "stop_sequence": None,
                                   "usage": {"input_tokens": 10, "output_tokens": 10}})
        self.start_sse()
        self.event("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}})
        for i, b in enumerate(blocks):
            if b["type"] == "thinking":
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                           "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
                self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                           "delta": {"type": "thinking_delta", "thinking": b["thinking"]}})
                self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                           "delta": {"type": "signature_delta", "signature": "mock-signature"}})
            elif b["type"] == "text":
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                           "content_block": {"type": "text", "text": ""}})
                self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                           "delta": {"type": "text_delta", "text": b["text"]}})
            else:
                self.event("content_block_start", {"type": "content_block_start", "index": i,
                           "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                self.event("content_block_delta", {"type": "content_block_delta", "index": i,
                           "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}})
            self.event("content_block_stop", {"type": "content_block_stop", "index": i})
        self.event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 10}})
        self.event("message_stop", {"type": "message_stop"})

    # ---- OpenAI Responses API ---------------------------------------------------------------
    def openai_responses(self, req):
        items = req.get("input") or []
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": items}]}]
        instructions = req.get("instructions") or ""
        last = items[-1] if items else {}
        tool_result = last.get("type") in ("function_call_output", "custom_tool_call_output")
        prompt = last_prompt(items)
        user_texts = [text_of(it.get("content")) for it in items if it.get("role") == "user"]
        out = []
        if "title" in prompt.lower() and "generate" in prompt.lower():
            kind = "title"
            out.append(("message", "Mock task title"))
        elif is_summary_request([prompt]):
            kind = "summary"
            out.append(("message", "SUMMARY-OF-EARLIER: the earlier turns, compacted by the mock."))
        elif "TOOL" in prompt and not tool_result:
            kind = "tool"
            if "THINK" in prompt:
                out.append(("reasoning", "thinking-before-tool"))
            out.append(("call", json.dumps({"cmd": "echo tool-ran"})))
        else:
            kind = "text"
            if "THINK" in prompt:
                out.append(("reasoning", "thinking-hidden-words"))
            what = "tool result seen, " if tool_result else ""
            out.append(("message", f"reply to {clean(prompt)} ({what}done)"))
        self.note({"method": "POST", "path": self.path, "api": "responses", "kind": kind,
                   "model": req.get("model"), "prompt": clean(prompt), "n_items": len(items),
                   "tools": [t.get("name") for t in (req.get("tools") or []) if isinstance(t, dict)]})
        resp_id = next_id("resp")
        self.start_sse()
        seq = [0]

        def ev(name, data):
            data = dict(data)
            data["type"] = name
            data["sequence_number"] = seq[0]
            seq[0] += 1
            self.event(name, data)

        base = {"id": resp_id, "object": "response", "model": req.get("model") or "mock-model",
                "status": "in_progress", "output": []}
        ev("response.created", {"response": base})
        done_items = []
        for index, (kind_, value) in enumerate(out):
            if kind_ == "message":
                item_id = next_id("msg")
                item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
                ev("response.output_item.added", {"output_index": index, "item": item})
                ev("response.content_part.added", {"item_id": item_id, "output_index": index, "content_index": 0,
                                                  "part": {"type": "output_text", "text": "", "annotations": []}})
                ev("response.output_text.delta", {"item_id": item_id, "output_index": index, "content_index": 0, "delta": value})
                ev("response.output_text.done", {"item_id": item_id, "output_index": index, "content_index": 0, "text": value})
                item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": value, "annotations": []}]}
            elif kind_ == "reasoning":
                item_id = next_id("rs")
                item = {"id": item_id, "type": "reasoning", "summary": []}
                ev("response.output_item.added", {"output_index": index, "item": item})
                ev("response.reasoning_summary_text.delta", {"item_id": item_id, "output_index": index, "summary_index": 0, "delta": value})
                item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": value}]}
            else:
                item_id = next_id("fc")
                call_id = next_id("call")
                item = {"id": item_id, "type": "function_call", "status": "in_progress", "name": "exec_command",
                        "call_id": call_id, "arguments": ""}
                ev("response.output_item.added", {"output_index": index, "item": item})
                ev("response.function_call_arguments.delta", {"item_id": item_id, "output_index": index, "delta": value})
                item = {"id": item_id, "type": "function_call", "status": "completed", "name": "exec_command",
                        "call_id": call_id, "arguments": value}
            ev("response.output_item.done", {"output_index": index, "item": item})
            done_items.append(item)
        final = dict(base, status="completed", output=done_items,
                     usage={"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": 20})
        ev("response.completed", {"response": final})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--bodies")
    args = ap.parse_args()
    Handler.log_path = args.log
    Handler.bodies_path = args.bodies
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(args.port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
