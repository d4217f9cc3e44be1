"""A scripted OpenAI-compatible chat server on loopback, for capturing opencode sessions.

Serves `POST /v1/chat/completions` (SSE when `stream` is set, one JSON object otherwise) and
`GET /v1/models`. What it answers depends on the request:

* opencode's title request (its system prompt calls the model a "title generator"): a title
  naming the marker of the prompt it is given (`OB generated title 🚀`), or nothing when the
  prompt holds `NOTITLE` (opencode then keeps its default title);
* opencode's compaction request (system prompt "context summarization agent"): a summary
  `OC-SUMMARY …`;
* a prompt holding `TOOL`, while no tool result follows it yet: a `bash` call `echo OC-TOOL-OUT-7`;
* a prompt holding `AGENT`, likewise: a `task` call that starts a `general` sub-agent on
  `OS-T1 sub-agent question` (a child session);
* anything else: `<marker>-ANSWER …` with non-ASCII text, and `<marker>-THINK …` as reasoning.

Markers look like `OA-T1`. Every request body is appended (trimmed) to the log file named by the
second argument. Usage: `python3 mock_openai.py PORT LOGFILE`.
"""

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = re.compile(r"\b[A-Z]{2}-T\d+\b")


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def reply(body):
    messages = body.get("messages") or []
    system = " ".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
    users = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    prompt = next((u for u in reversed(users) if MARKER.search(u)), "")
    found = MARKER.search(prompt)
    marker = found.group(0) if found else "NO-MARKER"
    after_prompt = False
    for m in messages:
        if m.get("role") == "user" and text_of(m.get("content")) == prompt:
            after_prompt = False
        elif m.get("role") == "tool":
            after_prompt = True
    if "title generator" in system.lower():
        # An empty title leaves opencode's default `New session - <time>` in place.
        return {"text": "" if "NOTITLE" in prompt else f"{marker[:2]} generated title 🚀"}
    if "context summarization agent" in system.lower():
        return {"text": "OC-SUMMARY the user asked two questions before compaction, é ✓."}
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    if "TOOL" in prompt and not after_prompt and "bash" in tools:
        return {"call": ("bash", {"command": "echo OC-TOOL-OUT-7", "description": "Print a marker"})}
    if "AGENT" in prompt and not after_prompt and "task" in tools:
        return {"call": ("task", {"description": "Ask a sub-agent", "prompt": "OS-T1 sub-agent question",
                                   "subagent_type": "general"})}
    return {"text": f"{marker}-ANSWER reply to your words, é ✓ 🚀.", "think": f"{marker}-THINK private chain"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_json(self, value):
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_json({"object": "list", "data": [{"id": "mock-model", "object": "model"}]})

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with open(sys.argv[2], "a", encoding="utf-8") as log:
            log.write(json.dumps(body, ensure_ascii=False)[:6000] + "\n")
        answer = reply(body)
        now = int(time.time())
        usage = {"prompt_tokens": 900, "completion_tokens": 9, "total_tokens": 909}
        if "call" in answer:
            name, args = answer["call"]
            delta = {"role": "assistant", "tool_calls": [{"index": 0, "id": f"call_{name}_{now}", "type": "function",
                                                          "function": {"name": name, "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": answer["text"]}
            finish = "stop"
        if not body.get("stream"):
            message = dict(delta)
            if answer.get("think"):
                message["reasoning_content"] = answer["think"]
            self.send_json({"id": "mock-1", "object": "chat.completion", "created": now, "model": "mock-model",
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})
            return
        chunks = []
        if answer.get("think"):
            chunks.append({"role": "assistant", "reasoning_content": answer["think"]})
        chunks.append(delta)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in chunks]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage})
        for event in events:
            event.update({"id": "mock-1", "object": "chat.completion.chunk", "created": now, "model": "mock-model"})
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
