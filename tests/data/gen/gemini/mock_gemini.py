"""A tiny Gemini API server for capturing Gemini CLI sessions (loopback only).

Answers `:generateContent`, `:streamGenerateContent` (SSE) and `:countTokens` from scripted
rules keyed on markers (`GA-T1`) in the last user turn: `TOOL` asks for `read_file notes.txt`
once, then answers; a summary request (the CLI's compression or its session-summary prompt)
answers a `<state_snapshot>` or a short summary; anything else echoes the marker, with a thought.
"""
import json, re, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def last_user_text(contents):
    for c in reversed(contents):
        if c.get("role") == "user":
            texts = [p.get("text", "") for p in c.get("parts", []) if "text" in p]
            if texts:
                return " ".join(texts), c
    return "", None


def reply(body):
    contents = body.get("contents", [])
    system = json.dumps(body.get("systemInstruction", ""))
    text, _ = last_user_text(contents)
    last = contents[-1] if contents else {}
    responded = any("functionResponse" in p for p in last.get("parts", []))
    if "Summarize the user's primary intent" in system or "Summarize the user's primary intent" in text:
        return [{"text": "GA generated summary"}]
    if "state_snapshot" in system or "state_snapshot" in text[-3000:]:
        return [{"text": "<state_snapshot>GC-SUMMARY the user asked two questions before compression.</state_snapshot>"}]
    if "critically evaluate" in text.lower() or "critically evaluate" in system.lower():
        return [{"text": "<state_snapshot>GC-SUMMARY the user asked two questions before compression.</state_snapshot>"}]
    if "Task Routing AI" in system:
        return [{"text": json.dumps({"complexity_reasoning": "simple", "complexity_score": 10})}]
    if "next_speaker" in system or "next_speaker" in text[-2000:]:
        return [{"text": json.dumps({"reasoning": "done", "next_speaker": "user"})}]
    if "TOOL" in text and not responded:
        return [{"functionCall": {"name": "read_file", "args": {"file_path": "notes.txt"}}}]
    found = re.findall(r"\b[A-Z]{2}-T\d+\b", text)
    marker = found[-1] if found else "EMPTY"
    return [{"text": f"{marker}-THINK private", "thought": True},
            {"text": f"{marker}-ANSWER reply to your words, é ✓ 🚀."}]


def response(parts):
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 7, "totalTokenCount": 1207},
            "modelVersion": "gemini-2.5-flash"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"models":[]}')

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        with open(sys.argv[2], "a") as log:
            log.write(self.path + " " + json.dumps(body)[:3000] + "\n")
        if ":countTokens" in self.path:
            data = json.dumps({"totalTokens": 1200}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        out = response(reply(body))
        if ":streamGenerateContent" in self.path:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"data: " + json.dumps(out).encode() + b"\r\n\r\n")
            self.wfile.flush()
            return
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
