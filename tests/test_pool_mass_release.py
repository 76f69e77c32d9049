"""Many stateful sandboxes released at once (issue 29), on the real local and Docker backends.

The end of an RL step gives every episode's sandbox back together, each holding a Python
kernel with state and files. Every one must come back clean (no namespace, no file of its
last tenant) or be retired and replaced, the pool must be full again, and no agent may log an
error: the resets take turns (the pool bounds how many run at once) instead of all slowing
each other past their deadline. The sizes here are what CI affords; ``python -m
benchmarks.mass_release`` measures 400 local and 100 Docker sandboxes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.backends.local import LocalBackend
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool

pytestmark = pytest.mark.anyio

AGENT_ERROR = "gem-agent ERROR"
STATE = "state = [str(i) for i in range(100_000)]\nopen('episode.txt', 'w').write('x')"
LEFTOVERS = "import os\nprint('state' in globals(), os.listdir('.'))"
SETTLE_TIMEOUT = 120.0  # generous: a bound on "released together ends", not a speed test


async def each(sandboxes: list[Sandbox], action: Callable[[Sandbox], Awaitable[object]], at_once: int) -> None:
    limiter = anyio.CapacityLimiter(at_once)

    async def one(sandbox: Sandbox) -> None:
        async with limiter:
            await action(sandbox)

    async with anyio.create_task_group() as tg:
        for sandbox in sandboxes:
            tg.start_soon(one, sandbox)


async def with_kernel_and_files(sandbox: Sandbox) -> None:
    assert (await sandbox.kernel_exec(STATE)).ok


@asynccontextmanager
async def released_together(backend: Backend, n: int) -> AsyncIterator[tuple[SandboxPool, list[Sandbox]]]:
    """A full pool of ``n`` whose sandboxes were all leased, made stateful and released at
    once, once nothing resets or starts and all ``n`` are idle; and the sandboxes released."""
    async with SandboxPool(backend, PoolConfig(min_idle=n, max_size=n, acquire_timeout=SETTLE_TIMEOUT)) as pool:
        await pool.wait_ready(timeout=SETTLE_TIMEOUT)
        leased = [await pool.acquire() for _ in range(n)]
        await each(leased, with_kernel_and_files, at_once=8)
        await each(leased, pool.release, at_once=n)
        with anyio.fail_after(SETTLE_TIMEOUT):
            while (s := pool.statistics()).recycling or s.starting or s.idle < n:
                await anyio.sleep(0.01)
        yield pool, leased


async def leftovers_of_every_sandbox(pool: SandboxPool, n: int) -> set[str]:
    """What each of the pool's ``n`` sandboxes shows its next tenant, leased all at once."""
    found: set[str] = set()
    leased = [await pool.acquire() for _ in range(n)]
    try:

        async def look(sandbox: Sandbox) -> None:
            found.add((await sandbox.kernel_exec(LEFTOVERS)).stdout.strip())

        await each(leased, look, at_once=8)
    finally:
        await each(leased, pool.release, at_once=n)
    return found


async def test_sixty_local_stateful_sandboxes_released_together_come_back_clean_without_an_error(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
):
    n = 60
    async with released_together(LocalBackend(), n) as (pool, _):
        stats = pool.statistics()
        assert stats.idle == n and stats.resets + stats.replacements == n  # each reset or retired
        assert await leftovers_of_every_sandbox(pool, n) == {"False []"}
    assert AGENT_ERROR not in capfd.readouterr().err  # local agents log to our stderr
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.docker
async def test_twenty_docker_stateful_sandboxes_released_together_come_back_clean_without_an_error(
    sandbox_image: str, caplog: pytest.LogCaptureFixture
):
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions

    n = 20
    backend = DockerBackend(DockerOptions(image=sandbox_image))
    try:
        async with released_together(backend, n) as (pool, leased):
            stats = pool.statistics()
            assert stats.idle == n and stats.resets + stats.replacements == n
            assert await leftovers_of_every_sandbox(pool, n) == {"False []"}
            agent_logs = [sandbox.box.stream.log_tail() for sandbox in leased]  # type: ignore[attr-defined]
    finally:
        await backend.aclose()
    assert not [log for log in agent_logs if AGENT_ERROR in log]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
