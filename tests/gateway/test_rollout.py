"""Rollouts end to end: weighted splits between pools (canary 90/10 over 10k requests within
a 4-sigma binomial bound), `gantry gateway rollout set|switch|rollback|show` at run time,
sticky assignment by API key and by header; drain (`gantry gateway drain` waits for the
requests in flight and sends nothing new to the backend; exit 0/1/2) and a rolling restart
of every backend (drain, SIGTERM, restart on the same port, healthy, undrain) under a
continuous load of non-idempotent POSTs with zero failed client requests.

The split tests use two nginx static backends (`blue`, `green`: a body naming the pool) so
10k requests take seconds; drain and restart use three model servers m1..m3."""

import http.client
import json
import math
import os
import subprocess
import threading

import pytest

import fixtures as fx
from gwtest import CHAT, base_config

SERVE = ("m1", "m2", "m3")


@pytest.fixture(scope="module")
def env(tmp_dir, gateways):
    blue = gateways.service(fx.Nginx(tmpdir=tmp_dir, body='{"pool":"blue"}'))
    green = gateways.service(fx.Nginx(tmpdir=tmp_dir, body='{"pool":"green"}'))
    ms = {n: fx.ModelServer(tmpdir=tmp_dir, name=n) for n in SERVE}
    for m in ms.values():
        gateways.started.append(m)  # stopped with the gateways at the end of the module
    fx.start_all(list(ms.values()))
    state = os.path.join(tmp_dir, "rollout.db")
    admin = fx.create_key(state, "root", "admin")["key"]
    cfg = base_config(tmp_dir, "http://127.0.0.1:1", state=state)
    cfg["backends"] = ([{"name": "blue-1", "url": blue.url, "max_idle": 32},
                        {"name": "green-1", "url": green.url, "max_idle": 32}] +
                       [{"name": n, "url": m.url, "max_idle": 8} for n, m in ms.items()])
    health = {"path": "/v2/health/ready", "interval": "300ms", "timeout": "1s",
              "healthy_threshold": 1, "unhealthy_threshold": 1}
    cfg["pools"] = [{"name": "blue", "backends": ["blue-1"]},
                    {"name": "green", "backends": ["green-1"]},
                    {"name": "serve", "backends": list(SERVE), "health_check": health},
                    {"name": "only-m1", "backends": ["m1"]}]
    split = [{"pool": "blue", "weight": 50}, {"pool": "green", "weight": 50}]
    cfg["rollouts"] = [
        {"name": "canary", "targets": [{"pool": "blue", "weight": 90},
                                       {"pool": "green", "weight": 10}]},
        {"name": "bykey", "targets": split, "sticky": "key"},
        {"name": "byheader", "targets": split, "sticky": "header:X-Session"},
    ]
    cfg["routes"] = [
        {"prefix": "/canary/", "protocol": "openai", "rollout": "canary", "auth": "none"},
        {"prefix": "/bykey/", "protocol": "openai", "rollout": "bykey"},
        {"prefix": "/byheader/", "protocol": "openai", "rollout": "byheader", "auth": "none"},
        # Model servers: tiny-* on the pool, pinned-* on m1 alone (to hold requests there).
        {"prefix": "/v1/", "protocol": "openai", "pool": "serve", "auth": "none",
         "models": [{"match": "pinned-*", "pool": "only-m1"}]},
    ]
    gw = gateways.start(cfg, name="rollout-gw")
    return {"gw": gw, "admin": admin, "ms": ms, "state": state}


def pool_of(resp):
    return json.loads(resp.body)["pool"]


def split(gw, n, path="/canary/v1/chat/completions", threads=4, headers=None):
    load = fx.Load(gw.url, path, CHAT, threads=threads, total=n, classify=pool_of,
                   headers=headers).run()
    snap = load.snapshot()
    assert snap["failed"] == 0, "%d of %d failed: %s" % (snap["failed"], n, snap["failures"][:5])
    return snap["by_label"]


def within(count, n, p, sigmas=4.0):
    """count ~ Binomial(n, p) within `sigmas` standard deviations of n*p."""
    sd = math.sqrt(n * p * (1 - p))
    return abs(count - n * p) <= sigmas * sd


def cli(env, *args, check=True):
    return fx.gantry("gateway", *args, "--url", env["gw"].url, "--admin-key", env["admin"],
                     check=check)


def cli_json(env, *args):
    return json.loads(cli(env, *args, "--json").stdout)


def model_calls(m):
    """Requests a model server got on the model API (health checks not counted)."""
    return sum(1 for r in m.requests() if r["path"].startswith("/v1/"))


def backends(env):
    return {b["name"]: b for b in cli_json(env, "backends")["backends"]}


def wait_backends(env, pred, what, timeout=30):
    return fx.wait_until(lambda: (lambda b: b if pred(b) else None)(backends(env)),
                         timeout=timeout, interval=0.2, what=what)


