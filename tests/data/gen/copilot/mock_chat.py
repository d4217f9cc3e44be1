"""A small OpenAI-compatible chat server for capturing GitHub Copilot CLI sessions (loopback only).

Answers `GET /v1/models` with one model and `POST /v1/chat/completions` (streamed or not) from
rules keyed on markers in the newest typed prompt (`CA-T1`, …): `TOOL` asks for one shell call
`echo CP-TOOL-OUT-7`, then answers once the tool result is back; a request to summarize the
conversation (Copilot's compaction) answers a `CP-SUMMARY` text; a request for a title answers
`Cp generated title`; anything else echoes the marker with non-ASCII text. Every request body is
appended to the log named by the second argument.
"""
import json, re, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = re.compile(r"\b[A-Z]{2}-T\d+\b")


def text_of(content):
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def answer(body):
    messages = body.get("messages", [])
    system = " ".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
    last = text_of(messages[-1].get("content")) if messages else ""
    if not body.get("tools") and re.search(r"\btitle\b", system + last, re.I) and "summar" not in last.lower():
        return {"text": "Cp generated title"}
    if re.search(r"summar", last, re.I) and re.search(r"conversation|history|context", last, re.I) and not MARKER.search(last):
        return {"text": "<overview>CP-SUMMARY the user asked two questions before compaction, é ✓.</overview>"}
    user = ""
    for m in reversed(messages):
        if m.get("role") == "user" and MARKER.search(text_of(m.get("content"))):
            user = text_of(m.get("content"))
            break
    tail = messages[-1:] if messages else []
    tool_done = any(m.get("role") == "tool" for m in tail)
    if "TOOL" in user and not tool_done:
        names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        name = "bash" if "bash" in names else (names[0] if names else "bash")
        return {"tool": {"name": name, "args": {"command": "echo CP-TOOL-OUT-7", "description": "Print a marker"}}}
    found = MARKER.findall(user)
    marker = found[-1] if found else "EMPTY"
    return {"text": f"{marker}-ANSWER reply to your words, é ✓ 🚀."}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, obj, code=200):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.split("?")[0].rstrip("/") in ("/models", "/v1/models"):
            return self.send_json({"object": "list", "data": [
                {"id": "mock-model", "object": "model", "created": 0, "owned_by": "mock"}]})
        self.send_json({"error": "not found"}, 404)

    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps(body) + "\n")
        if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return self.send_json({"error": "not found"}, 404)
        a = answer(body)
        created = int(time.time())
        usage = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}
        if "tool" in a:
            call = {"index": 0, "id": "call_%d" % created, "type": "function",
                    "function": {"name": a["tool"]["name"], "arguments": json.dumps(a["tool"]["args"])}}
            delta, finish = {"role": "assistant", "tool_calls": [call]}, "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": a["text"]}, "stop"
        base = {"id": "chatcmpl-%d" % created, "created": created, "model": "mock-model"}
        if not body.get("stream"):
            msg = dict(delta)
            msg.setdefault("content", None)
            for c in msg.get("tool_calls", []):
                c.pop("index", None)
            return self.send_json({**base, "object": "chat.completion", "usage": usage,
                                   "choices": [{"index": 0, "message": msg, "finish_reason": finish}]})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}]
        for c in chunks:
            self.wfile.write(b"data: " + json.dumps({**base, "object": "chat.completion.chunk", **c}).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
