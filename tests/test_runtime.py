"""The runtime: an explicit owner of sandboxes, on the caller's loop, opened once, and the
process default behind the sync bridge."""

from __future__ import annotations

import threading

import anyio
import anyio.from_thread
import pytest

from gem_sandbox.runtime import Runtime, RuntimeState, WrongEventLoop
from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.vector import AsyncVectorEnv
from gem_sandbox.wrappers import ToolEnvWrapper
from tests.helpers import CountdownEnv

pytestmark = pytest.mark.anyio


@pytest.fixture
def local() -> LocalBackend:
    problem = LocalBackend.check()
    if problem:
        pytest.skip(problem)
    return LocalBackend()


async def test_an_async_trainer_makes_tool_calls_with_no_thread_per_call(local: LocalBackend):
    """64 tool calls in flight from one asyncio loop: the thread count does not move."""
    async with Runtime(local, PoolConfig(min_idle=8, max_size=8)) as runtime:
        await runtime.wait_ready()
        tool = PythonCodeTool(runtime=runtime)
        vec = AsyncVectorEnv([ToolEnvWrapper(CountdownEnv(length=9), [tool]) for _ in range(64)])
        await vec.areset(seed=0)
        await vec.astep(["<python>print(0)</python>"] * 64)  # warm every path once
        before, most = threading.active_count(), 0
        done = anyio.Event()

        async def sample() -> None:
            nonlocal most
            while not done.is_set():
                most = max(most, threading.active_count())
                await anyio.sleep(0.001)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            obs, *_ = await vec.astep(["<python>import time; time.sleep(0.05); print(1)</python>"] * 64)
            done.set()
        assert obs == ["Code execution result: 1\n\n"] * 64
        assert runtime.statistics().leases >= 128
        assert most <= before, f"{before} threads before 64 calls in flight, {most} during"
        await vec.aclose()


async def test_a_runtime_opens_its_pool_at_the_first_call_that_needs_a_sandbox(local: LocalBackend):
    async with Runtime(local, PoolConfig(min_idle=1, max_size=1)) as runtime:
        assert runtime.backend is None and runtime.statistics().launched == 0
        async with runtime.lease() as sandbox:
            assert (await sandbox.run("print(2)")).stdout == "2\n"
        assert runtime.backend == "local" and runtime.statistics().launched == 1
    assert runtime.state is RuntimeState.CLOSED
    assert sandbox.id not in {p.box for p in await anyio.to_thread.run_sync(bwrap_processes)}


async def test_a_runtime_is_opened_once(local: LocalBackend):
    runtime = Runtime(local)
    async with runtime:
        with pytest.raises(RuntimeError, match="opened once"):
            await runtime.__aenter__()
    with pytest.raises(RuntimeError, match="opened once"):
        await runtime.__aenter__()
    with pytest.raises(RuntimeError, match="inside 'async with Runtime"):
        await runtime.run("print(1)")


def test_a_bad_backend_name_fails_when_the_runtime_is_made():
    with pytest.raises(ValueError, match="unknown backend 'podman'"):
        Runtime("podman")


async def test_a_runtime_used_from_another_event_loop_says_so(local: LocalBackend):
    async with Runtime(local, PoolConfig(min_idle=0, max_size=1)) as runtime:

        async def elsewhere() -> None:
            await runtime.run("print(1)")

        with pytest.raises(WrongEventLoop, match="belongs to the event loop that opened it"):
            await anyio.to_thread.run_sync(anyio.run, elsewhere)