# --------------------------------------------------------------------------- splits
def test_canary_split_holds_over_10k_requests(env):
    r = cli_json(env, "rollout", "show", "canary")
    assert r["weights"] == {"blue": 90, "green": 10}, r
    n = 10000
    by = split(env["gw"], n)
    assert by.get("blue", 0) + by.get("green", 0) == n, by
    assert within(by.get("green", 0), n, 0.10), (
        "canary share outside 4 sigma of 10%% over %d requests: %s" % (n, by))


def test_rollout_set_switch_rollback(env):
    gw = env["gw"]
    r = cli_json(env, "rollout", "set", "canary", "blue=50", "green=50")
    assert r["weights"] == {"blue": 50, "green": 50}, r
    assert r["previous"] == {"blue": 90, "green": 10}, r
    by = split(gw, 2000)
    assert within(by.get("green", 0), 2000, 0.5), "50/50 split: %s" % by

    # Blue-green: everything to green at once.
    r = cli_json(env, "rollout", "switch", "canary", "green")
    assert r["weights"] == {"blue": 0, "green": 100}, r
    assert split(gw, 300) == {"green": 300}

    # Instant rollback to the weights before the switch.
    r = cli_json(env, "rollout", "rollback", "canary")
    assert r["weights"] == {"blue": 50, "green": 50}, r
    by = split(gw, 400)
    assert within(by.get("green", 0), 400, 0.5), "after rollback: %s" % by
    shown = cli_json(env, "rollout", "show")["rollouts"]
    assert {x["name"] for x in shown} == {"canary", "bykey", "byheader"}, shown
    canary = [x for x in shown if x["name"] == "canary"][0]
    assert canary["configured"] == {"blue": 90, "green": 10} and canary["changes"] == 3, canary

    # Mistakes are refused and change nothing.
    bad = cli(env, "rollout", "set", "canary", "purple=10", check=False)
    assert bad.returncode != 0 and "purple" in bad.stderr, (bad.returncode, bad.stderr)
    bad = cli(env, "rollout", "set", "canary", "blue=0", "green=0", check=False)
    assert bad.returncode != 0 and "zero" in bad.stderr, (bad.returncode, bad.stderr)
    bad = cli(env, "rollout", "show", "nosuch", check=False)
    assert bad.returncode == 2 and "nosuch" in bad.stderr, (bad.returncode, bad.stderr)
    assert cli_json(env, "rollout", "show", "canary")["weights"] == {"blue": 50, "green": 50}
    # Put the configured split back for anything that runs later.
    cli(env, "rollout", "set", "canary", "blue=90", "green=10")


def test_sticky_by_key(env):
    gw, adm = env["gw"], fx.auth(env["admin"])
    keys = []
    for i in range(200):
        r = fx.request("POST", gw.url + "/admin/keys", {"name": "sticky%d" % i, "role": "user"},
                       adm)
        assert r.status == 201, r
        keys.append(r.json()["key"])
    path = "/bykey/v1/chat/completions"
    # One caller: the same pool for every request.
    by = split(gw, 200, path=path, headers=fx.auth(keys[0]))
    assert len(by) == 1 and sum(by.values()) == 200, "key 0 was split between pools: %s" % by
    # Many callers: each sticks, and together they split near the weights.
    first = {}
    for k in keys:
        c = fx.request("POST", gw.url + path, CHAT, fx.auth(k))
        assert c.status == 200, c
        first[k] = pool_of(c)
    for k in keys[:20]:
        again = split(gw, 5, path=path, headers=fx.auth(k), threads=1)
        assert again == {first[k]: 5}, "key moved between pools: first %s, then %s" % (
            first[k], again)
    greens = sum(1 for p in first.values() if p == "green")
    assert within(greens, len(keys), 0.5), "200 keys on a 50/50 sticky split: %d green" % greens


def test_sticky_by_header(env):
    gw = env["gw"]
    path = "/byheader/v1/chat/completions"
    by = split(gw, 200, path=path, headers={"X-Session": "session-abc"})
    assert len(by) == 1, "one X-Session value was split between pools: %s" % by
    pools = {}
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        for i in range(400):
            r = fx.request("POST", gw.url + path, CHAT, {"X-Session": "s-%d" % i}, conn=conn)
            assert r.status == 200, r
            pools[i] = pool_of(r)
        for i in range(0, 400, 40):
            r = fx.request("POST", gw.url + path, CHAT, {"X-Session": "s-%d" % i}, conn=conn)
            assert pool_of(r) == pools[i], "X-Session s-%d moved between pools" % i
    finally:
        conn.close()
    greens = sum(1 for p in pools.values() if p == "green")
    assert within(greens, 400, 0.5), "400 sessions on a 50/50 sticky split: %d green" % greens


