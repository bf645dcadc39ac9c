"""Backend pools end to end: four model servers in fake zones (p1, p2 in z1; p3 in z2; fb, a
fallback tier serving the "simpler" model tiny-lm-small, in z2) behind one pool.

Least-request balancing spreads load and starves a slow backend; the gateway's zone is
preferred and traffic spills to z2 when z1's backends are unready or killed; connect
failures are retried (also for POST), 5xx only on idempotent routes; a killed backend is
ejected (visible in `gantry gateway backends --json`) and returns once its health check
passes; a backend answering 500 is ejected and traffic moves away; with every primary
down the fallback tier serves with `X-Gantry-Degraded: primary_unavailable`, the model
rewritten and the route's degraded limits (max_tokens capped, streaming refused); with
nothing up the gateway sheds with 503 + Retry-After; a backend at max_concurrent sends
traffic to the fallback tier ("primary_saturated"), and with the fallback full too the
request is shed."""

import copy
import http.client
import json
import os
import threading

import pytest

import fixtures as fx
from gwtest import CHAT, INFER, ROLES, base_config, metric_sum, metrics

PRIMARIES = ("p1", "p2", "p3")
ZONES = {"p1": "z1", "p2": "z1", "p3": "z2", "fb": "z2"}


@pytest.fixture(scope="module")
def servers(tmp_dir):
    srv = {n: fx.ModelServer(tmpdir=tmp_dir, name=n, zone=z,
                             args=["--lm-models", "tiny-lm-small"] if n == "fb" else [])
           for n, z in ZONES.items()}
    try:
        fx.start_all(list(srv.values()))
        yield srv
    finally:
        for s in srv.values():
            s.stop()


@pytest.fixture(autouse=True)
def restore(servers):
    """Every test starts with all four servers up and behaving normally."""
    for s in servers.values():
        if not s.alive():
            s.restart()
        s.normal()
    yield
    for s in servers.values():
        if s.alive():
            try:
                s.normal()
            except (OSError, RuntimeError):
                pass


@pytest.fixture(scope="module")
def admin(tmp_dir):
    return fx.create_key(os.path.join(tmp_dir, "pools.db"), "root", "admin")["key"]


def config(tmp_dir, servers, zone=None, tiers=(PRIMARIES, ("fb",)), fallback_model="tiny-lm-small",
           health=None, outlier=None, retry=None, max_concurrent=None, balance="least_request",
           **pool_over):
    """One pool `main` (tiers of backend names) on /v1/ (OpenAI, not idempotent, degraded
    limits max_tokens 5 and no streaming) and /v2/ (KServe, idempotent)."""
    # The module's state file (where the `admin` fixture made the admin key).
    state = os.path.join(servers["p1"].tmp, "pools.db")
    cfg = base_config(tmp_dir, "http://127.0.0.1:1", state=state)
    cfg["roles"] = copy.deepcopy(ROLES)
    cfg["backends"] = [dict({"name": n, "url": s.url, "zone": ZONES[n], "max_idle": 8},
                            **({"max_concurrent": max_concurrent[n]}
                               if max_concurrent and n in max_concurrent else {}))
                       for n, s in servers.items()]
    tier_list = [{"backends": list(tiers[0])}]
    for t in tiers[1:]:
        tier_list.append({"backends": list(t), "model": fallback_model})
    pool = {"name": "main", "balance": balance, "tiers": tier_list,
            "outlier": outlier or {"consecutive_5xx": 3, "consecutive_gateway_errors": 3,
                                   "base_ejection": "60s", "max_ejection": "120s",
                                   "max_ejection_percent": 100},
            "retry": retry or {"attempts": 2, "min_retry_concurrency": 8,
                               "backoff_base": "5ms", "backoff_max": "20ms"}}
    if health:
        pool["health_check"] = health
    pool.update(pool_over)
    cfg["pools"] = [pool]
    cfg["routes"] = [
        {"prefix": "/v1/", "protocol": "openai", "pool": "main", "auth": "none",
         "degraded": {"max_tokens": 5, "stream": False}},
        {"prefix": "/v2/", "protocol": "kserve", "pool": "main", "auth": "none",
         "idempotent": True},
    ]
    if zone:
        cfg["zone"] = zone
    return cfg


