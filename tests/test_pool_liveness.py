"""Liveness on the real local backend: the pool never hands out a dead sandbox, drops a dead
idle one at once, tolerates a release after close, and ``Sandbox.close`` always kills."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from gem_sandbox.sandbox.errors import AgentError, SandboxError
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import SPEC, agent_host_pid

pytestmark = pytest.mark.anyio

NO_HEALTH_CHECKS = 3600.0  # so that only the death notification can explain a replacement


def pool(**options: object) -> SandboxPool:
    options.setdefault("min_idle", 1)
    options.setdefault("max_size", 1)
    options.setdefault("health_interval", NO_HEALTH_CHECKS)
    return SandboxPool(LocalBackend(), PoolConfig(**options))  # type: ignore[arg-type]


def box_processes(box_id: str) -> list[int]:
    """Host processes (launcher and init) of one local sandbox."""
    return [p.pid for p in bwrap_processes() if p.box == box_id]


async def idle_sandbox(p: SandboxPool) -> Sandbox:
    await p.wait_ready()
    return p._idle[0].sandbox


async def until(condition, timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.01)


async def test_acquire_after_an_idle_agent_died_hands_out_a_live_sandbox() -> None:
    async with pool() as p:
        victim = await idle_sandbox(p)
        os.kill(agent_host_pid(victim), signal.SIGKILL)
        await until(lambda: not victim.alive)
        async with p.lease(timeout=10) as sb:
            assert sb is not victim and sb.alive
            result = await sb.run("print('alive')")
        assert result.status is Status.OK and result.stdout == "alive\n"
        assert p.statistics().replacements == 1


async def test_a_dead_idle_sandbox_is_replaced_without_waiting_for_a_health_check() -> None:
    async with pool() as p:
        victim = await idle_sandbox(p)
        os.kill(agent_host_pid(victim), signal.SIGKILL)
        await until(lambda: p.statistics().launched == 2 and p.statistics().idle == 1)
        assert p.statistics().replacements == 1
        await until(lambda: box_processes(victim.id) == [])


async def test_a_sandbox_that_dies_while_a_caller_waits_is_not_handed_to_it() -> None:
    async with pool(min_idle=0) as p:
        held = await p.acquire()
        got: list[Sandbox] = []

        async def waiter() -> None:
            got.append(sb := await p.acquire(timeout=20))
            await p.release(sb)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await until(lambda: p.statistics().waits == 1)
            os.kill(agent_host_pid(held), signal.SIGKILL)
            await until(lambda: not held.alive)
            await p.release(held)  # dead: destroyed and replaced, the waiter gets the new one
        assert got[0] is not held and p.statistics().replacements == 1


async def test_release_after_the_pool_closed_is_a_no_op() -> None:
    p = pool()
    async with p:
        sb = await p.acquire()
    await p.release(sb)
    assert not sb.alive and box_processes(sb.id) == []


async def test_releasing_twice_while_open_is_a_typed_error() -> None:
    async with pool() as p:
        sb = await p.acquire()
        await p.release(sb)
        with pytest.raises(SandboxError, match="released twice"):
            await p.release(sb)


@pytest.mark.parametrize(
    "failure, raised",
    [
        (RuntimeError("bug in the polite path"), RuntimeError),
        (AgentError("internal", "the agent refused to shut down"), None),
        ("cancelled", "cancelled"),
    ],
    ids=["any-exception", "agent-error", "cancellation"],
)
async def test_close_kills_the_box_whatever_the_polite_shutdown_raises(
    failure: BaseException | str, raised: type[BaseException] | str | None
) -> None:
    if failure == "cancelled":  # the event loop's own cancellation exception
        failure = raised = anyio.get_cancelled_exc_class()
    async with open_sandbox(LocalBackend(), SPEC) as sb:
        assert box_processes(sb.id)

        async def failing_request(*args: object, **kwargs: object) -> None:
            raise failure() if isinstance(failure, type) else failure

        sb._request = failing_request  # type: ignore[method-assign]
        if raised is None:
            await sb.close()
        else:
            with pytest.raises(raised):
                await sb.close()
        assert not sb.alive and box_processes(sb.id) == []


async def test_a_close_retried_after_its_kill_failed_still_kills() -> None:
    async with open_sandbox(LocalBackend(), SPEC) as sb:
        real_kill, calls = sb.box.kill, []

        async def kill_failing_once() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise OSError("the backend hiccuped")
            await real_kill()

        async def refused(*args: object, **kwargs: object) -> None:
            raise AgentError("internal", "no shutdown")  # else the agent may exit by itself

        sb.box.kill = kill_failing_once  # type: ignore[method-assign]
        sb._request = refused  # type: ignore[method-assign]
        with pytest.raises(OSError):
            await sb.close()
        assert box_processes(sb.id)  # the failed close left it running...
        await sb.close()
        assert box_processes(sb.id) == []  # ...and the retry killed it
