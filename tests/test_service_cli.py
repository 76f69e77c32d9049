"""``gem-sandbox serve`` as an operator runs it: a process of its own that serves on loopback
and, on SIGTERM, finishes what is in flight, removes its containers and exits 0."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest

from gem_sandbox.sandbox.backends.base import POOL_LABEL
from tests.docker_fixtures import docker_client, sandbox_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def test_serve_answers_runs_and_leaves_nothing_after_sigterm(sandbox_image: str, docker_client, tmp_path) -> None:  # noqa: F811
    config = tmp_path / "service.toml"
    config.write_text(f'port = 0\nbackend = "docker"\n\n[pool]\nmax_size = 2\nimage = "{sandbox_image}"\n\n[tokens.ops]\nsecret = "ops-secret"\n')
    server = subprocess.Popen(
        [sys.executable, "-m", "gem_sandbox.cli", "serve", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert server.stderr is not None
        lines = []
        while not (url := re.search(r"http://127\.0\.0\.1:\d+", lines[-1] if lines else "")) and len(lines) < 20:
            lines.append(server.stderr.readline())  # the "serving ... on <url>" line
        assert url, lines
        request = urllib.request.Request(
            f"{url.group()}/v1/run",
            data=json.dumps({"code": "print('served')"}).encode(),
            headers={"Authorization": "Bearer ops-secret", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert json.load(response)["stdout"] == "served\n"
        pool = docker_client.containers.list(filters={"label": POOL_LABEL + "=" + _pool_name(server.pid)})
        assert pool, "the service's containers carry its pool label"
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
    assert code == 0, server.stderr.read()
    assert not docker_client.containers.list(all=True, filters={"label": POOL_LABEL + "=" + _pool_name(server.pid)})


def _pool_name(pid: int) -> str:
    """The name of the first pool a process opens (SandboxPool's default)."""
    return f"{pid}-1"
