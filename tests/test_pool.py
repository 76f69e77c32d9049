"""The pool on the real local backend: leases, backpressure, recycling, replacement, shutdown."""

from __future__ import annotations

import os
import time

import anyio
import pytest

from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.errors import AcquireTimeout, PoolClosed, SandboxUnavailable
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import Status
from gem_sandbox.sync import SyncRuntime

pytestmark = pytest.mark.anyio


def pool(**options) -> SandboxPool:
    options.setdefault("min_idle", 1)
    options.setdefault("max_size", 2)
    return SandboxPool(LocalBackend(), PoolConfig(**options))


def bwrap_children() -> list[int]:
    """The bwrap launchers of local sandboxes that this test process started."""
    return [p.pid for p in bwrap_processes() if not p.init and p.ppid == os.getpid()]


async def test_a_released_sandbox_is_reset_and_reused():
    async with pool(min_idle=1, max_size=1) as p:
        async with p.lease() as sb:
            first = sb.id
            await sb.run("open('left-behind.txt', 'w').write('x')")
        async with p.lease() as sb:
            assert sb.id == first
            result = await sb.run("import os; print(os.listdir('.'))")
        assert result.stdout.strip() == "[]"
        assert p.statistics().leases == 2 and p.statistics().resets >= 1


async def test_nothing_leaks_between_leases():
    from textwrap import dedent  # (local: this test alone needs it)

    # The comm of every process in the sandbox but this run's own and its ancestors (the agent
    # and the sandbox's init).
    strangers = dedent("""
        import os
        def parent(pid):
            with open(f'/proc/{pid}/status') as status:
                return int(next(line for line in status if line.startswith('PPid:')).split()[1])
        mine, pid = set(), os.getpid()
        while pid:
            mine.add(pid)
            pid = parent(pid)
        comms = []
        for entry in os.listdir('/proc'):
            if entry.isdigit() and int(entry) not in mine:
                try:
                    comms.append(open(f'/proc/{entry}/comm').read().strip())
                except OSError:  # it exited meanwhile
                    pass
        print(sorted(comms))
    """)
    async with pool(min_idle=1, max_size=1) as p:
        async with p.lease() as sb:
            await sb.run("import subprocess; subprocess.Popen(['sleep', '300'], start_new_session=True)")
            await sb.shell("export SECRET=42; cd /tmp; touch /tmp/mark; (sleep 301 &)")
            await sb.kernel_exec("import subprocess; token = 'abc'; subprocess.Popen(['sleep', '302'])")
            during = await sb.run(strangers)
        async with p.lease() as sb:
            after = await sb.run(strangers)
            env = await sb.shell("echo ${SECRET:-unset}; pwd; ls /tmp")
            kernel = await sb.kernel_exec("print('token' in dir())")
        assert during.stdout.count("sleep") == 2  # the probe sees what outlives its call
        assert after.stdout.strip() == "[]"  # no shell, kernel or sleep survived the reset
        assert "unset" in env.stdout and "mark" not in env.stdout
        assert kernel.stdout.strip() == "False"


async def test_acquire_waits_for_a_release_when_the_pool_is_full():
    async with pool(min_idle=0, max_size=1) as p:
        sb = await p.acquire()
        order: list[str] = []

        async def second() -> None:
            async with p.lease(timeout=10):
                order.append("second got it")

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            await anyio.sleep(0.2)
            order.append("releasing")
            await p.release(sb)
        assert order == ["releasing", "second got it"]
        assert p.statistics().waits >= 1


async def test_waiters_are_served_first_come_first_served():
    async with pool(min_idle=0, max_size=1) as p:
        held = await p.acquire()
        served: list[int] = []

        async def waiter(n: int) -> None:
            sb = await p.acquire(timeout=20)
            served.append(n)
            await p.release(sb)

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(waiter, n)
                await anyio.sleep(0.05)
            await p.release(held)
        assert served == [0, 1, 2, 3]