FAST_HEALTH = {"path": "/v2/health/ready", "interval": "200ms", "timeout": "500ms",
               "healthy_threshold": 1, "unhealthy_threshold": 1}


def backends(gw, admin):
    out = fx.gantry_json("gateway", "backends", "--url", gw.url, "--admin-key", admin)
    return {b["name"]: b for b in out["backends"]}


def wait_backends(gw, admin, pred, what, timeout=20):
    return fx.wait_until(lambda: (lambda b: b if pred(b) else None)(backends(gw, admin)),
                         timeout=timeout, interval=0.2, what=what)


def chat(gw, body=None, headers=None, conn=None):
    return fx.request("POST", gw.url + "/v1/chat/completions", body or CHAT, headers, conn=conn)


def send(gw, n, path="/v1/chat/completions", body=None, threads=1, headers=None):
    """n requests; returns the Load (counts by x-test-server, failures)."""
    return fx.Load(gw.url, path, body or (CHAT if path.startswith("/v1/") else INFER),
                   headers=headers, threads=threads, total=n).run()


def served(load):
    return load.snapshot()["by_label"]


def assert_no_failures(load, what):
    snap = load.snapshot()
    assert snap["failed"] == 0, "%s: %d of %d client requests failed: %s" % (
        what, snap["failed"], snap["sent"], snap["failures"][:5])


INFER_PATH = "/v2/models/tiny-mlp/infer"


# --------------------------------------------------------------------------- balancing
def test_least_request_spreads_load(fresh_gateways, servers, admin):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,)))
    load = send(gw, 300, threads=6)
    assert_no_failures(load, "3 healthy backends")
    by = served(load)
    assert sum(by.values()) == 300, by
    for n in PRIMARIES:
        assert by.get(n, 0) >= 45, "least_request left %s with %d of 300: %s" % (
            n, by.get(n, 0), by)
    b = backends(gw, admin)
    for n in PRIMARIES:
        assert b[n]["requests"] == by[n], "admin API counts %s: %r vs client %r" % (
            n, b[n], by)
        assert b[n]["zone"] == ZONES[n] and not b[n]["ejected"] and b[n]["healthy"], b[n]


def test_slow_backend_gets_fewer_requests(fresh_gateways, servers):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,)))
    servers["p3"].set_mode(latency_ms=500)
    load = send(gw, 240, threads=8)
    assert_no_failures(load, "one slow backend")
    by = served(load)
    slow, fast = by.get("p3", 0), min(by.get("p1", 0), by.get("p2", 0))
    assert slow * 2 < fast and slow < 240 * 0.2, (
        "least_request should starve the slow backend p3 (500 ms a request): %s" % by)


def test_zone_preference_and_spill_over(fresh_gateways, servers, admin):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, zone="z1",
                                     health=FAST_HEALTH))
    first = send(gw, 100, threads=2)
    assert_no_failures(first, "all up")
    by = served(first)
    assert by.get("p3", 0) == 0 and by.get("fb", 0) == 0, (
        "gateway in z1 sent traffic out of its zone while z1 was healthy: %s" % by)
    assert by.get("p1", 0) > 0 and by.get("p2", 0) > 0, by

    # z1 disappears: p1 unready (health 503), p2 killed.
    servers["p1"].set_mode(unready=True)
    servers["p2"].kill()
    # (idempotent route: what a crash does to POSTs is test_post_right_after_a_crash)
    during = send(gw, 40, path=INFER_PATH, threads=2)
    b = wait_backends(gw, admin, lambda b: not b["p1"]["healthy"] and
                      (not b["p2"]["healthy"] or b["p2"]["ejected"]), "z1 backends down")
    assert "503" in b["p1"]["last_health_error"], b["p1"]
    spill = send(gw, 60, threads=2)
    assert_no_failures(during, "while z1 went away")
    assert_no_failures(spill, "z1 gone")
    by = served(spill)
    assert by == {"p3": 60}, "with z1 down, traffic must spill over to z2's p3 only: %s" % by

    # z1 comes back: traffic returns to it.
    servers["p1"].normal()
    servers["p2"].restart()
    wait_backends(gw, admin, lambda b: b["p1"]["healthy"] and b["p2"]["healthy"] and
                  not b["p2"]["ejected"], "z1 backends healthy again")
    back = send(gw, 60, threads=2)
    assert_no_failures(back, "z1 back")
    by = served(back)
    assert by.get("p3", 0) == 0 and by.get("p1", 0) + by.get("p2", 0) == 60, by


