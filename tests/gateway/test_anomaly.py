"""Output anomaly detection end to end: a gateway with `anomaly:` (1 s windows, 10 s of
history before alerting, 2 of 3 windows to fire, 2 clean windows to resolve) and an
Alertmanager-v4 webhook sink pointing at a tiny receiver in this process. Steady KServe and
OpenAI traffic teaches it the baseline; then the model server is driven into a drifted
state (KServe outputs +5, 20 extra completion tokens), a broken one (500s) and a slow one
(+250 ms), and back. Each time a firing payload must arrive with alertname
GantryModelOutputAnomaly and the model/signal labels, `gantry gateway anomalies --json`
must show it firing, and a resolved payload must follow once the server is normal again."""

import os
import time

import pytest

import fixtures as fx
from gwtest import CHAT, INFER, base_config, metric_sum, metrics

ALERT = "GantryModelOutputAnomaly"
INFER_PATH = "/v2/models/tiny-mlp/infer"
KSERVE_MEAN = ("tiny-mlp", "output:OUTPUT0:mean")
TOKENS = ("tiny-lm", "completion_tokens")


@pytest.fixture(scope="module")
def env(tmp_dir, gateways, model):
    hook = gateways.service(fx.WebhookReceiver())
    state = os.path.join(tmp_dir, "anomaly.db")
    admin = fx.create_key(state, "root", "admin")["key"]
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["routes"] = [
        {"prefix": "/v1/", "protocol": "openai", "backend": "llm", "auth": "none"},
        {"prefix": "/v2/", "protocol": "kserve", "backend": "llm", "auth": "none"},
    ]
    cfg["anomaly"] = {
        "window": "1s", "min_requests": 3, "min_samples": 10, "min_history": "10s",
        "sensitivity": "low", "violations": 2, "of": 3, "resolve_after": 2,
        "notify": {"receiver": "gantry-test",
                   "sinks": [{"type": "webhook", "url": hook.url, "timeout": "2s",
                              "retries": 2, "retry_backoff": "100ms"}]},
    }
    gw = gateways.start(cfg, name="anomaly-gw")
    model.normal()
    # Steady traffic on both protocols for the whole module (500s are answers too).
    loads = [fx.Load(gw.url, INFER_PATH, INFER, threads=2, pause_s=0.04, ok_status=(200, 500),
                     classify=lambda r: r.status),
             fx.Load(gw.url, "/v1/chat/completions", CHAT, threads=2, pause_s=0.04,
                     ok_status=(200, 500), classify=lambda r: r.status)]
    for ld in loads:
        ld.start()
    try:
        yield {"gw": gw, "hook": hook, "admin": admin, "model": model}
    finally:
        for ld in loads:
            ld.stop()
        model.normal()


def anomalies(env):
    return fx.gantry_json("gateway", "anomalies", "--url", env["gw"].url, "--admin-key",
                          env["admin"])


def signal(env, model, sig):
    for s in anomalies(env)["signals"]:
        if s["model"] == model and s["signal"] == sig:
            return s
    return None


def wait_signal(env, key, pred, what, timeout=40):
    return fx.wait_until(lambda: (lambda s: s if s is not None and pred(s) else None)(
        signal(env, *key)), timeout=timeout, interval=0.3, what=what)


def wait_webhook(env, key, status, after, timeout=30):
    """The first alert for (model, signal) with `status` in a payload received after
    `after` (time.time()); checks the Alertmanager v4 shape; returns (payload, alert)."""
    hook = env["hook"]

    def match(p, a):
        lab = a.get("labels", {})
        return (a.get("status") == status and lab.get("model") == key[0] and
                lab.get("signal") == key[1])

    deadline = time.monotonic() + timeout
    while True:
        with hook.cond:
            for rec in hook.payloads:
                if rec["time"] < after or not isinstance(rec["body"], dict):
                    continue
                for a in rec["body"].get("alerts", []):
                    if match(rec["body"], a):
                        check_v4(rec["body"], a, status)
                        return rec["body"], a
        if time.monotonic() > deadline:
            raise AssertionError("no %s webhook for %s/%s within %ds; received: %s" % (
                status, key[0], key[1], timeout,
                [(a.get("status"), a.get("labels", {}).get("model"),
                  a.get("labels", {}).get("signal"))
                 for b in hook.bodies() if isinstance(b, dict) for a in b.get("alerts", [])]))
        time.sleep(0.2)


