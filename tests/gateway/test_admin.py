"""Key management: the admin API (create, list, rotate, revoke) and `gantry gateway keys`
online (--url/--admin-key) and offline (--state, also while the gateway runs). A revoked or
rotated-out key stops working within a couple of seconds; secrets are shown once only."""

import json
import os

import pytest

import fixtures as fx
from gwtest import base_config, chat, error_code


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir):
    state = os.path.join(tmp_dir, "admin.db")
    admin = fx.create_key(state, "root", "admin")
    gw = gateways.start(base_config(tmp_dir, model.url, state=state))
    return {"gw": gw, "admin": admin, "state": state}


def adm(env):
    return fx.auth(env["admin"]["key"])


def works(gw, key):
    return chat(gw, key).status == 200


def rejected(gw, key):
    return chat(gw, key).status == 401


def test_offline_key_format(env):
    a = env["admin"]
    for f in ("id", "key", "name", "role"):
        assert f in a, "keys create --json lacks %r: %r" % (f, a)
    assert a["key"].startswith("gk_") and a["role"] == "admin" and a["name"] == "root"


def test_create_list_revoke_via_http(env):
    gw = env["gw"]
    r = fx.request("POST", gw.url + "/admin/keys", {"name": "alice", "role": "user"}, adm(env))
    assert r.status == 201, r
    k = r.json()
    assert k["key"].startswith("gk_") and k["name"] == "alice" and k["role"] == "user", k
    assert works(gw, k["key"])
    r = fx.request("GET", gw.url + "/admin/keys", headers=adm(env))
    assert r.status == 200, r
    listed = {x["id"]: x for x in r.json()["keys"]}
    assert k["id"] in listed and listed[k["id"]]["name"] == "alice"
    assert not listed[k["id"]]["revoked"]
    assert k["key"].encode() not in r.body and env["admin"]["key"].encode() not in r.body, (
        "GET /admin/keys shows secrets")
    r = fx.request("DELETE", gw.url + "/admin/keys/" + k["id"], headers=adm(env))
    # `revoked` is true or the revocation time: anything but false/0/null
    assert r.status == 200 and r.json()["id"] == k["id"] and r.json()["revoked"], r
    fx.wait_until(lambda: rejected(gw, k["key"]), timeout=3, what="revoked key -> 401")
    r = fx.request("GET", gw.url + "/admin/keys", headers=adm(env))
    assert {x["id"]: x for x in r.json()["keys"]}[k["id"]]["revoked"]


def test_rotate_with_and_without_grace(env):
    gw = env["gw"]
    for grace in (0, 60):
        r = fx.request("POST", gw.url + "/admin/keys", {"name": "rot%d" % grace, "role": "user"},
                       adm(env))
        assert r.status == 201, r
        old = r.json()
        r = fx.request("POST", gw.url + "/admin/keys/%s/rotate" % old["id"], {"grace_s": grace},
                       adm(env))
        assert r.status == 201, "rotate grace_s=%d: %r" % (grace, r)
        new = r.json()
        assert new["key"] != old["key"] and new["key"].startswith("gk_")
        assert works(gw, new["key"]), "rotated key does not work"
        if grace == 0:
            fx.wait_until(lambda: rejected(gw, old["key"]), timeout=3,
                          what="old key rejected after rotate with grace_s 0")
        else:
            assert works(gw, old["key"]), "old key must work during grace_s 60"


def test_grace_ends_and_revoked_keys_stay_dead(env):
    gw = env["gw"]
    r = fx.request("POST", gw.url + "/admin/keys", {"name": "g1", "role": "user"}, adm(env))
    old = r.json()
    r = fx.request("POST", gw.url + "/admin/keys/%s/rotate" % old["id"], {"grace_s": 1}, adm(env))
    assert r.status == 201, r
    fx.wait_until(lambda: rejected(gw, old["key"]), timeout=5,
                  what="old key rejected once grace_s 1 has passed")
    # rotating a revoked key must not bring it (or a successor) back
    r = fx.request("POST", gw.url + "/admin/keys", {"name": "dead", "role": "user"}, adm(env))
    dead = r.json()
    assert fx.request("DELETE", gw.url + "/admin/keys/" + dead["id"], headers=adm(env)).status == 200
    r = fx.request("POST", gw.url + "/admin/keys/%s/rotate" % dead["id"], {"grace_s": 60}, adm(env))
    if r.status == 201:
        assert rejected(gw, r.json()["key"]), "rotating a revoked key issued a working key"
    else:
        assert 400 <= r.status < 500, r
    fx.wait_until(lambda: rejected(gw, dead["key"]), timeout=3, what="revoked key stays dead")


