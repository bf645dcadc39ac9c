#!/usr/bin/python3
"""A small but real model server for the gateway tests.

It serves two seeded torch models on CPU (built in well under a second):
  * `tiny-mlp`: a 2-layer MLP, FP32 [N, 4] -> FP32 [N, 3], over KServe v2 (Open Inference
    Protocol) REST.
  * `tiny-lm` (and any other name asked for on the OpenAI routes): a character-level bigram
    language model (embedding -> tanh MLP -> logits over 28 characters), sampled with a
    generator seeded from the prompt, so the same prompt gives the same text. One token is
    one character: prompt_tokens = len(prompt), completion_tokens = characters generated.

Protocols:
  KServe v2:  GET /v2, /v2/health/live, /v2/health/ready, /v2/models/{m}[/versions/{v}],
              /v2/models/{m}[/versions/{v}]/ready, POST /v2/models/{m}[/versions/{v}]/infer
  OpenAI:     POST /v1/chat/completions, /v1/completions (stream or not; stream_options.
              include_usage adds a final `choices: []` chunk with usage), /v1/embeddings,
              GET /v1/models
  Debug:      ANY /debug/headers (echo of the request as received: method, path, headers,
              body), GET /debug/requests (every request received so far, except the
              /debug/requests, /debug/stats and /debug/reset calls themselves),
              POST /debug/reset, GET /debug/stats (connections, requests, in_flight,
              name, zone, mode), GET|POST /debug/mode (run-time behaviour, below)
  Health:     GET /health, /v2/health/ready (503 while `unready`), /v2/health/live (200)

Test knobs, per request (headers) or for every request (flags):
  x-test-latency-ms: N        --latency-ms N       wait before answering
  x-test-chunk-delay-ms: N    --chunk-delay-ms N   wait between stream chunks
  x-test-status: CODE         --error-rate P       answer CODE (or --error-status for the
                                                   random share P) with a JSON error
  x-test-status: drop                              close the connection without answering
  x-test-status: garbage|cl_te|bad_chunk|short_body  a broken response (not HTTP, both
                                                   Content-Length and chunked with a second
                                                   response behind, a bad chunk size, a
                                                   body shorter than Content-Length), then
                                                   close
  x-test-close-after-chunks: N                     stream N chunks, then close the socket
                                                   (no final chunk, no [DONE])
  x-test-completion-tokens: N                      report N completion tokens in usage
                                                   (without generating them)
  x-test-chunked: 1                                send a non-stream JSON body chunked

Run-time behaviour, for every later model request (not /debug/*, not health): POST
/debug/mode with a JSON object; keys left out keep their value, null resets one:
  {"status": 500|503|null,   answer this status (a per-request x-test-status wins)
   "latency_ms": N,          wait N ms before answering (x-test-latency-ms wins)
   "unready": true|false,    /health and /v2/health/ready answer 503
   "drift": X,               KServe outputs shifted by +X; OpenAI usage reports X more
                             completion tokens
   "hold": true|false}       model requests wait until hold is set back to false
GET /debug/mode shows the mode; POST /debug/reset clears the request log only.

--name NAME adds `x-test-server: NAME` to every response (and to /debug/stats); --zone Z
is informational (shown in /debug/stats). SIGTERM is graceful: the listener closes, idle
keep-alive connections are closed, requests in flight finish (their responses carry
`Connection: close`), then the process exits 0.

`--port 0` picks a free port; the line `model_server listening on http://127.0.0.1:PORT` is
printed (and flushed) on stdout once the socket accepts connections.
"""

import argparse
import bisect
import http.server
import itertools
import json
import random
import re
import signal
import socket
import sys
import threading
import time
import uuid

import torch

VOCAB = " abcdefghijklmnopqrstuvwxyz."
KSERVE_MODELS = {"tiny-mlp": "1"}
DEFAULT_LM_MODELS = ["tiny-lm", "tiny-lm-2", "big-lm"]
EMBED_DIM = 16