async def test_acquire_times_out_with_a_clear_error():
    async with pool(min_idle=0, max_size=1) as p:
        async with p.lease():
            with pytest.raises(AcquireTimeout, match="max_size=1"):
                await p.acquire(timeout=0.3)
        assert p.statistics().acquire_timeouts == 1


async def test_too_many_waiters_is_refused_at_once():
    async with pool(min_idle=0, max_size=1, max_waiters=1) as p:
        async with p.lease(), anyio.create_task_group() as tg:
            tg.start_soon(lambda: p.acquire(timeout=0.5))
            await anyio.sleep(0.05)
            with pytest.raises(SandboxUnavailable, match="saturated"):
                await p.acquire()
            tg.cancel_scope.cancel()


async def test_a_sandbox_killed_while_leased_is_replaced():
    async with pool(min_idle=1, max_size=1) as p:
        async with p.lease() as sb:
            dead = sb.id
            await sb.box.kill()  # the box dies from outside
            result = await sb.run("print(1)")
            assert result.status is Status.INFRA_ERROR
        async with p.lease() as sb:
            assert sb.id != dead and (await sb.run("print(1)")).stdout == "1\n"
        assert p.statistics().replacements == 1


async def test_an_idle_sandbox_that_dies_is_replaced_by_the_supervisor():
    async with pool(min_idle=1, max_size=1, health_interval=0.2) as p:
        await p.wait_ready()
        victim = p._idle[0].sandbox
        await victim.box.kill()
        with anyio.fail_after(10):
            while not p._idle or p._idle[0].sandbox is victim:
                await anyio.sleep(0.05)
        assert p.statistics().replacements == 1


async def test_max_uses_retires_a_sandbox():
    async with pool(min_idle=1, max_size=1, max_uses=1) as p:
        async with p.lease() as sb:
            first = sb.id
        async with p.lease() as sb:
            assert sb.id != first


async def test_stateless_runs_share_nothing():
    async with pool() as p:
        await p.run("open('f', 'w').write('x'); import os; os.environ['X'] = '1'")
        result = await p.run("import os; print(os.path.exists('f'), os.environ.get('X'))")
        assert result.stdout == "False None\n"


async def test_concurrent_stateless_runs_beyond_max_size_all_succeed():
    async with pool(min_idle=2, max_size=2) as p:
        results = []

        async def one(i: int) -> None:
            results.append(await p.run(f"print({i} * 2)"))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        assert sorted(int(r.stdout) for r in results) == [i * 2 for i in range(20)]


class BrokenBackend(Backend):
    name = "broken"

    @classmethod
    def check(cls) -> str | None:
        return None

    async def launch(self, spec: SandboxSpec):
        raise OSError("no sandbox for you")


async def test_a_backend_that_cannot_launch_fails_waiters_instead_of_hanging():
    async with SandboxPool(BrokenBackend(), PoolConfig(min_idle=0, max_size=1, launch_attempts=2)) as p:
        with pytest.raises(SandboxUnavailable, match="no sandbox for you"):
            await p.acquire(timeout=30)


async def test_closing_the_pool_kills_every_sandbox_and_refuses_new_leases():
    p = pool(min_idle=2, max_size=3)
    async with p:
        await p.wait_ready()
        leased = await p.acquire()
        assert len(bwrap_children()) >= 2
    assert bwrap_children() == []
    assert not leased.alive
    with pytest.raises(PoolClosed):
        await p.acquire()


def test_a_sync_runtime_runs_code_without_an_event_loop():
    with SyncRuntime("local", min_idle=1, max_size=1) as runtime:
        assert runtime.run("print(6 * 7)").stdout == "42\n"
        with runtime.lease() as sb:
            sb.write_files({"data.txt": "hello"})
            assert sb.run("print(open('data.txt').read())").stdout == "hello\n"
        assert runtime.statistics().leases == 2
    start = time.monotonic()
    while bwrap_children() and time.monotonic() - start < 5:
        time.sleep(0.05)
    assert bwrap_children() == []
