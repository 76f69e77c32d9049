"""A sandbox's life: STARTING until its agent says hello, ALIVE while its stream works, DEAD
(with the reason) once it fails, CLOSED once its box is killed; its owner is told of the
death exactly once."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from anyio.abc import SocketStream

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.backends.base import Box
from gem_sandbox.sandbox.backends.local import ProcessBackend, ProcessBox
from gem_sandbox.sandbox.client import Sandbox, SandboxState
from gem_sandbox.sandbox.errors import ProtocolError, SandboxCrashed
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import SPEC

pytestmark = pytest.mark.anyio


@pytest.fixture
async def box() -> AsyncIterator[ProcessBox]:
    """A box with the real agent in it, as a plain child process."""
    box = await ProcessBackend().launch(SPEC)
    try:
        yield box
    finally:
        await box.kill()


class SocketBox(Box):
    """A box whose "agent" is the other end of a socket pair, held by the test."""

    def __init__(self, stream: SocketStream) -> None:
        self.id = "socket-box"
        self.stream = stream

    async def kill(self) -> None:
        await self.stream.aclose()


@pytest.fixture
async def socket_box() -> AsyncIterator[tuple[SocketBox, socket.socket]]:
    ours, agent = socket.socketpair()
    with agent:
        box = SocketBox(await SocketStream.from_socket(ours))
        try:
            yield box, agent
        finally:
            await box.kill()


def watched(box: Box) -> tuple[Sandbox, list[Sandbox]]:
    """A sandbox in ``box`` and the list its ``on_death`` hook appends it to."""
    deaths: list[Sandbox] = []
    return Sandbox(box, backend="process", on_death=deaths.append), deaths


@asynccontextmanager
async def served(box: Box) -> AsyncIterator[tuple[Sandbox, list[Sandbox]]]:
    """A watched sandbox whose reader runs (so it is alive at first); closed on exit."""
    sb, deaths = watched(box)
    async with anyio.create_task_group() as tg:
        await tg.start(sb.serve)
        yield sb, deaths
        await sb.close()


async def kill_the_agent(sb: Sandbox) -> None:
    sb.box.process.kill()
    with anyio.fail_after(10):
        while sb.state is not SandboxState.DEAD:
            await anyio.sleep(0.01)


async def test_a_sandbox_is_starting_until_its_agent_says_hello(box: ProcessBox):
    sb, _ = watched(box)
    assert sb.state is SandboxState.STARTING and not sb.alive and sb.death is None
    async with anyio.create_task_group() as tg:
        await tg.start(sb.serve)
        assert sb.state is SandboxState.ALIVE and sb.alive
        assert sb.hello["op"] == "hello"
        await sb.close()


async def test_a_starting_sandbox_runs_nothing(box: ProcessBox):
    sb, _ = watched(box)
    result = await sb.run("print(1)")
    assert result.status is Status.INFRA_ERROR and "not started" in result.stderr
    with pytest.raises(SandboxCrashed, match="not started"):
        await sb.ping()


async def test_a_sandbox_whose_stream_ends_is_dead_with_the_reason(box: ProcessBox):
    async with served(box) as (sb, deaths):
        await kill_the_agent(sb)
        assert not sb.alive and sb.death == "the agent's stream ended"
        assert deaths == [sb]


async def test_a_dead_sandbox_runs_give_infra_error_and_other_calls_raise(box: ProcessBox):
    async with served(box) as (sb, _):
        await kill_the_agent(sb)
        for result in (await sb.run("print(1)"), await sb.shell("echo 1")):
            assert result.status is Status.INFRA_ERROR and sb.death in result.stderr
        with pytest.raises(SandboxCrashed, match=sb.death):
            await sb.write_files({"f": "x"})


async def test_a_closed_sandbox_is_closed_its_box_killed_and_its_owner_told_once(
    box: ProcessBox,
):
    async with served(box) as (sb, deaths):
        await sb.close()
        await sb.close()
        assert sb.state is SandboxState.CLOSED and not sb.alive
        assert box.process.returncode is not None
    assert deaths == [sb]


async def test_a_sandbox_closed_after_it_died_keeps_why_it_died(box: ProcessBox):
    async with served(box) as (sb, deaths):
        await kill_the_agent(sb)
    assert sb.state is SandboxState.CLOSED and sb.death == "the agent's stream ended"
    assert deaths == [sb]


@pytest.mark.parametrize(
    "first_frame, error, death",
    [
        (None, SandboxCrashed, "the agent exited before saying hello"),
        (
            protocol.encode({"id": 0, "op": "hello", "version": protocol.VERSION + 1}),
            ProtocolError,
            "unexpected first frame",
        ),
    ],
    ids=["no-hello", "another-protocol"],
)
async def test_a_sandbox_whose_agent_never_says_a_valid_hello_is_dead(
    socket_box, first_frame: bytes | None, error: type[Exception], death: str
):
    box, agent = socket_box
    sb, deaths = watched(box)
    if first_frame is None:
        agent.close()
    else:
        agent.sendall(first_frame)
    with pytest.raises(error):
        await sb.serve()
    assert sb.state is SandboxState.DEAD and sb.death.startswith(death)
    assert deaths == [sb]


async def test_a_sandbox_closed_before_hello_is_closed_and_never_alive(socket_box):
    box, _ = socket_box
    sb, deaths = watched(box)
    await sb.close()
    assert sb.state is SandboxState.CLOSED and sb.death == "closed"
    with pytest.raises(SandboxCrashed):
        await sb.serve()
    assert sb.state is SandboxState.CLOSED and deaths == [sb]