class Models:
    """The two torch models, built from a fixed seed (no files to load)."""

    def __init__(self, seed):
        torch.manual_seed(seed)
        torch.set_num_threads(1)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, 3)).eval()
        v = len(VOCAB)
        self.emb = torch.nn.Embedding(v, EMBED_DIM)
        self.lm = torch.nn.Sequential(torch.nn.Linear(EMBED_DIM, 32), torch.nn.Tanh(),
                                      torch.nn.Linear(32, v)).eval()
        # Next-character distribution for every previous character, computed once:
        # generation is then a table lookup + sampling, cheap under many threads.
        with torch.no_grad():
            self.next_probs = torch.softmax(self.lm(self.emb.weight) * 2.0, dim=-1)
        # Sampling runs in Python on the cumulative table (about 1 us a token instead of
        # 30 us for torch.multinomial), so long generations stay far below test timeouts.
        self.cdf = [list(itertools.accumulate(row)) for row in self.next_probs.tolist()]

    def infer(self, x):
        with torch.no_grad():
            return self.mlp(x)

    def generate(self, prompt, n):
        seed = sum((i + 1) * ord(c) for i, c in enumerate(prompt[-64:])) % (2**31)
        rng = random.Random(seed)
        prev = VOCAB.find(prompt[-1].lower()) if prompt else 0
        prev = max(prev, 0)
        last = len(VOCAB) - 1
        out = []
        for _ in range(n):
            prev = min(bisect.bisect_right(self.cdf[prev], rng.random() * self.cdf[prev][-1]),
                       last)
            out.append(VOCAB[prev])
        return "".join(out)

    def embed(self, text):
        idx = [max(VOCAB.find(c.lower()), 0) for c in text] or [0]
        with torch.no_grad():
            return self.emb(torch.tensor(idx)).mean(dim=0).tolist()


# x-test-status values that make the server answer with a broken response, then close.
BAD_RESPONSES = {
    "garbage": b"THIS IS NOT HTTP\r\n\r\n",
    "cl_te": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
              b"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n{\"smuggled\":true}"),
    "bad_chunk": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
    "short_body": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 100\r\n\r\n{\"partial\":"),
}


HEALTH_PATHS = ("/health", "/v2/health/live", "/v2/health/ready")
NEUTRAL_MODE = {"status": None, "latency_ms": 0, "unready": False, "drift": 0, "hold": False}


def set_mode(st, req):
    """Applies a /debug/mode update; returns an error text or None."""
    new = {}
    for k, v in req.items():
        if k not in NEUTRAL_MODE:
            return "unknown mode key %r (known: %s)" % (k, ", ".join(sorted(NEUTRAL_MODE)))
        if v is None:
            v = NEUTRAL_MODE[k]
        elif k == "status" and not (isinstance(v, int) and 100 <= v <= 599):
            return "status must be an HTTP status code or null"
        elif k in ("latency_ms", "drift") and (isinstance(v, bool) or
                                              not isinstance(v, (int, float))):
            return "%s must be a number" % k
        elif k in ("unready", "hold") and not isinstance(v, bool):
            return "%s must be true or false" % k
        new[k] = v
    with st.lock:
        st.mode.update(new)
        if st.mode["hold"]:
            st.released.clear()
        else:
            st.released.set()
    return None


class BadRequest(Exception):
    pass


class State:
    def __init__(self, args):
        self.args = args
        self.models = Models(args.seed)
        self.lm_models = args.lm_models
        self.rng = random.Random(args.seed)
        self.lock = threading.Lock()
        self.requests = []  # log of received requests (for smuggling / forwarding checks)
        self.connections = 0
        self.request_count = 0
        self.in_flight = 0  # model/debug requests being handled now
        self.handlers = set()  # live connection handlers (graceful stop closes idle ones)
        self.stopping = False
        self.mode = dict(NEUTRAL_MODE)
        self.released = threading.Event()  # set while not holding
        self.released.set()

    def log(self, entry):
        with self.lock:
            self.request_count += 1
            if len(self.requests) < 10000:
                self.requests.append(entry)