def test_admin_api_errors(env):
    gw = env["gw"]
    h = dict(adm(env), **{"Content-Type": "application/json"})
    for what, body in (("not JSON", b"{"), ("no name", b'{"role":"user"}'),
                       ("unknown role", b'{"name":"x","role":"nope"}'),
                       ("negative expiry", b'{"name":"x","role":"user","expires_in_s":-5}'),
                       ("huge expiry", b'{"name":"x","role":"user","expires_in_s":1e300}'),
                       ("string expiry", b'{"name":"x","role":"user","expires_in_s":"1d"}'),
                       ("role not a string", b'{"name":"x","role":["admin"]}')):
        try:
            r = fx.request("POST", gw.url + "/admin/keys", body, h, timeout=5)
        except OSError as e:
            pytest.fail("POST /admin/keys %s: no answer within 5 s (%s)" % (what, e))
        assert r.status == 400, "POST /admin/keys %s: %r" % (what, r)
        error_code(r)
    r = fx.request("DELETE", gw.url + "/admin/keys/no-such-id", headers=adm(env))
    assert r.status == 404, r
    r = fx.request("GET", gw.url + "/admin/keys")
    assert r.status == 401, "admin API without credentials: %r" % r


def test_cli_online(env):
    gw = env["gw"]
    k = fx.create_key(None, "cli-online", "user", url=gw.url, admin_key=env["admin"]["key"])
    assert k["key"].startswith("gk_") and works(gw, k["key"])
    cp = fx.gantry("gateway", "keys", "list", "--url", gw.url, "--admin-key",
                   env["admin"]["key"], "--json")
    assert k["id"] in cp.stdout and k["key"] not in cp.stdout, cp.stdout
    cp = fx.gantry("gateway", "keys", "rotate", k["id"], "--url", gw.url, "--admin-key",
                   env["admin"]["key"], "--json")
    new = json.loads(cp.stdout)
    assert works(gw, new["key"])
    fx.gantry("gateway", "keys", "revoke", new["id"], "--url", gw.url, "--admin-key",
              env["admin"]["key"])
    fx.wait_until(lambda: rejected(gw, new["key"]), timeout=3, what="CLI-revoked key -> 401")
    cp = fx.gantry("gateway", "keys", "list", "--url", gw.url, "--admin-key", "gk_wrong",
                   check=False)
    assert cp.returncode != 0, "keys list with a wrong admin key succeeded: %s" % cp.stdout


def test_cli_expires_in(env):
    gw = env["gw"]
    k = json.loads(fx.gantry("gateway", "keys", "create", "--state", env["state"], "--name",
                             "short", "--role", "user", "--expires-in", "1s", "--json").stdout)
    fx.wait_until(lambda: rejected(gw, k["key"]), timeout=6,
                  what="key created with --expires-in 1s rejected after it expired")


def test_cli_offline_while_running(env):
    gw = env["gw"]
    k = fx.create_key(env["state"], "cli-offline", "user")
    fx.wait_until(lambda: works(gw, k["key"]), timeout=5,
                  what="key created offline on the running gateway's state works")
    cp = fx.gantry("gateway", "keys", "list", "--state", env["state"], "--json")
    assert k["id"] in cp.stdout and k["key"] not in cp.stdout
    fx.gantry("gateway", "keys", "revoke", k["id"], "--state", env["state"])
    fx.wait_until(lambda: rejected(gw, k["key"]), timeout=5,
                  what="key revoked offline -> 401 on the running gateway")
