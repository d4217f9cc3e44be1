"""A tiny OpenAI-compatible chat server for capturing Qwen Code and opencode sessions (loopback only).

Answers `POST /v1/chat/completions` (streamed or not) from scripted rules keyed on markers in the
last user message: `TOOL` asks for a shell call `echo QC-TOOL-OUT-7` once, then answers; a title
request (the system prompt asks for a title) answers `{"title": "Qc generated title"}`; a
compression request answers a `<state_snapshot>` summary; anything else echoes the marker.
"""
import json, re, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def last_user(messages):
    for m in reversed(messages):
        if m.get("role") == "user" and re.search(r"[A-Z]{2}-T\d", json.dumps(m.get("content"))):
            c = m.get("content")
            if isinstance(c, list):
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
            return c or ""
    return ""


def answer(body):
    messages = body.get("messages", [])
    system = " ".join(
        (m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content")))
        for m in messages if m.get("role") == "system")
    user = last_user(messages)
    tools_done = any(m.get("role") == "tool" for m in messages[-3:])
    if "title generator" in system.lower():
        # opencode's small-model request: the answer is the title itself.
        return {"text": "Oc generated title"}
    if "sentence-case title" in system:
        return {"text": '{"title": "Qc generated title"}'}
    tail = json.dumps(messages[-1:])
    if "state_snapshot" in tail or "state_snapshot" in system and "summar" in tail.lower():
        return {"text": "<state_snapshot>QC-SUMMARY the user asked two questions before compression.</state_snapshot>"}
    if "TOOL" in user and not tools_done:
        names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        # opencode calls its shell tool `bash`; Qwen Code `run_shell_command`.
        name = "bash" if "bash" in names else "run_shell_command"
        return {"tool": {"name": name, "args": {"command": "echo QC-TOOL-OUT-7", "description": "Print"}}}
    found = re.search(r"\b[A-Z]{2}-T\d+\b", user)
    marker = found.group(0) if found else "EMPTY"
    return {"text": f"{marker}-ANSWER reply to your words, é ✓ 🚀.", "think": f"{marker}-THINK private"}


# Large enough that Qwen Code finds a compression worth writing (it compares token counts).
PROMPT_TOKENS = 90000


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"data": [{"id": "mock-model", "object": "model"}]}).encode())

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps(body)[:4000] + "\n")
        a = answer(body)
        created = int(time.time())
        if "tool" in a:
            delta = {"role": "assistant", "tool_calls": [{"index": 0, "id": "call_%d" % created, "type": "function",
                     "function": {"name": a["tool"]["name"], "arguments": json.dumps(a["tool"]["args"])}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": a["text"]}
            if a.get("think"):
                delta["reasoning_content"] = a["think"]
            finish = "stop"
        if not body.get("stream"):
            msg = dict(delta)
            out = {"id": "c1", "object": "chat.completion", "created": created, "model": "mock-model",
                   "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                   "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 5, "total_tokens": PROMPT_TOKENS + 5}}
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                   "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 5, "total_tokens": PROMPT_TOKENS + 5}}]
        for c in chunks:
            c.update({"id": "c1", "object": "chat.completion.chunk", "created": created, "model": "mock-model"})
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