# --------------------------------------------------------------------------- drain
def test_drain_waits_for_in_flight_and_stops_new_requests(env):
    gw, ms = env["gw"], env["ms"]
    pinned = dict(CHAT, model="pinned-lm")
    results = []

    def held():
        results.append(fx.request("POST", gw.url + "/v1/chat/completions", pinned, timeout=60))

    ms["m1"].set_mode(hold=True)
    threads = [threading.Thread(target=held, daemon=True) for _ in range(3)]
    drain = None
    try:
        for t in threads:
            t.start()
        wait_backends(env, lambda b: b["m1"]["in_flight"] == 3, "3 requests in flight on m1")
        drain = subprocess.Popen(
            [fx.gantry_path(), "gateway", "drain", "m1", "--url", gw.url, "--admin-key",
             env["admin"], "--json", "--timeout", "60s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_backends(env, lambda b: b["m1"]["draining"], "m1 draining")
        before = model_calls(ms["m1"])
        load = fx.Load(gw.url, "/v1/chat/completions", CHAT, threads=2, total=40).run()
        snap = load.snapshot()
        assert snap["failed"] == 0, snap["failures"][:5]
        assert "m1" not in snap["by_label"], "a draining backend got new requests: %s" % snap
        assert model_calls(ms["m1"]) == before, "m1 received requests while draining"
        # m1 is the only backend of pinned-*: nothing can serve them now.
        r = fx.request("POST", gw.url + "/v1/chat/completions", pinned)
        assert r.status == 503 and int(r.headers.get("retry-after", "0")) >= 1, r
        # The held requests are still in flight: drain must still be waiting...
        assert drain.poll() is None, "drain returned with 3 requests in flight: %s %s" % (
            drain.communicate())
        # ... and a drain with a short --timeout gives up with exit 1, m1 staying drained.
        short = fx.gantry("gateway", "drain", "m1", "--url", gw.url, "--admin-key",
                          env["admin"], "--timeout", "1s", check=False)
        assert short.returncode == 1, (short.returncode, short.stdout, short.stderr)
        assert "in flight" in short.stderr, short.stderr
        assert drain.poll() is None
    finally:
        ms["m1"].set_mode(hold=False)
        for t in threads:
            t.join(60)
    out, err = drain.communicate(timeout=60)
    assert drain.returncode == 0, (drain.returncode, out, err)
    doc = json.loads(out)
    assert doc["safe_to_restart"] is True and doc["in_flight"] == 0, doc
    assert [r.status for r in results] == [200, 200, 200], (
        "requests in flight during a drain must finish: %s" % results)

    # Usage errors: exit 2.
    bad = fx.gantry("gateway", "drain", "nosuch", "--url", gw.url, "--admin-key",
                    env["admin"], check=False)
    assert bad.returncode == 2 and "nosuch" in bad.stderr, (bad.returncode, bad.stderr)
    bad = fx.gantry("gateway", "drain", "m1", check=False)  # no --url
    assert bad.returncode == 2, (bad.returncode, bad.stderr)

    out = cli(env, "undrain", "m1")
    assert "m1" in out.stdout, out.stdout
    wait_backends(env, lambda b: not b["m1"]["draining"], "m1 undrained")
    r = fx.request("POST", gw.url + "/v1/chat/completions", pinned)
    assert r.status == 200 and r.headers.get("x-test-server") == "m1", r


def test_rolling_restart_under_load_loses_nothing(env):
    gw, ms = env["gw"], env["ms"]
    load = fx.Load(gw.url, "/v1/chat/completions", dict(CHAT, max_tokens=2), threads=4).start()
    restarted = []
    try:
        fx.wait_until(lambda: load.snapshot()["ok"] >= 50, timeout=30, what="load running")
        for name in SERVE:
            m = ms[name]
            doc = cli_json(env, "drain", name, "--timeout", "60s")
            assert doc["safe_to_restart"] is True, doc
            assert m.terminate() == 0, "%s did not stop cleanly on SIGTERM" % name
            m.restart()
            assert fx.request("GET", m.url + "/v2/health/ready").status == 200
            cli(env, "undrain", name)
            wait_backends(env, lambda b: b[name]["healthy"] and not b[name]["draining"],
                          "%s back in service" % name)
            fx.wait_until(lambda: model_calls(m) > 0, timeout=30,
                          what="restarted %s serving again" % name)
            restarted.append(name)
        ok_then = load.snapshot()["ok"]
        fx.wait_until(lambda: load.snapshot()["ok"] >= ok_then + 30, timeout=30,
                      what="load still flowing after the restarts")
    finally:
        load.stop()
    snap = load.snapshot()
    assert restarted == list(SERVE)
    assert snap["failed"] == 0, (
        "rolling restart lost %d of %d non-idempotent requests: %s" % (
            snap["failed"], snap["sent"], snap["failures"][:5]))
    assert set(snap["by_label"]) == set(SERVE), snap


def test_reload_keeps_weights_and_drain_marks(env):
    gw = env["gw"]
    cli(env, "rollout", "set", "canary", "blue=70", "green=30")
    out = cli_json(env, "drain", "m3", "--no-wait")
    assert out["draining"] is True, out
    try:
        n = len(gw.proc.lines)
        gw.reload(gw.config)  # same file, SIGHUP
        gw.proc.wait_line(r"configuration reloaded", timeout=20, start=n)
        r = cli_json(env, "rollout", "show", "canary")
        assert r["weights"] == {"blue": 70, "green": 30}, "reload reset run-time weights: %r" % r
        assert backends(env)["m3"]["draining"], "reload lost the drain mark of m3"
    finally:
        cli(env, "undrain", "m3")
        cli(env, "rollout", "set", "canary", "blue=90", "green=10")
