"""pytest fixtures for the gateway suites (tests/gateway/test_*.py).

Module-scoped: one model server and a scratch dir per test file; gateways are started by
the `gateways` factory and stopped at the end of the module (or of the test, for the
function-scoped `fresh_gateways`), also when a test fails. A failing test prints the tail of
every gateway log it started.
"""

import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fixtures as fx  # noqa: E402
import jwtutil  # noqa: E402



@pytest.fixture(scope="module")
def tmp_dir():
    d = tempfile.mkdtemp(prefix="gantry-gwtest-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def model(tmp_dir):
    with fx.ModelServer(tmpdir=tmp_dir) as m:
        yield m


class Gateways:
    """Starts gateways (and other services) and stops all of them in close()."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.started = []
        self.n = 0

    def start(self, config, name=None):
        self.n += 1
        g = fx.Gateway(config, tmpdir=self.tmp, name=name or "gateway%d" % self.n)
        self.started.append(g)
        g.start()
        return g

    def service(self, svc):
        self.started.append(svc)
        return svc.start()

    def logs(self):
        out = []
        for g in self.started:
            if isinstance(g, fx.Gateway) and g.proc:
                out.append("---- %s (%s) log tail ----\n%s" % (g.name, g.config_path,
                                                               g.proc.tail(60)))
        return "\n".join(out)

    def close(self):
        for g in reversed(self.started):
            try:
                g.stop()
            except Exception as e:  # keep stopping the others
                print("stopping %r failed: %s" % (g, e), file=sys.stderr)
        self.started = []


@pytest.fixture(scope="module")
def gateways(tmp_dir):
    g = Gateways(tmp_dir)
    yield g
    g.close()


@pytest.fixture
def fresh_gateways(tmp_dir):
    d = tempfile.mkdtemp(prefix="t-", dir=tmp_dir)
    g = Gateways(d)
    yield g
    g.close()


@pytest.fixture(scope="module")
def jwt_keys(tmp_dir):
    return jwtutil.Keys(tmp_dir)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        for name in ("gateways", "fresh_gateways"):
            g = item.funcargs.get(name)
            if g is not None and g.started:
                rep.sections.append(("gateway logs (%s)" % name, g.logs()))
