"""Rate limits (requests and LLM tokens), quotas, and limits shared between two gateway
processes through one redis-server; Redis dying must not stop a fail-open gateway, and
/metrics must say Redis is down."""

import os
import shutil
import threading
import uuid

import pytest

import fixtures as fx
from gwtest import CHAT, base_config, chat, error_code, metric_sum, metrics

N = 5


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir):
    state = os.path.join(tmp_dir, "limits.db")
    keys = {n: fx.create_key(state, n, r) for n, r in
            (("limited", "limited"), ("tpm", "tpm"), ("quota", "quota"), ("user", "user"),
             ("tokquota", "tokquota"))}
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["rate_limits"] = [
        {"scope": "role", "match": "limited", "requests": N, "per": "1h"},
        {"scope": "role", "match": "tpm", "tokens_per_minute": 100},
    ]
    cfg["quotas"] = [{"scope": "role", "match": "quota", "calls_per_day": 3},
                     {"scope": "role", "match": "tokquota", "tokens_per_day": 100}]
    gw = gateways.start(cfg)
    return {"gw": gw, "keys": keys}


def burst(targets, n):
    """n concurrent chat requests, round-robin over (gateway, key) targets; statuses and
    responses in order."""
    out = [None] * n

    def one(i):
        gw, key = targets[i % len(targets)]
        try:
            out[i] = chat(gw, key, timeout=20)
        except Exception as e:  # recorded, asserted by the caller
            out[i] = e
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def check_429(r, what):
    assert r.status == 429, "%s: %r" % (what, r)
    assert r.headers.get("retry-after", "").isdigit(), "%s: Retry-After missing: %r" % (
        what, r.headers)
    for h in ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"):
        assert h in r.headers, "%s: %s header missing: %r" % (what, h, r.headers)
    error_code(r)


def test_request_limit_exactly_n(env):
    gw, key = env["gw"], env["keys"]["limited"]["key"]
    res = burst([(gw, key)], N + 4)
    errs = [r for r in res if isinstance(r, Exception)]
    assert not errs, errs
    ok = [r for r in res if r.status == 200]
    limited = [r for r in res if r.status != 200]
    assert len(ok) == N, "limit %d, burst of %d: %d admitted (%r)" % (
        N, N + 4, len(ok), [r.status for r in res])
    for r in limited:
        check_429(r, "over the request limit")
        assert r.headers["ratelimit-remaining"] == "0"
        assert r.headers["ratelimit-limit"] == str(N)
    # another role is not affected
    assert chat(gw, env["keys"]["user"]["key"]).status == 200


def test_token_limit_after_large_usage(env):
    gw, key = env["gw"], env["keys"]["tpm"]["key"]
    r = chat(gw, key, headers={"x-test-completion-tokens": "5000"})
    assert r.status == 200, "first request is admitted (tokens are charged afterwards): %r" % r

    def limited():
        r = chat(gw, key)
        return r if r.status == 429 else None
    r = fx.wait_until(limited, timeout=5, interval=0.2,
                      what="429 after 5005 tokens against tokens_per_minute 100")
    check_429(r, "over tokens_per_minute")


def test_streamed_tokens_count_toward_token_limit(fresh_gateways, model):
    """Tokens of a stream (usage from the injected include_usage chunk) are charged: a
    stream of 300 tokens against tokens_per_minute 100 blocks the next request."""
    g = fresh_gateways
    state = os.path.join(g.tmp, "tpm-stream.db")
    key = fx.create_key(state, "t", "tpm")["key"]
    cfg = base_config(g.tmp, model.url, state=state)
    cfg["rate_limits"] = [{"scope": "role", "match": "tpm", "tokens_per_minute": 100}]
    gw = g.start(cfg)
    r = chat(gw, key, dict(CHAT, stream=True, max_tokens=300))
    assert r.status == 200 and fx.sse_events(r.body)[-1] == "[DONE]", r
    r = fx.wait_until(lambda: (lambda r: r if r.status == 429 else None)(chat(gw, key)),
                      timeout=5, interval=0.2, what="429 after a 305-token stream")


