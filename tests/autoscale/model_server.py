#!/usr/bin/python3
"""A tiny model server for the gateway actuator's tests (python3 http.server).

    model_server.py --port 20001 --name llm-20001 [--record FILE]
                    [--startup-delay 0.5] [--delay 0.05]

GET  /healthz   200 {"status": "ok", "name": ...}
GET  /stats     200 {"name", "total", "ids": {id: count}}: every POST counted by
                the "id" of its JSON body (or its X-Test-Id header)
POST /...       200 {"name", "id", "echo": <the JSON body>} after --delay; each
                request also appends "<id>\n" to --record when given, so the
                count survives the process
--startup-delay waits before listening (a model that loads). SIGTERM stops it.
"""

import argparse
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", default="model")
    ap.add_argument("--record", default="")
    ap.add_argument("--startup-delay", type=float, default=0.0)
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()

    lock = threading.Lock()
    ids = {}
    total = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            sys.stderr.write("%s %s\n" % (args.name, fmt % a))

        def reply(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/healthz":
                self.reply(200, {"status": "ok", "name": args.name})
            elif self.path == "/stats":
                with lock:
                    self.reply(200, {"name": args.name, "total": total[0], "ids": dict(ids)})
            else:
                self.reply(404, {"error": "no such path"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            try:
                doc = json.loads(raw or b"{}")
            except ValueError:
                self.reply(400, {"error": "body is not JSON"})
                return
            rid = str(doc.get("id", "")) if isinstance(doc, dict) else ""
            rid = rid or self.headers.get("X-Test-Id", "")
            with lock:
                total[0] += 1
                ids[rid] = ids.get(rid, 0) + 1
                if args.record:
                    with open(args.record, "a") as f:
                        f.write(rid + "\n")
            if args.delay:
                time.sleep(args.delay)
            self.reply(200, {"name": args.name, "id": rid, "echo": doc})

    if args.startup_delay:
        time.sleep(args.startup_delay)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print("%s listening on 127.0.0.1:%d" % (args.name, args.port), flush=True)
    server.serve_forever()
    print("%s stopped" % args.name, flush=True)


if __name__ == "__main__":
    main()