# --------------------------------------------------------------------------- failures
def test_killed_backend_retried_ejected_and_returns(fresh_gateways, servers, admin):
    # Health checks never mark a backend unhealthy here (threshold 100): what takes p2 out
    # is passive outlier ejection (60 s), and what brings it back early is a passing check.
    health = dict(FAST_HEALTH, unhealthy_threshold=100)
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,),
                                     health=health))
    # KServe route is idempotent: requests in flight on p2 when it dies are retried.
    load = fx.Load(gw.url, INFER_PATH, INFER, threads=6,
                   headers={"x-test-latency-ms": "30"}).start()
    try:
        fx.wait_until(lambda: load.snapshot()["by_label"].get("p2", 0) >= 10, timeout=30,
                      what="p2 serving part of the load")
        servers["p2"].kill()
        b = wait_backends(gw, admin, lambda b: b["p2"]["ejected"], "p2 ejected after it died")
        assert b["p2"]["ejections"] >= 1 and b["p2"]["failures"] >= 3, b["p2"]
        ok_then = load.snapshot()["ok"]
        fx.wait_until(lambda: load.snapshot()["ok"] >= ok_then + 60, timeout=30,
                      what="60 more answers after the ejection")
    finally:
        load.stop()
    assert_no_failures(load, "idempotent load while p2 was killed")

    # Non-idempotent POSTs: p2 is ejected, nothing reaches it, nothing fails.
    post = send(gw, 60)
    assert_no_failures(post, "POST with p2 ejected")
    assert "p2" not in served(post), served(post)

    # p2 comes back on the same port: its health check passes and ends the ejection
    # long before the 60 s ejection time would.
    servers["p2"].restart()
    b = wait_backends(gw, admin, lambda b: not b["p2"]["ejected"], "p2 back after recovery")
    assert b["p2"]["healthy"], b["p2"]
    again = send(gw, 90, threads=3)
    assert_no_failures(again, "p2 recovered")
    assert served(again).get("p2", 0) > 0, "recovered p2 gets no traffic: %s" % served(again)


def test_post_right_after_a_crash_is_not_lost(fresh_gateways, servers, admin):
    """p2 crashes between requests (nothing in flight), so the backend never saw any of
    the POSTs that follow. The kernel closed the gateway's pooled keep-alive connection
    to it; a POST must not be written into that connection (it comes back as 502 "closed
    the connection" and, being non-idempotent, cannot be retried) but find it closed, get
    a refused connect and be retried on p3. One worker and round-robin make the first
    POST after the crash go to p2 over the pooled connection."""
    cfg = config(fresh_gateways.tmp, servers, tiers=(("p2", "p3"),), balance="round_robin")
    cfg["workers"] = 1
    gw = fresh_gateways.start(cfg)
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        warm = [chat(gw, conn=conn).headers.get("x-test-server") for _ in range(2)]
        assert sorted(warm) == ["p2", "p3"], warm
        servers["p2"].kill()
        after = [chat(gw, conn=conn) for _ in range(4)]
    finally:
        conn.close()
    bad = [r for r in after if r.status != 200]
    assert not bad, ("POSTs sent right after p2 crashed failed; the pooled connection to the "
                     "dead backend was reused: %s" % bad)
    assert all(r.headers.get("x-test-server") == "p3" for r in after), after


