"""``python -m benchmarks.mass_release [--local N] [--docker N]``: many stateful sandboxes
released at once.

Why: an RL step ends with every episode giving its sandbox back at the same moment. Each of
those sandboxes holds a Python kernel with state, so each release is a reset that kills a
process and frees its memory: CPU and kernel work. Released together, the pool must end full
and warm again (every sandbox clean or retired and replaced), with no agent error logged,
in bounded time. The baseline, in the same process on the same backend, releases the same
number one by one, each back in the pool before the next goes: the ratio is what doing the
resets together saves (or costs).

Defaults: 400 local (bubblewrap) and 100 Docker sandboxes; ``--local``/``--docker`` take
smaller numbers for quick runs (0 skips a backend). The agent's log is counted for errors:
on the local backend it is this process's stderr (captured for the run), on Docker each
container's attach stream.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

import anyio

from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool

from .report import Row, print_table

LOCAL, DOCKER = 400, 100
STATE = "state = [str(i) for i in range(100_000)]"  # a kernel holding a few MB, as an episode's would
AGENT_ERROR = "gem-agent ERROR"
UP_TIMEOUT = 600.0  # seconds for a pool of hundreds to start (1,000 local take ~80 s)


@dataclass(frozen=True)
class Outcome:
    seconds: float  # from the first release until the pool is full and warm again
    replacements: int
    agent_errors: int


async def _each(sandboxes: list[Sandbox], action: Callable[[Sandbox], Awaitable[object]], at_once: int) -> None:
    limiter = anyio.CapacityLimiter(at_once)

    async def one(sandbox: Sandbox) -> None:
        async with limiter:
            await action(sandbox)

    async with anyio.create_task_group() as tg:
        for sandbox in sandboxes:
            tg.start_soon(one, sandbox)


async def _settled(pool: SandboxPool, idle: int) -> None:
    """Until nothing resets or starts and ``idle`` sandboxes are warm."""
    while (s := pool.statistics()).recycling or s.starting or s.idle < idle:
        await anyio.sleep(0.005)


async def _kernel(sandbox: Sandbox) -> None:
    result = await sandbox.kernel_exec(STATE)
    assert result.ok, result


async def release(backend: Backend, n: int, *, together: bool, errors: Callable[[list[Sandbox]], int]) -> Outcome:
    """Lease ``n`` sandboxes of a full pool, give each a kernel with state, then release them
    ``together`` (or one by one) and time until the pool is full and warm again."""
    config = PoolConfig(min_idle=n, max_size=n, acquire_timeout=UP_TIMEOUT)
    async with SandboxPool(backend, config) as pool:
        await pool.wait_ready(timeout=UP_TIMEOUT)
        leased = [await pool.acquire() for _ in range(n)]
        await _each(leased, _kernel, at_once=8)
        start = time.perf_counter()
        if together:
            await _each(leased, pool.release, at_once=n)
        else:
            for count, sandbox in enumerate(leased, 1):
                await pool.release(sandbox)
                await _settled(pool, count)
        await _settled(pool, n)
        seconds = time.perf_counter() - start
        stats = pool.statistics()
        found = errors(leased)
    return Outcome(seconds, stats.replacements, found)


@contextlib.contextmanager
def _stderr_captured() -> Iterator[Callable[[list[Sandbox]], int]]:
    """Local agents log to a copy of this process's stderr taken at launch: point fd 2 at a
    file meanwhile, and count the agent's error lines in it. They are echoed afterwards."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)

        def count(_: list[Sandbox]) -> int:
            log.seek(0)
            return sum(AGENT_ERROR in line for line in log.read().decode(errors="replace").splitlines())

        try:
            yield count
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            lines = [line for line in log.read().decode(errors="replace").splitlines() if AGENT_ERROR in line]
            for line in lines[:10]:
                print(line, file=sys.stderr)


def _attach_logs(sandboxes: list[Sandbox]) -> int:
    """Error lines in the tail each container's attach stream kept of its agent's log."""
    return sum(sandbox.box.stream.log_tail().count(AGENT_ERROR) for sandbox in sandboxes)  # type: ignore[attr-defined]


def _rows(name: str, n: int, together: Outcome, one_by_one: Outcome) -> list[Row]:
    what = f"{name}: {n} stateful sandboxes released"
    return [
        Row(f"{what} together, until full and warm", together.seconds, one_by_one.seconds, "s", "one by one"),
        Row(f"{what} together, replaced (of {n})", together.replacements, one_by_one.replacements, "sandboxes",
            "one by one"),
        Row(f"{what} together, agent errors logged", together.agent_errors, one_by_one.agent_errors, "lines",
            "one by one"),
    ]


async def bench_local(n: int = LOCAL) -> list[Row]:
    from gem_sandbox.sandbox.backends.local import LocalBackend

    backend = LocalBackend()
    with _stderr_captured() as count:
        one_by_one = await release(backend, n, together=False, errors=count)
        before = one_by_one.agent_errors
        together = await release(backend, n, together=True, errors=count)
    together = Outcome(together.seconds, together.replacements, together.agent_errors - before)
    return _rows("local", n, together, one_by_one)


async def bench_docker(n: int = DOCKER) -> list[Row]:
    from gem_sandbox.sandbox.backends.docker import DockerBackend

    problem = DockerBackend.check()
    if problem:
        print(f"docker mass release skipped: {problem}", file=sys.stderr)
        return []
    backend = DockerBackend()
    try:
        one_by_one = await release(backend, n, together=False, errors=_attach_logs)
        together = await release(backend, n, together=True, errors=_attach_logs)
    finally:
        await backend.aclose()
    return _rows("docker", n, together, one_by_one)


def run(local: int = LOCAL, docker: int = DOCKER) -> list[Row]:
    rows = anyio.run(bench_local, local) if local else []
    return rows + (anyio.run(bench_docker, docker) if docker else [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", type=int, default=LOCAL, help=f"local sandboxes (default {LOCAL}; 0 skips)")
    parser.add_argument("--docker", type=int, default=DOCKER, help=f"Docker sandboxes (default {DOCKER}; 0 skips)")
    args = parser.parse_args(argv)
    print_table("mass release", run(args.local, args.docker))
    return 0


if __name__ == "__main__":
    sys.exit(main())
