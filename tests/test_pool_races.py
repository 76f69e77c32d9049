"""The pool's races, on the scripted backend (the real agent, no namespaces, any Linux):
cancellation at every point of a lease, death at hand-out, launch failure streaks, release
after close. Every test ends by proving that each box the pool made was killed exactly once."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from gem_sandbox.sandbox.errors import PoolClosed, SandboxError, SandboxUnavailable
from gem_sandbox.sandbox.pool import PoolConfig, PoolState, SandboxPool
from gem_sandbox.sandbox.result import Status
from tests.scripted_backend import ScriptedBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
def backend() -> ScriptedBackend:
    if ScriptedBackend.check():
        pytest.skip(ScriptedBackend.check())
    return ScriptedBackend()


@pytest.fixture
async def pool(backend: ScriptedBackend) -> AsyncIterator[SandboxPool]:
    async with SandboxPool(backend, PoolConfig(min_idle=1, max_size=2, grace=1.0)) as p:
        await p.wait_ready(10)
        yield p
    assert [box.kills for box in backend.boxes] == [1] * len(backend.boxes), "a box was leaked or killed twice"


async def quiet(pool: SandboxPool, backend: ScriptedBackend) -> None:
    """Wait until nothing is starting or recycling, then check that every box is accounted
    for: each one not yet killed is idle in the pool (none leaked, none lost)."""
    with anyio.fail_after(10):
        while (s := pool.statistics()).starting or s.recycling or s.idle < 1:
            await anyio.sleep(0.002)
    stats = pool.statistics()
    assert stats.leased == 0 and stats.waiting == 0
    assert len([box for box in backend.boxes if not box.kills]) == stats.idle <= pool.config.max_size


EVERY, STRIDE = 64, 5


async def cancelled_after(checkpoints: int, operation: Callable[[], Awaitable[object]]) -> bool:
    """Run ``operation`` and cancel it after the event loop went round ``checkpoints`` times;
    whether it finished first."""
    finished = False
    scope = anyio.CancelScope()

    async def run() -> None:
        nonlocal finished
        with scope:
            await operation()
            finished = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        scope.cancel()
    return finished


async def sweep(pool: SandboxPool, backend: ScriptedBackend, operation: Callable[[], Awaitable[object]]) -> int:
    """Cancel ``operation`` after each number of loop turns, from before its first await to
    after its end: every turn for the first :data:`EVERY` (the pool's own awaits, which
    never wait on I/O, all fall there), then every :data:`STRIDE`-th, where the operation is
    parked on the agent's answer for hundreds of turns at a time."""
    checkpoints = 0
    while checkpoints < 5000:
        finished = await cancelled_after(checkpoints, operation)
        await quiet(pool, backend)
        if finished:
            return checkpoints
        checkpoints += 1 if checkpoints < EVERY else STRIDE
    raise AssertionError("the operation never finished")


async def test_a_lease_cancelled_anywhere_gives_its_sandbox_back(pool: SandboxPool, backend: ScriptedBackend):
    async def lease_and_run() -> None:
        async with pool.lease() as sandbox:
            assert (await sandbox.run("print(1)")).stdout == "1\n"

    assert await sweep(pool, backend, lease_and_run) > 3
    assert (await pool.run("print(2)")).stdout == "2\n"


async def test_a_kernel_call_cancelled_anywhere_leaves_a_clean_sandbox(pool: SandboxPool, backend: ScriptedBackend):
    async def kernel() -> None:
        async with pool.lease() as sandbox:
            assert (await sandbox.kernel_exec("x = 1\nprint(x)")).stdout == "1\n"

    await sweep(pool, backend, kernel)
    async with pool.lease() as sandbox:  # the next tenant sees no namespace of the last
        assert "NameError" in (await sandbox.kernel_exec("print(x)")).stderr


async def test_a_waiter_cancelled_anywhere_loses_no_sandbox(pool: SandboxPool, backend: ScriptedBackend):
    """The pool is full: the cancelled caller waits in line while the holders give back."""

    async def wait_in_line() -> None:
        async with anyio.create_task_group() as tg:
            async with pool.lease(), pool.lease():
                tg.start_soon(lease_once)
                while not pool.statistics().waiting:
                    await anyio.sleep(0)
            # leaving the two leases gives both back: the first goes to the waiter

    async def lease_once() -> None:
        async with pool.lease() as sandbox:
            assert sandbox.alive

    await sweep(pool, backend, wait_in_line)