def test_retries_only_where_safe(fresh_gateways, servers, admin):
    # No ejection here (huge thresholds): p3 stays dead and p1 keeps answering 500.
    outlier = {"consecutive_5xx": 100000, "consecutive_gateway_errors": 100000}
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,),
                                     outlier=outlier))
    servers["p3"].kill()
    servers["p1"].set_mode(status=500)
    servers["p1"].reset()

    # POST on the non-idempotent route: a refused connect sent nothing, so it is retried;
    # a 500 is not (the backend may have acted on the request).
    post = send(gw, 60)
    snap = post.snapshot()
    assert set(snap["by_status"]) <= {200, 500}, (
        "a connect failure reached the client (not retried): %s" % snap)
    got_500 = snap["by_status"].get(500, 0)
    assert got_500 > 0, "no request landed on p1 in 60 tries: %s" % snap
    p1_seen = [r for r in servers["p1"].requests() if r["path"] == "/v1/chat/completions"]
    assert len(p1_seen) == got_500, (
        "every POST that p1 answered 500 must reach the client as is, never be sent "
        "again: p1 saw %d, client got %d 500s" % (len(p1_seen), got_500))
    assert backends(gw, admin)["p3"]["failures"] > 0, "no request was even tried on dead p3"

    # The idempotent KServe route retries 500s and connect failures: all succeed on p2.
    infer = send(gw, 60, path=INFER_PATH)
    assert_no_failures(infer, "idempotent route with p1 answering 500 and p3 dead")
    assert served(infer) == {"p2": 60}, served(infer)
    m = metrics(gw)
    assert (metric_sum(m, r"^gantry_gateway_retries_total$") or 0) > 0, "no retries counted"


def test_backend_answering_500_is_ejected(fresh_gateways, servers, admin):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,)))
    servers["p3"].set_mode(status=500)
    first = send(gw, 60)
    snap = first.snapshot()
    # Not idempotent: up to consecutive_5xx (3) 500s reach the client before the ejection.
    assert snap["by_status"].get(500, 0) <= 3, snap
    b = wait_backends(gw, admin, lambda b: b["p3"]["ejected"], "p3 ejected after 3 x 500")
    assert b["p3"]["ejections"] == 1 and b["p3"]["ejected_for_ms"] > 0, b["p3"]
    assert not b["p1"]["ejected"] and not b["p2"]["ejected"], b
    before = servers["p3"].stats()["requests"]
    after = send(gw, 60, threads=2)
    assert_no_failures(after, "p3 ejected")
    assert "p3" not in served(after), "traffic still goes to ejected p3: %s" % served(after)
    # (the /debug/stats calls themselves are not counted)
    assert servers["p3"].stats()["requests"] == before, "p3 got requests while ejected"
    text = metrics(gw)
    assert metric_sum(text, r"^gantry_gateway_backend_ejected$", {"backend": "p3"}) == 1
    assert metric_sum(text, r"^gantry_gateway_backend_ejections_total$", {"backend": "p3"}) == 1


