#!/usr/bin/python3
"""A stand-in model server for examples/autoscale/scale-to-zero (Python standard library only).

    model_server.py --port 20000 [--name llm-20000] [--load-seconds 2]

Sleeps --load-seconds before listening (a model loading its weights), then serves
GET /healthz (200 once loaded) and POST /v1/chat/completions, answering in the shape
of an OpenAI chat completion with the last user message echoed and a `usage` block.
Replace it with your server (vLLM, TGI, ...): the gateway only needs /healthz and the route.
"""

import argparse
import json
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", default="model")
    ap.add_argument("--load-seconds", type=float, default=0.0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(args.load_seconds)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/healthz":
                self.reply(200, {"status": "ok", "name": args.name})
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                req = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self.reply(400, {"error": "body is not JSON"})
                return
            if self.path != "/v1/chat/completions":
                self.reply(404, {"error": "not found"})
                return
            messages = req.get("messages") or [{}]
            text = str(messages[-1].get("content", ""))
            self.reply(200, {
                "object": "chat.completion",
                "model": req.get("model", "example"),
                "served_by": args.name,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "echo: " + text}}],
                "usage": {"prompt_tokens": len(text.split()), "completion_tokens": len(text.split()) + 1,
                          "total_tokens": 2 * len(text.split()) + 1},
            })

        def log_message(self, fmt, *a):
            sys.stderr.write("%s %s\n" % (args.name, fmt % a))

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
