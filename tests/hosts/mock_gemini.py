#!/usr/bin/env python3
"""A loopback stand-in for the Gemini API, for trying `dsh-refs mcp` in Gemini CLI.

It answers every turn with one short text (or, for a user turn `MOCK-CALL name {json}`,
with that function call, so the host's own MCP tools can be watched) and appends each
request it receives (method, path, parsed body) to a JSON-lines log.

    python3 tests/hosts/mock_gemini.py --port 8765 --log /tmp/gem/requests.jsonl

Point Gemini CLI at it with GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8765 and
GEMINI_API_KEY=dummy. It binds 127.0.0.1 only and forwards nothing. Not run by
`cargo test`; tests/hosts/README.md has the whole procedure.
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "MOCK-REPLY: I received your message."


def answer(text, parts=None):
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts or [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "totalTokenCount": 15,
        },
        "modelVersion": "mock",
    }


def tool_call(body):
    """A user turn whose last text is `MOCK-CALL name {json args}` makes the
    mock answer with that function call, so the host's own tools can be
    watched at work; any other turn gets the plain reply."""
    try:
        last = json.loads(body)["contents"][-1]
    except (ValueError, KeyError, IndexError):
        return None
    if last.get("role") != "user":
        return None
    texts = [p["text"] for p in last.get("parts", []) if "text" in p]
    if not texts or not texts[-1].startswith("MOCK-CALL "):
        return None
    name, _, args = texts[-1][len("MOCK-CALL "):].partition(" ")
    try:
        args = json.loads(args) if args.strip() else {}
    except ValueError:
        return None
    return [{"functionCall": {"name": name, "args": args}}]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self, body):
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        with open(self.server.log_path, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {"method": self.command, "path": self.path, "body": parsed},
                    ensure_ascii=False,
                )
                + "\n"
            )

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record(b"")
        if "/models" in self.path:
            self.send_json({"models": [{"name": "models/gemini-2.5-flash"}]})
        else:
            self.send_json({"error": {"code": 404, "message": "mock"}}, 404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.record(body)
        path = self.path.split("?")[0]
        if path.endswith(":countTokens"):
            self.send_json({"totalTokens": 10})
        elif path.endswith(":streamGenerateContent"):
            data = ("data: " + json.dumps(answer(REPLY, tool_call(body))) + "\r\n\r\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path.endswith(":generateContent"):
            # Side calls (routing, next-speaker, titles) ask for JSON; a bare
            # object answers most of them and the CLI falls back on the rest.
            self.send_json(answer(REPLY))
        else:
            self.send_json({"error": {"code": 404, "message": "mock"}}, 404)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--log", required=True)
    a = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.log_path = a.log
    srv.serve_forever()


if __name__ == "__main__":
    main()