def test_ejection_time_grows_and_ejections_are_capped(fresh_gateways, servers, admin):
    outlier = {"consecutive_5xx": 3, "consecutive_gateway_errors": 3, "base_ejection": "1s",
               "max_ejection": "10s", "max_ejection_percent": 34}
    # 1. Cap: p1 and p3 answer 500, but 34% of 3 backends is one ejection at a time.
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,),
                                     outlier=outlier))
    servers["p1"].set_mode(status=500)
    servers["p3"].set_mode(status=500)
    load = fx.Load(gw.url, INFER_PATH, INFER, threads=2, pause_s=0.005).start()
    seen_both = []

    def took_turns():
        b = backends(gw, admin)
        if b["p1"]["ejected"] and b["p3"]["ejected"]:
            seen_both.append(b)
        assert not b["p2"]["ejected"], "the healthy backend was ejected: %r" % b["p2"]
        return b["p1"]["ejections"] >= 1 and b["p3"]["ejections"] >= 1

    try:
        fx.wait_until(took_turns, timeout=30, interval=0.1,
                      what="p1 and p3 each ejected (one after the other)")
    finally:
        load.stop()
    assert not seen_both, "max_ejection_percent 34 of 3 backends, yet two were ejected: %s" % (
        seen_both[0])
    # Retries on the idempotent route hid every 500 from the clients.
    assert_no_failures(load, "idempotent load with two backends answering 500")

    # 2. Growth: p3 alone keeps failing; its second ejection lasts base_ejection x 2.
    servers["p1"].normal()
    gw2 = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(PRIMARIES,),
                                      outlier=dict(outlier, max_ejection_percent=100)))
    load = fx.Load(gw2.url, INFER_PATH, INFER, threads=2, pause_s=0.005).start()
    try:
        b = wait_backends(gw2, admin, lambda b: b["p3"]["ejections"] >= 2,
                          "p3 ejected a second time", timeout=30)
    finally:
        load.stop()
    assert b["p3"]["times_ejected"] >= 2, "ejection multiplier did not grow: %r" % b["p3"]
    assert b["p3"]["ejected_for_ms"] <= 10000, b["p3"]
    assert_no_failures(load, "idempotent load with p3 answering 500")


# --------------------------------------------------------------------------- degradation
def test_fallback_tier_and_shedding(fresh_gateways, servers, admin):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, health=FAST_HEALTH))
    r = chat(gw)
    assert r.status == 200 and "x-gantry-degraded" not in r.headers, r
    assert r.headers.get("x-test-server") in PRIMARIES, r

    for n in PRIMARIES:
        servers[n].set_mode(unready=True)
    wait_backends(gw, admin, lambda b: not any(b[n]["healthy"] for n in PRIMARIES),
                  "every primary unhealthy")
    servers["fb"].reset()
    r = chat(gw, dict(CHAT, max_tokens=50))
    assert r.status == 200, r
    assert r.headers.get("x-gantry-degraded") == "primary_unavailable", r.headers
    assert r.headers.get("x-test-server") == "fb", r.headers
    sent = [json.loads(q["body"]) for q in servers["fb"].requests()
            if q["path"] == "/v1/chat/completions"]
    assert len(sent) == 1, sent
    assert sent[0]["model"] == "tiny-lm-small", "fallback tier must rewrite the model: %r" % sent
    assert sent[0].get("max_tokens") == 5, "degraded max_tokens cap (5) not applied: %r" % sent
    assert r.json()["usage"]["completion_tokens"] == 5, r
    # Below the cap the request keeps its own max_tokens.
    r = chat(gw, dict(CHAT, max_tokens=3))
    assert r.status == 200 and r.json()["usage"]["completion_tokens"] == 3, r
    # KServe: the fallback tier's model goes into the path.
    servers["fb"].reset()
    fx.request("POST", gw.url + INFER_PATH, INFER)
    paths = [q["path"] for q in servers["fb"].requests() if q["path"].startswith("/v2/models")]
    assert paths == ["/v2/models/tiny-lm-small/infer"], paths
    # Streaming is off while degraded: 503 + Retry-After, nothing sent to the fallback.
    servers["fb"].reset()
    r = chat(gw, dict(CHAT, stream=True))
    assert r.status == 503, r
    assert r.headers.get("x-gantry-degraded") == "primary_unavailable", r.headers
    assert int(r.headers.get("retry-after", "0")) >= 1, r.headers
    assert not [q for q in servers["fb"].requests() if q["path"].startswith("/v1/")], (
        "a refused stream reached the fallback backend")

    # Nothing can serve: shed with 503 and Retry-After.
    servers["fb"].set_mode(unready=True)
    wait_backends(gw, admin, lambda b: not b["fb"]["healthy"], "fallback unhealthy")
    r = chat(gw)
    assert r.status == 503, r
    assert int(r.headers.get("retry-after", "0")) >= 1, r.headers
    assert "error" in r.json(), r
    assert (metric_sum(metrics(gw), r"^gantry_gateway_shed_total$",
                       {"reason": "no_backend_available"}) or 0) >= 1

    # A primary returns: served normally again, not degraded.
    servers["p2"].normal()
    wait_backends(gw, admin, lambda b: b["p2"]["healthy"], "p2 healthy again")
    r = chat(gw)
    assert r.status == 200 and r.headers.get("x-test-server") == "p2", r
    assert "x-gantry-degraded" not in r.headers, r.headers
    assert (metric_sum(metrics(gw), r"^gantry_gateway_degraded_total$",
                       {"reason": "primary_unavailable"}) or 0) >= 2


