"""Shared pieces of the gateway suites: the base gateway.yaml, roles, request bodies and
small helpers around fixtures.py."""

import copy
import json
import os

import fixtures as fx

ISSUER = "https://issuer.test.gantry"
AUDIENCE = "gantry"

ROLES = {
    "user": [{"action": "model:invoke", "resource": "tiny-*"}],
    "admin": [{"action": "*", "resource": "*"}],
    "reader": [{"action": "usage:read"}],
    # roles the limit tests give their own counters to
    "limited": [{"action": "model:invoke", "resource": "tiny-*"}],
    "tpm": [{"action": "model:invoke", "resource": "tiny-*"}],
    "quota": [{"action": "model:invoke", "resource": "tiny-*"}],
    "tokquota": [{"action": "model:invoke", "resource": "tiny-*"}],
    "shared": [{"action": "model:invoke", "resource": "tiny-*"}],
}


def base_config(tmp, model_url, **over):
    """The suites' gateway.yaml: OpenAI on /v1/, KServe on /v2/ (health open), the model
    server's /debug/ open (to see what the backend received), api keys on, roles above."""
    cfg = {
        "listen": "127.0.0.1:0",
        "workers": 2,
        "limits": {"max_header_bytes": "8KiB", "max_body_bytes": "64KiB",
                   "header_timeout": "2s", "body_timeout": "5s", "idle_timeout": "30s",
                   "upstream_connect_timeout": "2s", "upstream_timeout": "30s"},
        "backends": [{"name": "llm", "url": model_url, "max_idle": 16}],
        "routes": [
            {"path": "/v2/health/ready", "protocol": "kserve", "backend": "llm", "auth": "none"},
            {"path": "/v2/health/live", "protocol": "kserve", "backend": "llm", "auth": "none"},
            {"prefix": "/v1/", "protocol": "openai", "backend": "llm",
             "models": [{"match": "*", "backend": "llm"}]},
            {"prefix": "/v2/", "protocol": "kserve", "backend": "llm",
             "models": [{"match": "*", "backend": "llm"}]},
            {"prefix": "/debug/", "protocol": "http", "backend": "llm", "auth": "none"},
        ],
        "state": os.path.join(tmp, "gateway.db"),
        "auth": {"api_keys": True},
        "roles": copy.deepcopy(ROLES),
    }
    cfg.update(over)
    return cfg


CHAT = {"model": "tiny-lm", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
INFER = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                     "data": [0.5, -1.0, 2.0, 0.25]}]}


def chat(gw, key=None, body=None, headers=None, path="/v1/chat/completions", **kw):
    h = dict(headers or {})
    if key:
        h.update(fx.auth(key))
    return fx.request("POST", gw.url + path, body if body is not None else CHAT, h, **kw)


def metrics(gw):
    r = fx.request("GET", gw.url + "/metrics")
    assert r.status == 200, "GET /metrics: %r" % r
    return r.body.decode()


def metric_sum(text, name_rx, label_filter=None):
    """Sum of the samples whose metric name matches the regex (and labels contain
    label_filter); None when no sample matches."""
    import re
    total, seen = 0.0, False
    for name, samples in fx.parse_metrics(text).items():
        if not re.search(name_rx, name):
            continue
        for labels, v in samples:
            if label_filter and any(labels.get(k) != val for k, val in label_filter.items()):
                continue
            total += v
            seen = True
    return total if seen else None


def error_code(resp):
    """The contract's JSON error: {"error": {"code", "message"}}; returns the code."""
    doc = json.loads(resp.body)
    assert isinstance(doc.get("error"), dict), "error body not {error:{code,message}}: %r" % resp
    assert "code" in doc["error"] and "message" in doc["error"], resp
    return doc["error"]["code"]


def keys_for(state, *pairs):
    """Creates keys offline: keys_for(db, ("u1", "user"), ...) -> {name: json}."""
    os.makedirs(os.path.dirname(state), exist_ok=True)
    return {n: fx.create_key(state, n, r) for n, r in pairs}
