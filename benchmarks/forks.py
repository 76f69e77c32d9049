"""``python -m benchmarks.forks``: forks, snapshots and restores of a sandbox with state.

Why: GRPO samples a group of rollouts from one state and tree search branches mid-episode;
what a fork must beat is what a user does without one, rebuilding the same state in fresh
sandboxes. The state here is a kernel holding 10 MB of objects (a NumPy array and a dict of
strings) and 8 MB of files in the work dir. The baseline, in the same process on the same
pool: lease fresh sandboxes, write the files, run the kernel code that builds the objects
(this state is cheap to build; an installed repository or a loaded data set is not, which is
when forks pay most). Published anchors, for context only: sandlock forks a prepared process
in about 0.7 ms, AgentENV resumes a Firecracker snapshot in under 50 ms.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable

import anyio

from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool

from .report import Row, percentile, print_table

ROUNDS = 10
FILES = {f"data/part{i}.bin": os.urandom(1024 * 1024) for i in range(8)}  # 8 MB
KERNEL = (
    "import numpy as np\n"
    "table = np.random.default_rng(0).random(1_000_000)\n"  # 8 MB
    "names = {i: f'name-{i:07d}' for i in range(20_000)}\n"  # about 2 MB with the dict
)
REBUILD = "rebuilt in fresh sandboxes"


async def _build(sandbox: Sandbox) -> None:
    await sandbox.write_files(FILES)
    result = await sandbox.kernel_exec(KERNEL)
    assert result.ok, result


async def _timed(pool: SandboxPool, make: Callable[[], Awaitable[list[Sandbox]]]) -> float:
    """Milliseconds ``make`` takes; what it leased is given back and the pool settles after."""
    await pool.wait_ready()
    start = time.perf_counter()
    made = await make()
    elapsed = (time.perf_counter() - start) * 1000
    for sandbox in made:
        assert (await sandbox.kernel_exec("print(len(names))")).stdout == "20000\n"
        await pool.release(sandbox)
    return elapsed


async def _rebuilt(pool: SandboxPool, n: int) -> list[Sandbox]:
    sandboxes = [await pool.acquire() for _ in range(n)]
    async with anyio.create_task_group() as tg:
        for sandbox in sandboxes:
            tg.start_soon(_build, sandbox)
    return sandboxes


async def measure(backend: Backend, label: str, rounds: int = ROUNDS) -> list[Row]:
    rows = []
    async with SandboxPool(backend, PoolConfig(max_size=10, min_idle=9)) as pool:
        async with pool.lease() as parent:
            await _build(parent)
            for n in (1, 8):
                forks = [await _timed(pool, lambda: parent.fork(n)) for _ in range(rounds)]
                rebuilt = [await _timed(pool, lambda: _rebuilt(pool, n)) for _ in range(rounds)]
                rows.append(Row(f"{label}: fork({n}) p50", percentile(forks, 50), percentile(rebuilt, 50), "ms", REBUILD))
            snapshots, restores = [], []
            for _ in range(rounds):
                start = time.perf_counter()
                snapshot = await parent.snapshot()
                snapshots.append((time.perf_counter() - start) * 1000)
                restores.append(await _timed(pool, lambda: _restored(pool, snapshot)))
                await pool.drop_snapshot(snapshot)
            rebuilt = [await _timed(pool, lambda: _rebuilt(pool, 1)) for _ in range(rounds)]
            rows.append(Row(f"{label}: snapshot p50 ({snapshot.size / 2**20:.1f} MB kept)", percentile(snapshots, 50), None, "ms"))
            rows.append(Row(f"{label}: restore p50", percentile(restores, 50), percentile(rebuilt, 50), "ms", REBUILD))
    return rows


async def _restored(pool: SandboxPool, snapshot) -> list[Sandbox]:
    return [await pool.restore(snapshot)]


def run(backends: tuple[str, ...] = ("local", "docker")) -> list[Row]:
    from gem_sandbox.sandbox.defaults import backend_class

    rows = []
    for name in backends:
        cls = backend_class(name)
        if cls.check() is None:
            rows += anyio.run(measure, cls(), "bubblewrap" if name == "local" else name)
    return rows


if __name__ == "__main__":
    print_table("forks and snapshots", run())
