"""Fixtures of the Python client's tests (run by ctest: tests/CMakeLists.txt sets TOLLGATE_LIBRARY,
TOLLGATE_CLI and TOLLGATE_MOCK_PROVIDER; by hand, set them to a build's files)."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package from the source tree


def _cli_path():
    path = os.environ.get("TOLLGATE_CLI")
    if not path:
        pytest.skip("TOLLGATE_CLI names no tollgate binary")
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = str(tmp_path / "home")
    monkeypatch.setenv("TOLLGATE_HOME", h)
    return h


@pytest.fixture
def cli(home):
    def run(*args, check=True):
        r = subprocess.run([_cli_path(), *args], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, TOLLGATE_HOME=home))
        if check and r.returncode != 0:
            raise AssertionError(f"tollgate {' '.join(args)}: {r.returncode} {r.stderr}")
        return r
    return run


@pytest.fixture
def provider_status(cli):
    def get(name):
        doc = json.loads(cli("status", "--json").stdout)
        return next(p for p in doc["providers"] if p["provider"] == name)
    return get


@pytest.fixture
def mock():
    """The test mock provider (tests/helpers/mockprovider.js, Node): start(args...) -> base URL."""
    script = os.environ.get("TOLLGATE_MOCK_PROVIDER")
    if not script:
        pytest.skip("TOLLGATE_MOCK_PROVIDER names no mock provider")
    procs = []

    class Mock:
        url = None

        def start(self, *args):
            p = subprocess.Popen(["node", script, *args], stdout=subprocess.PIPE, text=True)
            procs.append(p)
            port = int(p.stdout.readline().strip())
            self.url = f"http://127.0.0.1:{port}"
            return self.url

        def stats(self):
            import urllib.request
            with urllib.request.urlopen(self.url + "/_stats", timeout=10) as r:
                return json.loads(r.read())

    yield Mock()
    for p in procs:
        p.kill()
        p.wait()