def test_quota_survives_restart(fresh_gateways, model):
    g = fresh_gateways
    state = os.path.join(g.tmp, "quota-restart.db")
    key = fx.create_key(state, "q", "quota")["key"]
    cfg = base_config(g.tmp, model.url, state=state)
    cfg["quotas"] = [{"scope": "role", "match": "quota", "calls_per_day": 3}]
    gw = g.start(cfg, "gw-q1")
    assert [chat(gw, key).status for _ in range(2)] == [200, 200]
    assert gw.proc.stop() == 0
    gw.proc = None
    gw2 = g.start(cfg, "gw-q2")
    statuses = [chat(gw2, key).status for _ in range(2)]
    assert statuses == [200, 403], "calls_per_day 3, 2 calls before a restart: %r" % statuses


def test_quota_403_with_retry_after(env):
    gw, key = env["gw"], env["keys"]["quota"]["key"]
    statuses = []
    for _ in range(3):
        statuses.append(chat(gw, key).status)
    assert statuses == [200, 200, 200], statuses
    r = chat(gw, key)
    assert r.status == 403, "4th call with calls_per_day 3: %r" % r
    assert r.headers.get("retry-after", "").isdigit(), r.headers
    error_code(r)


def test_token_quota_403(env):
    gw, key = env["gw"], env["keys"]["tokquota"]["key"]
    assert chat(gw, key, headers={"x-test-completion-tokens": "500"}).status == 200
    r = fx.wait_until(lambda: (lambda r: r if r.status == 403 else None)(chat(gw, key)),
                      timeout=5, interval=0.2, what="403 after 505 tokens, tokens_per_day 100")
    assert r.headers.get("retry-after", "").isdigit(), r.headers
    error_code(r)


def shared_config(tmp, model, state, redis_addr, timeout="500ms", mode="open", prefix=None):
    cfg = base_config(tmp, model.url, state=state)
    cfg["rate_limits"] = [{"scope": "role", "match": "shared", "requests": N, "per": "1h"},
                          {"scope": "role", "match": "user", "requests": 100000, "per": "1m"}]
    cfg["redis"] = {"address": redis_addr, "timeout": timeout, "failure_mode": mode,
                    "prefix": prefix or "gantry-test-%s:" % uuid.uuid4().hex[:8]}
    return cfg


def test_two_gateways_share_limits_through_redis(fresh_gateways, model):
    g = fresh_gateways
    redis = g.service(fx.Redis(tmpdir=g.tmp))
    state_a = os.path.join(g.tmp, "a.db")
    key = fx.create_key(state_a, "shared", "shared")["key"]
    state_b = os.path.join(g.tmp, "b.db")
    shutil.copy(state_a, state_b)  # same key in both gateways' state
    prefix = "gantry-test-%s:" % uuid.uuid4().hex[:8]
    a = g.start(shared_config(g.tmp, model, state_a, redis.address, prefix=prefix), "gw-a")
    b = g.start(shared_config(g.tmp, model, state_b, redis.address, prefix=prefix), "gw-b")
    for gw in (a, b):
        up = metric_sum(metrics(gw), r"^gantry_gateway_redis_up$")
        assert up == 1, "%s: gantry_gateway_redis_up = %r before the burst" % (gw.name, up)
    res = burst([(a, key), (b, key)], 3 * N)
    errs = [r for r in res if isinstance(r, Exception)]
    assert not errs, errs
    ok = sum(1 for r in res if r.status == 200)
    assert ok == N, "two gateways, one Redis, limit %d: %d admitted (%r)" % (
        N, ok, [r.status for r in res])
    for r in res:
        if r.status != 200:
            check_429(r, "over the shared limit")