def flatten(data):
    if isinstance(data, list):
        out = []
        for d in data:
            out.extend(flatten(d))
        return out
    return [data]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gantry-test-model-server/1"
    timeout = 120  # an idle keep-alive connection is dropped after this (seconds)

    def setup(self):
        super().setup()
        # Head and body go out in separate writes: without this, Nagle's algorithm and
        # the client's delayed ACK cost ~40 ms a keep-alive request.
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        st = self.server.state
        self.busy = False
        with st.lock:
            st.connections += 1
            st.handlers.add(self)

    def finish(self):
        st = self.server.state
        with st.lock:
            st.handlers.discard(self)
        try:
            super().finish()
        except OSError:
            pass

    def parse_request(self):
        # Busy from the moment a request line is in: a graceful stop closes only idle
        # keep-alive connections.
        self.busy = True
        ok = super().parse_request()
        if not ok:
            self.busy = False
        return ok

    def end_headers(self):
        st = self.server.state
        if st.args.name:
            self.send_header("x-test-server", st.args.name)
        if st.stopping:
            # Graceful stop: this response is the connection's last.
            self.send_header("Connection", "close")
        super().end_headers()

    def log_message(self, fmt, *args):  # quiet; the request log is at /debug/requests
        if self.server.state.args.verbose:
            sys.stderr.write("model_server: " + (fmt % args) + "\n")

    # ---------------------------------------------------------------- plumbing
    def read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if te.lower() == "chunked":
            body = b""
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline(65537)
        n = int(self.headers.get("Content-Length", "0") or "0")
        return self.rfile.read(n) if n > 0 else b""

    def send_json(self, status, obj, extra=None):
        if status in (204, 304) or (100 <= status < 200):
            self.send_response(status)
            self.end_headers()
            self.wfile.flush()
            return
        body = json.dumps(obj).encode()
        if self.command == "HEAD":
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.headers.get("x-test-chunked") == "1":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            half = len(body) // 2
            for part in (body[:half], body[half:]):
                if part:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        self.wfile.flush()

    def send_empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.wfile.flush()

    def error_json(self, status, message, openai=False):
        if openai:
            obj = {"error": {"message": message, "type": "invalid_request_error",
                             "code": status}}
        else:
            obj = {"error": message}
        self.send_json(status, obj)

    def header_int(self, name, default):
        v = self.headers.get(name)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            return default

    def drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---------------------------------------------------------------- dispatch
    def handle_any(self, method):
        st = self.server.state
        with st.lock:
            st.in_flight += 1
            self.busy = True
        try:
            self.handle_request(method)
        finally:
            with st.lock:
                st.in_flight -= 1
                self.busy = False
            if st.stopping:
                self.close_connection = True

    def handle_request(self, method):
        st = self.server.state
        try:
            body = self.read_body()
        except (ValueError, OSError):
            self.error_json(400, "bad request body framing")
            self.close_connection = True
            return
        path = self.path.split("?", 1)[0]
        entry = {"method": method, "path": self.path, "headers": list(self.headers.items()),
                 "body": body[:65536].decode("utf-8", "replace"), "body_len": len(body),
                 "time": time.time()}
        if path not in ("/debug/requests", "/debug/stats", "/debug/reset"):
            st.log(entry)

        if path.startswith("/debug/"):
            return self.debug(method, path, entry)
        # Health answers ignore the mode's status, latency and hold: only `unready` counts
        # there (per-request x-test-* headers still apply, as everywhere).
        health = path in HEALTH_PATHS
        with st.lock:
            mode = dict(st.mode) if not health else dict(NEUTRAL_MODE, unready=st.mode["unready"])
        if mode["hold"]:
            st.released.wait(300)
        latency = self.header_int("x-test-latency-ms", mode["latency_ms"] or st.args.latency_ms)
        if latency > 0:
            time.sleep(latency / 1000.0)
        status = self.headers.get("x-test-status")
        if status is None and mode["status"] is not None:
            status = str(mode["status"])
        if status == "drop":
            return self.drop()
        if status in BAD_RESPONSES:
            self.wfile.write(BAD_RESPONSES[status])
            self.wfile.flush()
            return self.drop()
        if status is None and st.args.error_rate > 0:
            with st.lock:
                hit = st.rng.random() < st.args.error_rate
            if hit:
                status = str(st.args.error_status)
        if status is not None:
            try:
                code = int(status)
            except ValueError:
                code = 500
            return self.send_json(code, {"error": {"message": "injected error %d" % code,
                                                   "type": "test", "code": code}},
                                  {"Retry-After": "1"} if code in (429, 503) else None)
        if health and path != "/v2/health/live" and mode["unready"]:
            return self.send_json(503, {"error": "not ready (test mode)"})
        try:
            self.route(method, path, body)
        except BadRequest as e:
            self.error_json(400, str(e), openai=path.startswith("/v1/"))
        except RecursionError:  # json.loads on absurdly nested input
            self.error_json(400, "JSON nested too deeply", openai=path.startswith("/v1/"))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_HEAD(self):
        self.handle_any("HEAD")

    def debug(self, method, path, entry):
        st = self.server.state
        if path == "/debug/headers":
            return self.send_json(200, entry)
        if path == "/debug/requests":
            with st.lock:
                reqs = list(st.requests)
            return self.send_json(200, {"requests": reqs})
        if path == "/debug/reset" and method == "POST":
            with st.lock:
                st.requests.clear()
            return self.send_json(200, {"ok": True})
        if path == "/debug/stats":
            with st.lock:
                stats = {"connections": st.connections, "requests": st.request_count,
                         "in_flight": st.in_flight - 1,  # not this call itself
                         "name": st.args.name, "zone": st.args.zone, "mode": dict(st.mode)}
            return self.send_json(200, stats)
        if path == "/debug/mode":
            if method == "GET":
                with st.lock:
                    return self.send_json(200, dict(st.mode))
            if method != "POST":
                return self.error_json(405, "use GET or POST")
            try:
                req = json.loads(entry["body"] or "{}")
            except ValueError:
                return self.error_json(400, "body is not JSON")
            if not isinstance(req, dict):
                return self.error_json(400, "body must be a JSON object")
            err = set_mode(st, req)
            if err:
                return self.error_json(400, err)
            with st.lock:
                return self.send_json(200, dict(st.mode))
        return self.error_json(404, "no debug endpoint " + path)

    def route(self, method, path, body):
        if path in ("/v2", "/v2/"):
            if method != "GET":
                return self.error_json(405, "use GET")
            return self.send_json(200, {"name": "gantry-test-model-server", "version": "1",
                                        "extensions": []})
        if path in HEALTH_PATHS:
            return self.send_empty(200)
        m = re.fullmatch(r"/v2/models/([^/]+)(?:/versions/([^/]+))?(/ready|/infer)?", path)
        if m:
            return self.kserve(method, m.group(1), m.group(2), m.group(3) or "", body)
        if path == "/v1/models" and method == "GET":
            return self.send_json(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": 0, "owned_by": "gantry-test"}
                for n in self.server.state.lm_models]})
        if path in ("/v1/chat/completions", "/v1/completions") and method == "POST":
            return self.completions(path == "/v1/chat/completions", body)
        if path == "/v1/embeddings" and method == "POST":
            return self.embeddings(body)
        return self.error_json(404, "no route %s %s" % (method, path),
                               openai=path.startswith("/v1/"))

    # ---------------------------------------------------------------- KServe v2
    def kserve(self, method, name, version, verb, body):
        if name not in KSERVE_MODELS or (version is not None and version != KSERVE_MODELS[name]):
            return self.error_json(404, "unknown model '%s' version '%s'" % (name, version))
        ver = KSERVE_MODELS[name]
        if verb == "":
            return self.send_json(200, {
                "name": name, "versions": [ver], "platform": "pytorch_torchscript",
                "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}],
                "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1, 3]}]})
        if verb == "/ready":
            return self.send_empty(200)
        if method != "POST":
            return self.error_json(405, "infer needs POST")
        try:
            req = json.loads(body)
        except ValueError:
            raise BadRequest("request body is not JSON")
        if not isinstance(req, dict) or not isinstance(req.get("inputs"), list) or \
                len(req["inputs"]) != 1:
            raise BadRequest("expected one input tensor in 'inputs'")
        t = req["inputs"][0]
        if not isinstance(t, dict) or t.get("datatype") != "FP32":
            raise BadRequest("input datatype must be FP32")
        shape = t.get("shape")
        if not isinstance(shape, list) or len(shape) != 2 or shape[1] != 4 or \
                not all(isinstance(s, int) and s > 0 for s in shape):
            raise BadRequest("input shape must be [N, 4]")
        data = flatten(t.get("data"))
        if len(data) != shape[0] * 4 or not all(isinstance(v, (int, float)) and
                                                not isinstance(v, bool) for v in data):
            raise BadRequest("input data must hold N*4 numbers")
        y = self.server.state.models.infer(torch.tensor(data, dtype=torch.float32).view(-1, 4))
        with self.server.state.lock:
            drift = float(self.server.state.mode["drift"] or 0)
        out = {"model_name": name, "model_version": ver,
               "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [shape[0], 3],
                            "data": [float(v) + drift for v in y.flatten().tolist()]}]}
        if "id" in req:
            out["id"] = req["id"]
        return self.send_json(200, out)

    # ---------------------------------------------------------------- OpenAI
    def completions(self, chat, body):
        st = self.server.state
        try:
            req = json.loads(body)
        except ValueError:
            raise BadRequest("request body is not JSON")
        if not isinstance(req, dict) or not isinstance(req.get("model"), str):
            raise BadRequest("'model' (string) is required")
        if chat:
            msgs = req.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise BadRequest("'messages' must be a non-empty list")
            parts = []
            for msg in msgs:
                if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
                    raise BadRequest("every message needs string 'content'")
                parts.append(msg["content"])
            prompt = "\n".join(parts)
        else:
            prompt = req.get("prompt")
            if not isinstance(prompt, str):
                raise BadRequest("'prompt' (string) is required")
        n = req.get("max_completion_tokens", req.get("max_tokens", 16))
        if not isinstance(n, int) or n < 1 or n > 100000:
            raise BadRequest("max_tokens must be an integer in [1, 100000]")
        text = st.models.generate(prompt, n)
        with st.lock:
            drift = int(st.mode["drift"] or 0)
        usage = {"prompt_tokens": len(prompt),
                 "completion_tokens": self.header_int("x-test-completion-tokens",
                                                      len(text)) + drift}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        model = req["model"]
        if not req.get("stream"):
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text},
                          "finish_reason": "length"}
                obj = "chat.completion"
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
                obj = "text_completion"
            return self.send_json(200, {"id": rid, "object": obj, "created": created,
                                        "model": model, "choices": [choice], "usage": usage})
        so = req.get("stream_options") or {}
        include_usage = isinstance(so, dict) and so.get("include_usage") is True
        obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choices, use=None):
            c = {"id": rid, "object": obj, "created": created, "model": model,
                 "choices": choices}
            if include_usage:
                c["usage"] = use
            return c

        events = []
        if chat:
            events.append(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                                  "finish_reason": None}]))
        for i, ch in enumerate(text):
            fin = "length" if i == len(text) - 1 else None
            if chat:
                events.append(chunk([{"index": 0, "delta": {"content": ch},
                                      "finish_reason": fin}]))
            else:
                events.append(chunk([{"index": 0, "text": ch, "logprobs": None,
                                      "finish_reason": fin}]))
        if include_usage:
            events.append(chunk([], usage))
        self.stream_sse(events)

    def stream_sse(self, events):
        st = self.server.state
        delay = self.header_int("x-test-chunk-delay-ms", st.args.chunk_delay_ms) / 1000.0
        close_after = self.header_int("x-test-close-after-chunks", -1)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        payloads = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
        payloads.append(b"data: [DONE]\n\n")
        for i, p in enumerate(payloads):
            if i == close_after:
                return self.drop()
            if i > 0 and delay > 0:
                time.sleep(delay)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def embeddings(self, body):
        try:
            req = json.loads(body)
        except ValueError:
            raise BadRequest("request body is not JSON")
        if not isinstance(req, dict) or not isinstance(req.get("model"), str):
            raise BadRequest("'model' (string) is required")
        inp = req.get("input")
        texts = [inp] if isinstance(inp, str) else inp
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BadRequest("'input' must be a string or a list of strings")
        models = self.server.state.models
        data = [{"object": "embedding", "index": i, "embedding": models.embed(t)}
                for i, t in enumerate(texts)]
        n = sum(len(t) for t in texts)
        return self.send_json(200, {"object": "list", "data": data, "model": req["model"],
                                    "usage": {"prompt_tokens": n, "total_tokens": n}})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--chunk-delay-ms", type=int, default=0)
    ap.add_argument("--error-rate", type=float, default=0.0)
    ap.add_argument("--error-status", type=int, default=503)
    ap.add_argument("--lm-models", default=",".join(DEFAULT_LM_MODELS),
                    help="comma-separated names listed by GET /v1/models")
    ap.add_argument("--name", default="",
                    help="sent as `x-test-server: NAME` on every response")
    ap.add_argument("--zone", default="", help="availability zone label (informational)")
    ap.add_argument("--grace-s", type=float, default=60.0,
                    help="SIGTERM: how long requests in flight may take to finish")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    args.lm_models = [m for m in args.lm_models.split(",") if m]
    srv = Server((args.host, args.port), Handler)
    srv.state = State(args)
    # SIGTERM: serve_forever runs on this (the main) thread, so the handler only asks
    # another thread to stop it; the graceful part runs below, once it has returned.
    signal.signal(signal.SIGTERM,
                  lambda *_: threading.Thread(target=srv.shutdown, daemon=True).start())
    print("model_server listening on http://%s:%d" % (args.host, srv.server_address[1]),
          flush=True)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()  # no new connections from here on
    graceful_stop(srv.state, args.grace_s)


def graceful_stop(st, grace_s):
    """Closes idle keep-alive connections, waits (at most grace_s) for requests in flight
    to finish; their responses say `Connection: close`."""
    with st.lock:
        st.stopping = True
        st.released.set()  # a held request must not block the stop
    deadline = time.monotonic() + grace_s
    while True:
        with st.lock:
            idle = [h for h in st.handlers if not h.busy]
            busy = st.in_flight
        for h in idle:
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if busy == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if busy:
        sys.stderr.write("model_server: stopped with %d requests in flight\n" % busy)
    else:
        print("model_server stopped gracefully", flush=True)


if __name__ == "__main__":
    main()
