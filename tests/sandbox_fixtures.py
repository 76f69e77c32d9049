"""The ``sandbox`` fixture: a real sandbox on each backend the behaviour suite runs against.

Test modules import what they use (``from tests.sandbox_fixtures import sandbox``) and mark
themselves ``pytest.mark.anyio``. Every test written against ``sandbox`` runs once per name
in :data:`BACKENDS`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import anyio
import pytest

from gem_sandbox.agent.tenants import snapshot
from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.backends.local import LocalBackend, ProcessBox
from gem_sandbox.sandbox.client import Sandbox, open_sandbox

# Backends the behaviour suite runs on; Docker's cases are marked so CI can require them.
# "rootless" is bubblewrap started as nobody: a user namespace, runs sharing the agent's uid.
BACKENDS = ["local", "rootless", pytest.param("docker", marks=pytest.mark.docker)]
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


@pytest.fixture(params=BACKENDS)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    async with open_sandbox(make_backend(request.param), SPEC) as sb:
        yield sb


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