def test_circuit_breaker_saturation(fresh_gateways, servers, admin):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(("p1",), ("fb",)),
                                     max_concurrent={"p1": 2, "fb": 1}))
    results = []

    def call(headers=None):
        def run():
            results.append(chat(gw, headers=headers, body=dict(CHAT, max_tokens=2)))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    servers["p1"].set_mode(hold=True)
    servers["fb"].set_mode(hold=True)
    threads = []
    try:
        threads += [call(), call()]
        wait_backends(gw, admin, lambda b: b["p1"]["in_flight"] == 2, "p1 at max_concurrent 2")
        # p1 full: the next request goes to the fallback tier (held there too).
        threads.append(call())
        wait_backends(gw, admin, lambda b: b["fb"]["in_flight"] == 1, "fallback busy")
        # Both full: shed.
        r = chat(gw)
        assert r.status == 503, "with every tier at max_concurrent the request must be shed: %r" % r
        assert int(r.headers.get("retry-after", "0")) >= 1, r.headers
        assert "all_saturated" in r.body.decode(), r
    finally:
        servers["p1"].set_mode(hold=False)
        servers["fb"].set_mode(hold=False)
        for t in threads:
            t.join(30)
    assert sorted(x.status for x in results) == [200, 200, 200], results
    degraded = [x for x in results if x.headers.get("x-test-server") == "fb"]
    assert len(degraded) == 1, results
    assert degraded[0].headers.get("x-gantry-degraded") == "primary_saturated", degraded[0]
    assert (metric_sum(metrics(gw), r"^gantry_gateway_shed_total$",
                       {"reason": "all_saturated"}) or 0) >= 1
    # Free again: back on the primary.
    r = chat(gw)
    assert r.status == 200 and r.headers.get("x-test-server") == "p1", r
    assert "x-gantry-degraded" not in r.headers, r.headers


def test_pending_requests_wait_for_a_slot(fresh_gateways, servers, admin):
    gw = fresh_gateways.start(config(fresh_gateways.tmp, servers, tiers=(("p1",),),
                                     max_concurrent={"p1": 1}, max_pending=1,
                                     pending_timeout="3s"))
    results = {}

    def call(name):
        def run():
            results[name] = chat(gw, body=dict(CHAT, max_tokens=2))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    servers["p1"].set_mode(hold=True)
    threads = []
    try:
        threads.append(call("first"))
        wait_backends(gw, admin, lambda b: b["p1"]["in_flight"] == 1, "p1 at max_concurrent 1")
        # p1 is full: a new request waits (max_pending 1) instead of being shed ...
        threads.append(call("pending"))
        threading.Event().wait(1.0)  # let it reach the gateway and queue
        assert "pending" not in results, "request was not held pending: %r" % results
    finally:
        servers["p1"].set_mode(hold=False)
    for t in threads:
        t.join(30)
    for name in ("first", "pending"):
        r = results[name]
        assert r.status == 200 and r.headers.get("x-test-server") == "p1", (name, r)
    # ... but not longer than pending_timeout.
    servers["p1"].set_mode(hold=True)
    try:
        threads = [call("held")]
        wait_backends(gw, admin, lambda b: b["p1"]["in_flight"] == 1, "p1 full again")
        r = chat(gw)
        assert r.status == 503 and int(r.headers.get("retry-after", "0")) >= 1, r
        assert "all_saturated" in r.body.decode(), r
    finally:
        servers["p1"].set_mode(hold=False)
    threads[0].join(30)
    assert results["held"].status == 200, results["held"]
