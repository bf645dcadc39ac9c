"""/metrics after real traffic (2xx, 401, 403, 404, 429, a stream, Redis and audit on)
passes `promtool check metrics` and carries the request and token counters."""

import os
import subprocess

import pytest

import fixtures as fx
from gwtest import CHAT, base_config, chat, metric_sum, metrics


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir):
    promtool = fx.need_tool("promtool", "prometheus")
    redis = gateways.service(fx.Redis(tmpdir=tmp_dir))
    state = os.path.join(tmp_dir, "metrics.db")
    key = fx.create_key(state, "m", "limited")["key"]
    prefix = os.path.join(tmp_dir, "audit")
    fx.gantry("audit", "keygen", "--out", prefix)
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["rate_limits"] = [{"scope": "role", "match": "limited", "requests": 8, "per": "1h"}]
    cfg["redis"] = {"address": redis.address, "timeout": "500ms", "failure_mode": "open"}
    priv = [p for p in os.listdir(tmp_dir) if p.startswith("audit") and
            "PRIVATE" in open(os.path.join(tmp_dir, p), errors="replace").read()]
    assert priv, "gantry audit keygen wrote no private key"
    cfg["audit"] = {"path": os.path.join(tmp_dir, "a.jsonl"),
                    "signing_key": os.path.join(tmp_dir, priv[0])}
    gw = gateways.start(cfg)
    for _ in range(3):
        assert chat(gw, key).status == 200
    chat(gw)  # 401
    chat(gw, key, dict(CHAT, model="big-lm"))  # 403
    fx.request("GET", gw.url + "/nowhere")  # 404
    r = chat(gw, key, dict(CHAT, stream=True))
    assert r.status == 200
    while chat(gw, key).status == 200:  # up to the 429
        pass
    return {"gw": gw, "promtool": promtool}


def test_promtool_check_metrics(env):
    r = fx.request("GET", env["gw"].url + "/metrics")
    assert r.status == 200
    assert r.headers.get("content-type", "").startswith("text/plain"), r.headers
    cp = subprocess.run([env["promtool"], "check", "metrics"], input=r.body,
                        capture_output=True)
    assert cp.returncode == 0, "promtool check metrics failed:\n%s%s" % (
        cp.stdout.decode(), cp.stderr.decode())


def test_counters_after_traffic(env):
    text = metrics(env["gw"])
    req = metric_sum(text, r"^gantry_gateway_requests_total$")
    assert req is not None and req >= 8, "gantry_gateway_requests_total = %r" % req
    codes = {labels.get("code") or labels.get("status")
             for labels, _ in fx.parse_metrics(text).get("gantry_gateway_requests_total", [])}
    for c in ("200", "401", "403", "404", "429"):
        assert c in codes, "no requests_total sample with code %s (have %r)" % (c, codes)
    tok = metric_sum(text, r"^gantry_gateway_tokens_total$")
    assert tok and tok > 0, "gantry_gateway_tokens_total = %r" % tok
    assert metric_sum(text, r"^gantry_gateway_redis_up$") == 1
    assert (metric_sum(text, r"^gantry_gateway_audit_records_total$") or 0) > 0


def test_metrics_needs_no_key_and_is_not_proxied(env, model):
    model.reset()
    assert fx.request("GET", env["gw"].url + "/metrics").status == 200
    assert not [q for q in model.requests() if q["path"].startswith("/metrics")]