async def test_a_sandbox_that_dies_during_its_reset_is_replaced_not_handed_over(
    pool: SandboxPool, backend: ScriptedBackend
):
    first, second = await pool.acquire(), await pool.acquire()
    got: list[object] = []

    async def waiter() -> None:
        async with pool.lease() as sandbox:
            got.append(sandbox)
            assert (await sandbox.run("print('served')")).stdout == "served\n"

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        while not pool.statistics().waiting:
            await anyio.sleep(0.001)
        box = next(b for b in backend.boxes if b.id == first.id)
        box.crash()
        await pool.release(first)  # its reset finds it dead: destroyed, a replacement starts
        await pool.release(second)
    assert got[0] is not first and pool.statistics().replacements == 1
    await quiet(pool, backend)


async def test_an_idle_sandbox_that_dies_is_never_handed_out(pool: SandboxPool, backend: ScriptedBackend):
    idle = backend.boxes[0]
    idle.crash()
    with anyio.fail_after(5):
        while not pool.statistics().replacements:  # the pool heard of the death
            await anyio.sleep(0.001)
    async with pool.lease() as sandbox:
        assert sandbox.id != idle.id and sandbox.alive
    await quiet(pool, backend)


async def test_a_failure_streak_fails_the_waiters_then_the_pool_recovers(backend: ScriptedBackend):
    config = PoolConfig(min_idle=0, max_size=1, launch_attempts=3, acquire_timeout=10)
    async with SandboxPool(backend, config) as pool:
        backend.fail_next(3)
        with pytest.raises(SandboxUnavailable, match="3 launches of a scripted sandbox failed in a row.*went away"):
            await pool.acquire()
        async with pool.lease() as sandbox:  # the next launch works
            assert (await sandbox.run("print('back')")).stdout == "back\n"
        stats = pool.statistics()
        assert (stats.launch_failures, stats.launched) == (3, 1)
    assert [box.kills for box in backend.boxes] == [1]


async def test_fewer_failures_than_the_streak_limit_only_delay_a_waiter(backend: ScriptedBackend):
    async with SandboxPool(backend, PoolConfig(min_idle=0, max_size=1, launch_attempts=3)) as pool:
        backend.fail_next(2)
        async with pool.lease() as sandbox:
            assert sandbox.alive
        assert pool.statistics().launch_failures == 2


async def test_a_launch_held_when_the_pool_closes_leaves_nothing(backend: ScriptedBackend):
    gate = anyio.Event()
    backend.plan.append(gate)
    async with SandboxPool(backend, PoolConfig(min_idle=1, max_size=1)) as pool:
        while backend.launches == 0:
            await anyio.sleep(0.001)
        assert pool.statistics().starting == 1
    gate.set()
    assert backend.boxes == [] and pool.state is PoolState.CLOSED


async def test_a_release_after_close_is_a_no_op_and_the_box_is_killed_once(backend: ScriptedBackend):
    async with SandboxPool(backend, PoolConfig(min_idle=1, max_size=1)) as pool:
        sandbox = await pool.acquire()
    await pool.release(sandbox)
    await pool.release(sandbox)
    assert [box.kills for box in backend.boxes] == [1]
    with pytest.raises(PoolClosed):
        await pool.acquire()


async def test_releasing_what_was_not_leased_is_refused(pool: SandboxPool):
    sandbox = await pool.acquire()
    await pool.release(sandbox)
    with pytest.raises(SandboxError, match="did not lease"):
        await pool.release(sandbox)


async def test_a_pool_is_entered_once(backend: ScriptedBackend):
    pool = SandboxPool(backend, PoolConfig(min_idle=0, max_size=1))
    async with pool:
        with pytest.raises(RuntimeError, match="opened once"):
            await pool.__aenter__()
    with pytest.raises(RuntimeError, match="closed; a pool is opened once"):
        await pool.__aenter__()


async def test_a_pool_leaves_the_processes_signals_alone(pool: SandboxPool):
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


async def test_statistics_are_a_snapshot(pool: SandboxPool):
    before = pool.statistics()
    async with pool.lease():
        during = pool.statistics()
    assert (before.leased, during.leased, during.leases) == (0, 1, before.leases + 1)


async def test_a_run_in_a_crashed_sandbox_is_infra_error(pool: SandboxPool, backend: ScriptedBackend):
    async with pool.lease() as sandbox:
        next(b for b in backend.boxes if b.id == sandbox.id).crash()
        result = await sandbox.run("print(1)")
    assert result.status is Status.INFRA_ERROR
    await quiet(pool, backend)
