#!/usr/bin/python3
"""The tour's model server: KServe v2 / Open Inference Protocol over HTTP/1.1.

    model_server.py --port P --name NAME --model churn \
        --registry-db DB --ref churn@production --dest DIR    # the primary (PyTorch)
    model_server.py --port P --name NAME --model churn-fallback \
        --fallback fallback.json                               # the fallback (logistic)

The primary downloads the model from the registry with `gantry registry
download`, which verifies every byte against the signed manifest and refuses a
version without a trusted signature (the registry's policy), then loads the
weights into a PyTorch MLP. The fallback is the logistic regression from the
data step: simpler, less accurate, no registry needed.

Endpoints: GET /v2/health/live, /v2/health/ready, /v2/models/<model>,
/v2/models/<model>/ready; POST /v1/chat/completions (OpenAI protocol: the
last user message is a customer record as JSON, the answer explains its churn
risk, with token usage); POST /v2/models/<model>/infer with one FP64 input
[batch, 6] answers the FP64 outputs "probs" [batch, 2] (class probabilities,
first: what `gantry drift validate` reads) and "churn" [batch] (the churn
probability alone: the gateway's anomaly detector watches its mean, which
the shares of two classes, always averaging 0.5, cannot show).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

FEATURES = ["tenure_months", "monthly_spend", "support_calls", "usage_hours", "discount",
            "late_payments"]


class Primary:
    def __init__(self, args):
        import torch  # only the primary needs it
        self.torch = torch
        torch.set_num_threads(1)
        shutil.rmtree(args.dest, ignore_errors=True)
        gantry = os.environ.get("GANTRY", "gantry")
        p = subprocess.run([gantry, "registry", "download", args.ref, args.dest, "--db",
                            args.registry_db], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"model_server: gantry registry download {args.ref} refused "
                     f"(exit {p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
        print(f"model_server: downloaded and verified {args.ref}: {p.stdout.strip()}",
              file=sys.stderr, flush=True)
        with open(os.path.join(args.dest, "model.json")) as f:
            meta = json.load(f)
        w = np.load(os.path.join(args.dest, "weights.npz"), allow_pickle=False)
        n_in = w["0.weight"].shape[1]
        h = meta["hidden"]
        self.model = torch.nn.Sequential(torch.nn.Linear(n_in, h), torch.nn.ReLU(),
                                         torch.nn.Linear(h, h), torch.nn.ReLU(),
                                         torch.nn.Linear(h, 2))
        self.model.load_state_dict({k: torch.tensor(w[k]) for k in w.files})
        self.model.eval()
        self.mean, self.std = np.array(meta["mean"]), np.array(meta["std"])
        self.n_features = n_in
        self.version = os.path.basename(os.path.realpath(args.dest))

    def predict(self, x):
        with self.torch.no_grad():
            z = self.torch.tensor((x - self.mean) / self.std, dtype=self.torch.float32)
            return self.torch.softmax(self.model(z), dim=1).double().numpy()


class Fallback:
    def __init__(self, args):
        with open(args.fallback) as f:
            m = json.load(f)
        self.mean, self.std = np.array(m["mean"]), np.array(m["std"])
        self.w, self.b = np.array(m["w"]), float(m["b"])
        self.n_features = len(self.w)
        self.version = "logistic"

    def predict(self, x):
        p = 1.0 / (1.0 + np.exp(-(((x - self.mean) / self.std) @ self.w + self.b)))
        return np.column_stack([1.0 - p, p])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", default="model-server", help="this server's name (in answers)")
    ap.add_argument("--model", default="churn", help="the model name in /v2/models/<model>")
    ap.add_argument("--registry-db")
    ap.add_argument("--ref", default="churn@production")
    ap.add_argument("--dest", help="download directory (primary)")
    ap.add_argument("--fallback", help="fallback.json: serve the logistic fallback instead")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if not args.fallback and not (args.registry_db and args.dest):
        ap.error("give --registry-db and --dest (primary) or --fallback FILE")
    model = Fallback(args) if args.fallback else Primary(args)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # One write per answer, sent at once: unbuffered, the head and the body
        # go out as two segments, and Nagle plus the peer's delayed ACK hold
        # the second for 40 ms on every keep-alive request.
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status, msg):
            self.reply(status, {"error": msg})

        def do_GET(self):
            base = f"/v2/models/{args.model}"
            if self.path in ("/v2/health/live", "/v2/health/ready", base + "/ready"):
                self.reply(200, {"live": True, "ready": True})
            elif self.path == base:
                self.reply(200, {"name": args.model, "versions": [model.version],
                                 "platform": "pytorch" if not args.fallback else "numpy",
                                 "inputs": [{"name": "input-0", "datatype": "FP64",
                                             "shape": [-1, model.n_features]}],
                                 "outputs": [{"name": "probs", "datatype": "FP64",
                                              "shape": [-1, 2]},
                                             {"name": "churn", "datatype": "FP64",
                                              "shape": [-1]}]})
            else:
                self.error(404, f"no route {self.path}")

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path == "/v1/chat/completions":
                self.explain(body)
                return
            if self.path != f"/v2/models/{args.model}/infer":
                self.error(404, f"no model at {self.path}; this server serves {args.model}")
                return
            try:
                req = json.loads(body)
                t = req["inputs"][0]
                shape = [int(s) for s in t["shape"]]
                x = np.asarray(t["data"], dtype=float).reshape(shape)
            except (ValueError, KeyError, IndexError, TypeError) as e:
                self.error(400, f"bad infer request: {e}")
                return
            if x.ndim != 2 or x.shape[1] != model.n_features:
                self.error(400, f"input shape {list(x.shape)}: want [batch, {model.n_features}]")
                return
            probs = model.predict(x)
            self.reply(200, {"model_name": args.model, "model_version": model.version,
                             "id": req.get("id", ""), "parameters": {"served_by": args.name},
                             "outputs": [{"name": "probs", "datatype": "FP64",
                                          "shape": list(probs.shape),
                                          "data": [round(float(v), 6) for v in probs.ravel()]},
                                         {"name": "churn", "datatype": "FP64",
                                          "shape": [probs.shape[0]],
                                          "data": [round(float(v), 6) for v in probs[:, 1]]}]})

        def explain(self, body):
            """OpenAI chat completions: the last user message is a customer
            record as JSON ({"tenure_months": 3, ...}); the answer explains the
            churn risk in a sentence, with a `usage` block the gateway's token
            limits and quotas count."""
            try:
                req = json.loads(body)
                record = json.loads(req["messages"][-1]["content"])
                x = np.asarray([[float(record[f]) for f in FEATURES]])
            except (ValueError, KeyError, IndexError, TypeError) as e:
                self.error(400, f"bad chat request: want the last user message to be a JSON "
                                f"record with {', '.join(FEATURES)} ({e})")
                return
            p = float(model.predict(x)[0, 1])
            z = (x[0] - model.mean) / model.std
            top = sorted(range(len(FEATURES)), key=lambda i: -abs(z[i]))[:2]
            text = (f"Churn risk {p:.0%} ({'high' if p >= 0.5 else 'low'}). Furthest from a "
                    f"typical customer: " + ", ".join(
                        f"{FEATURES[i]} {x[0][i]:g} ({z[i]:+.1f} sd)" for i in top) + ".")
            prompt = sum(len(str(m.get("content", ""))) for m in req["messages"]) // 4 + 4
            completion = len(text) // 4 + 1
            self.reply(200, {"id": "chatcmpl-tour", "object": "chat.completion",
                             "model": req.get("model", args.model),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}],
                             "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                       "total_tokens": prompt + completion}})

        def log_message(self, fmt, *a):
            pass  # the gateway's audit log records every request

    print(f"model_server: {args.name} serving {args.model} on 127.0.0.1:{args.port}",
          file=sys.stderr, flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