def check_v4(p, a, status):
    for f in ("receiver", "status", "alerts", "groupLabels", "commonLabels",
              "commonAnnotations", "externalURL", "version", "groupKey"):
        assert f in p, "webhook payload lacks %r: %r" % (f, p)
    assert p["version"] == "4" and p["receiver"] == "gantry-test", p
    assert p["groupLabels"] == {"alertname": ALERT}, p["groupLabels"]
    assert p["commonLabels"].get("alertname") == ALERT, p["commonLabels"]
    assert a["labels"]["alertname"] == ALERT and a["labels"].get("severity"), a
    for f in ("startsAt", "endsAt", "fingerprint", "annotations"):
        assert f in a, "alert lacks %r: %r" % (f, a)
    assert a["annotations"].get("summary") and a["annotations"].get("description"), a
    if status == "firing":
        assert p["status"] == "firing", p
        assert a["endsAt"] == "0001-01-01T00:00:00Z", a  # Alertmanager's "not ended"


def quiet(env, key, timeout=30):
    """Waits until (model, signal) is ready and not firing (noise from the shared CPUs
    must not be mistaken for the anomaly a test is about to cause)."""
    wait_signal(env, key, lambda s: s["ready"] and not s["firing"],
                "%s/%s learned and quiet" % key, timeout=timeout)


def test_learns_a_baseline(env):
    # 10 s of history (and 10 windows) before anything may alert.
    for key in (KSERVE_MEAN, TOKENS, ("tiny-lm", "latency"), ("tiny-mlp", "error_rate")):
        s = wait_signal(env, key, lambda s: s["ready"], "%s/%s ready" % key, timeout=60)
        assert s["windows"] >= 10, s
        if key in (KSERVE_MEAN, TOKENS):  # constant under steady traffic: inside the band
            assert s["lower"] <= s["value"] <= s["upper"] and not s["firing"], s
    doc = anomalies(env)
    assert doc["enabled"] is True, doc
    assert not [a for b in env["hook"].bodies() if isinstance(b, dict)
                for a in b.get("alerts", []) if a["labels"].get("signal") in
                (KSERVE_MEAN[1], TOKENS[1])], "alerts before any drift: %s" % env["hook"].bodies()


def test_output_drift_fires_and_resolves(env):
    quiet(env, KSERVE_MEAN)
    quiet(env, TOKENS)
    t0 = time.time()
    env["model"].set_mode(drift=5)
    try:
        _, a = wait_webhook(env, KSERVE_MEAN, "firing", t0)
        assert "version" not in a["labels"] or a["labels"]["version"] == "", a
        wait_webhook(env, TOKENS, "firing", t0)
        s = signal(env, *KSERVE_MEAN)
        assert s["firing"] and s["value"] > s["upper"], s
        assert signal(env, *TOKENS)["firing"], signal(env, *TOKENS)
        text = metrics(env["gw"])
        assert metric_sum(text, r"^gantry_gateway_anomaly_firing$",
                          {"model": KSERVE_MEAN[0], "signal": KSERVE_MEAN[1]}) == 1
        assert (metric_sum(text, r"^gantry_gateway_anomaly_alerts_total$",
                           {"model": TOKENS[0], "signal": TOKENS[1]}) or 0) >= 1
        assert "anomaly: FIRING model=tiny-mlp" in env["gw"].log(), env["gw"].log()[-2000:]
    finally:
        t1 = time.time()
        env["model"].set_mode(drift=None)
    _, a = wait_webhook(env, KSERVE_MEAN, "resolved", t1)
    assert not a["endsAt"].startswith("0001"), a
    wait_webhook(env, TOKENS, "resolved", t1)
    assert not signal(env, *KSERVE_MEAN)["firing"]


def test_error_rate_fires_and_resolves(env):
    key = ("tiny-mlp", "error_rate")
    quiet(env, key)
    t0 = time.time()
    env["model"].set_mode(status=500)
    try:
        wait_webhook(env, key, "firing", t0)
        s = signal(env, *key)
        assert s["firing"] and s["value"] > 0.5, s
    finally:
        t1 = time.time()
        env["model"].set_mode(status=None)
    wait_webhook(env, key, "resolved", t1)


def test_latency_fires_and_resolves(env):
    key = ("tiny-lm", "latency")
    quiet(env, key)
    t0 = time.time()
    env["model"].set_mode(latency_ms=250)
    try:
        wait_webhook(env, key, "firing", t0)
        s = signal(env, *key)
        assert s["firing"] and s["value"] >= 0.2, "latency alert, value %r" % s
    finally:
        t1 = time.time()
        env["model"].set_mode(latency_ms=None)
    wait_webhook(env, key, "resolved", t1)
