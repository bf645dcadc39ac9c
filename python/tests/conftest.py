"""Shared fixtures: tmp_path is a fresh directory removed after each test (the
suite leaves nothing behind in /tmp)."""

import pathlib
import tempfile

import pytest


@pytest.fixture
def tmp_path():
    with tempfile.TemporaryDirectory(prefix="gantry-pytest-") as d:
        yield pathlib.Path(d)
