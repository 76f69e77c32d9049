"""The ``sandbox`` fixture: a real sandbox on each backend the behaviour suite runs against.

Test modules import what they use (``from tests.sandbox_fixtures import sandbox``) and mark
themselves ``pytest.mark.anyio``. Every test written against ``sandbox`` runs once per name
in :data:`BACKENDS`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from gem_sandbox.agent.tenants import snapshot
from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.backends.local import LocalBackend, ProcessBox
from gem_sandbox.sandbox.client import Sandbox, open_sandbox

# Backends the behaviour suite runs on; Docker's cases are marked so CI can require them.
# "rootless" is bubblewrap started as nobody: a user namespace, runs sharing the agent's uid.
# "e2b" is the e2b backend on the service's own e2b-compatible endpoint (a real
# `gem-sandbox serve --e2b-compatible` over Docker): its agent runs as a command of a sandbox
# there, in token mode, inside the Docker sandbox's own agent.
HOST_BACKENDS = ["local", "rootless", pytest.param("docker", marks=pytest.mark.docker)]
BACKENDS = [*HOST_BACKENDS, pytest.param("e2b", marks=pytest.mark.e2b)]
E2B_SECRET = "behaviour-suite"
ROOTLESS_USER = 65534

SPEC = SandboxSpec(pids=128, workdir_mb=64, tmp_mb=32)


def make_backend(name: str) -> Backend:
    if name == "local":
        problem = LocalBackend.check()
        if problem:
            pytest.skip(problem)
        return LocalBackend()
    if name == "rootless":
        problem = LocalBackend.check()
        if problem:
            pytest.skip(problem)
        return LocalBackend(user=ROOTLESS_USER if os.geteuid() == 0 else None)
    if name == "docker":
        from gem_sandbox.sandbox.backends.docker import DockerBackend

        problem = DockerBackend.check()
        if problem:
            pytest.skip(problem)
        return DockerBackend()
    raise ValueError(f"no test backend named {name!r}")


def backend_for(request: pytest.FixtureRequest) -> Backend:
    """The backend a fixture's ``request.param`` names (``e2b``: on the session's endpoint)."""
    if request.param == "e2b":
        from gem_sandbox.sandbox.backends.e2b import E2BBackend, E2BOptions

        url = request.getfixturevalue("e2b_endpoint")
        return E2BBackend(E2BOptions(api_key=E2B_SECRET, api_url=url, sandbox_url=url))
    return make_backend(request.param)


@pytest.fixture(params=BACKENDS)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with open_sandbox(backend_for(request), SPEC) as sb:
        yield sb


@pytest.fixture(scope="session")
def e2b_endpoint(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a `gem-sandbox serve --e2b-compatible` process over Docker, for the
    session; SIGTERM ends it (and its containers) at the end. Its cases are marked ``e2b``,
    not ``docker``: the suite's checks that need uid mode skip them (token mode here, see
    SECURITY.md), and a skip of a Docker case would fail CI. Without Docker they skip too,
    and CI still fails on the Docker cases themselves."""
    config = tmp_path_factory.mktemp("e2b") / "service.toml"
    config.write_text(
        f'port = 0\nbackend = "docker"\ne2b_compatible = true\n\n[pool]\nmax_size = 4\nimage = "{sandbox_image}"\n\n'
        f'[tokens.suite]\nsecret = "{E2B_SECRET}"\n'
    )
    log = config.with_suffix(".log")
    with log.open("w") as stderr:  # a file, not a pipe: a full pipe would stop the server
        server = subprocess.Popen([sys.executable, "-m", "gem_sandbox.cli", "serve", "--config", str(config)], stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"http://127\.0\.0\.1:\d+", log.read_text())):
            if time.monotonic() > deadline or server.poll() is not None:
                pytest.fail(f"gem-sandbox serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield found.group()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


@pytest.fixture
async def local_sandbox() -> AsyncIterator[Sandbox]:
    """A bubblewrap sandbox, for tests about that backend itself."""
    async with open_sandbox(make_backend("local"), SPEC, grace=0.5) as sb:
        yield sb


def agent_host_pid(sandbox: Sandbox) -> int:
    """The host pid of a process-box sandbox's agent (under bwrap: below two bwrap processes)."""
    assert isinstance(sandbox.box, ProcessBox)
    pid = sandbox.box.process.pid
    table = snapshot()
    while _argv0(pid).endswith("bwrap"):
        (pid,) = [p.pid for p in table.values() if p.ppid == pid and not p.zombie]
    return pid


def _argv0(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")[0].decode()


async def until_host_processes_match(text: str, count: int) -> None:
    """Wait (up to 5 s) until ``count`` host processes have ``text`` in their command line
    (a job just put in the background may not have exec'd yet)."""
    with anyio.fail_after(5):
        while len(host_processes_matching(text)) != count:
            await anyio.sleep(0.01)


def host_processes_matching(text: str) -> list[int]:
    """Pids of host processes whose command line contains ``text``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if text.encode() in f.read().replace(b"\0", b" "):
                        found.append(int(name))
            except OSError:
                pass
    return found
