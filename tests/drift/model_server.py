#!/usr/bin/env python3
"""A tiny model server for `gantry drift validate` tests.

Serves on 127.0.0.1 (port 0 = any free port, printed as the first stdout line):
  POST /v2/models/sign/infer         KServe v2: label = 1 if x0 > 0 else 0, output shape [batch]
  POST /v2/models/sign_proba/infer   KServe v2: class probabilities, output shape [batch, 2]
  POST /v1/chat/completions          OpenAI-compatible: the user message is the row as JSON;
                                     replies "1" or "0"
Inputs: one FP64 tensor [batch, features] (x0 is column 0) or one tensor per
column (the one named "x0"). With --key K every request needs
"Authorization: Bearer K" (else 401).
"""
import argparse
import json
import math
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def x0_values(inputs):
    for t in inputs:
        if t.get("name") == "x0":
            return [float(v) for v in t["data"]]
    t = inputs[0]
    batch, features = t["shape"]
    return [float(t["data"][i * features]) for i in range(batch)]


class Handler(BaseHTTPRequestHandler):
    key = None

    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if self.key and self.headers.get("Authorization") != "Bearer " + self.key:
            return self.reply(401, {"error": "unauthorized"})
        if self.path == "/v2/models/sign/infer":
            xs = x0_values(body["inputs"])
            return self.reply(200, {"model_name": "sign", "outputs": [
                {"name": "label", "shape": [len(xs)], "datatype": "INT64",
                 "data": [1 if x > 0 else 0 for x in xs]}]})
        if self.path == "/v2/models/sign_proba/infer":
            xs = x0_values(body["inputs"])
            data = []
            for x in xs:
                p = 1 / (1 + math.exp(-4 * x))
                data += [1 - p, p]
            return self.reply(200, {"model_name": "sign_proba", "outputs": [
                {"name": "proba", "shape": [len(xs), 2], "datatype": "FP64", "data": data}]})
        if self.path == "/v1/chat/completions":
            row = json.loads(body["messages"][-1]["content"])
            label = "1" if float(row["x0"]) > 0 else "0"
            return self.reply(200, {"object": "chat.completion", "model": body.get("model", ""),
                                    "choices": [{"index": 0, "message": {
                                        "role": "assistant", "content": " " + label + "\n"}}]})
        return self.reply(404, {"error": "no route " + self.path})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--key")
    a = ap.parse_args()
    Handler.key = a.key
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
