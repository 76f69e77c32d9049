"""The ``runtime`` fixture of the tool tests: a real runtime on each backend the tools run on.

Test modules import it with the module-scoped ``anyio_backend`` it needs (``from
tests.tool_fixtures import anyio_backend, runtime``); every test that uses it runs on
bubblewrap and on Docker. One runtime per module and backend keeps the suite fast; tests leave
no lease behind, so they see it as new. Without a daemon or the image the Docker case skips, saying why
(CI turns those skips into failures).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.defaults import backend_class
from gem_sandbox.sandbox.pool import PoolConfig

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
SPEC = SandboxSpec(memory_mb=512, pids=128, workdir_mb=64, tmp_mb=32)


def make_backend(name: str) -> Backend:
    cls = backend_class(name)
    problem = cls.check()
    if problem:
        pytest.skip(f"the {name} backend cannot run here: {problem}")
    return cls()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def open_runtime(name: str, max_size: int = 4, min_idle: int = 1) -> AsyncIterator[Runtime]:
    """A ready runtime on the backend ``name``."""
    backend = make_backend(name)
    async with Runtime(backend, PoolConfig(min_idle=min_idle, max_size=max_size, run_timeout=10, spec=SPEC)) as rt:
        await rt.wait_ready()
        yield rt
    await backend.aclose()


@pytest.fixture(scope="module", params=BACKENDS)
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    async with open_runtime(request.param) as rt:
        yield rt