def test_two_gateways_share_token_limit(fresh_gateways, model):
    g = fresh_gateways
    redis = g.service(fx.Redis(tmpdir=g.tmp))
    state_a = os.path.join(g.tmp, "ta.db")
    key = fx.create_key(state_a, "t", "tpm")["key"]
    state_b = os.path.join(g.tmp, "tb.db")
    shutil.copy(state_a, state_b)
    prefix = "gantry-test-%s:" % uuid.uuid4().hex[:8]
    cfgs = []
    for st in (state_a, state_b):
        c = shared_config(g.tmp, model, st, redis.address, prefix=prefix)
        c["rate_limits"] = [{"scope": "role", "match": "tpm", "tokens_per_minute": 100}]
        cfgs.append(c)
    a = g.start(cfgs[0], "gw-ta")
    b = g.start(cfgs[1], "gw-tb")
    assert chat(a, key, headers={"x-test-completion-tokens": "5000"}).status == 200
    fx.wait_until(lambda: chat(b, key).status == 429, timeout=5, interval=0.2,
                  what="gateway B refusing after gateway A charged 5005 tokens")


def test_redis_down_fail_open_and_metrics(fresh_gateways, model):
    g = fresh_gateways
    redis = g.service(fx.Redis(tmpdir=g.tmp))
    state = os.path.join(g.tmp, "s.db")
    key = fx.create_key(state, "u", "user")["key"]
    gw = g.start(shared_config(g.tmp, model, state, redis.address, timeout="100ms"), "gw-open")
    assert chat(gw, key).status == 200
    assert metric_sum(metrics(gw), r"^gantry_gateway_redis_up$") == 1
    redis.kill()
    statuses = [chat(gw, key, timeout=10).status for _ in range(5)]
    assert statuses == [200] * 5, "fail-open gateway with Redis killed: %r" % statuses
    fx.wait_until(lambda: metric_sum(metrics(gw), r"^gantry_gateway_redis_up$") == 0,
                  timeout=10, what="gantry_gateway_redis_up 0 after killing redis")
    redis.start()  # back on the same port

    def recovered():
        chat(gw, key, timeout=10)
        return metric_sum(metrics(gw), r"^gantry_gateway_redis_up$") == 1
    fx.wait_until(recovered, timeout=15, interval=0.5,
                  what="gantry_gateway_redis_up back to 1 after redis-server restarted")

    def counters_in_redis():
        assert chat(gw, key, timeout=10).status == 200
        return b"gantry" in redis.command("KEYS", "*")
    fx.wait_until(counters_in_redis, timeout=10, interval=0.5,
                  what="limit counters written to Redis again after it came back")


def test_slow_redis_fail_open(fresh_gateways, model):
    """Redis alive but not answering (CLIENT PAUSE 30 s) with timeout 100ms: requests are
    decided locally and answered while Redis still sleeps."""
    import threading
    g = fresh_gateways
    redis = g.service(fx.Redis(tmpdir=g.tmp))
    state = os.path.join(g.tmp, "slow.db")
    key = fx.create_key(state, "u", "user")["key"]
    gw = g.start(shared_config(g.tmp, model, state, redis.address, timeout="100ms"), "gw-slow")
    assert chat(gw, key).status == 200
    # Paused far longer than the client waits: the request can only be answered if the
    # gateway stops waiting for Redis after its own timeout (fail-open). This Redis belongs
    # to this test alone and is killed, still paused, when the test ends.
    t = threading.Thread(target=redis.command, args=("CLIENT", "PAUSE", "30000", "ALL"))
    t.start()
    t.join()
    r = chat(gw, key, timeout=10)
    assert r.status == 200, r


def test_redis_down_fail_closed_503(fresh_gateways, model):
    g = fresh_gateways
    state = os.path.join(g.tmp, "c.db")
    key = fx.create_key(state, "u", "user")["key"]
    dead = "127.0.0.1:%d" % fx.dead_port()
    gw = g.start(shared_config(g.tmp, model, state, dead, timeout="100ms", mode="closed"),
                 "gw-closed")
    r = chat(gw, key, timeout=10)
    assert r.status == 503, "fail-closed gateway without Redis: %r" % r
    error_code(r)
