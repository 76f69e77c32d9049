"""The Docker backend's own behaviour: attaching to the agent, killing, errors, cancellation."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

import http.client
import socket
import struct
import time

import anyio
import docker
from anyio.abc import SocketStream

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import POOL_LABEL, DockerBackend, DockerOptions
from gem_sandbox.sandbox.backends.docker.attach import AttachStream as _AttachStream
from gem_sandbox.sandbox.backends.docker.attach import detach as _detach
from gem_sandbox.sandbox.errors import SandboxUnavailable
from tests.docker_fixtures import TEST_POOL, backend, docker_client, sandbox_image, spec  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def pool_containers(client: docker.DockerClient, pool: str = TEST_POOL) -> list:
    return client.containers.list(all=True, sparse=True, filters={"label": f"{POOL_LABEL}={pool}"})


async def read_frame(stream) -> tuple[dict, bytes]:
    data = b""
    while len(data) < 4 or len(data) < 4 + protocol.frame_length(data[:4]):
        data += await stream.receive()
    return protocol.decode_body(data[4 : 4 + protocol.frame_length(data[:4])])


def mux(kind: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxI", kind, len(payload)) + payload


# --- the attach stream, on a socket pair standing in for the daemon ------------------------


def test_bytes_read_together_with_the_response_headers_are_not_lost() -> None:
    """The agent's hello can arrive in the same read as the HTTP upgrade response."""
    ours, daemon = socket.socketpair()
    daemon.sendall(b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nhello")
    response = http.client.HTTPResponse(ours)
    response.begin()
    detached, pending = _detach(ours, response.fp)
    assert pending == b"hello"
    daemon.sendall(b" world")
    with detached:
        detached.setblocking(True)
        assert detached.recv(100) == b" world"
    ours.close()
    daemon.close()


async def test_attach_stream_returns_stdout_and_keeps_stderr_as_the_log() -> None:
    ours, daemon = socket.socketpair()
    stream = _AttachStream(await SocketStream.from_socket(ours), pending=mux(1, b"ab")[:5])
    wire = mux(1, b"ab")[5:] + mux(2, b"agent says hi\n") + mux(1, b"cdef")
    for i in range(len(wire)):  # one byte at a time: frame boundaries anywhere
        daemon.sendall(wire[i : i + 1])
    received = b""
    with anyio.fail_after(5):
        while received != b"abcdef":
            received += await stream.receive()
    assert stream.log_tail() == "agent says hi"
    await stream.send(b"to the agent")
    assert daemon.recv(100) == b"to the agent"
    await stream.aclose()
    daemon.close()


# --- launching and killing against the daemon -------------------------------------------


async def test_launch_attaches_to_a_started_agent(
    backend: DockerBackend, spec: SandboxSpec
) -> None:
    box = await backend.launch(spec)
    try:
        with anyio.fail_after(10):
            header, _ = await read_frame(box.stream)
        assert header["op"] == "hello" and header["version"] == protocol.VERSION
    finally:
        await box.kill()


async def test_kill_removes_the_container_and_can_be_repeated(
    backend: DockerBackend, spec: SandboxSpec, docker_client: docker.DockerClient
) -> None:
    box = await backend.launch(spec)
    assert [c.id for c in pool_containers(docker_client)] == [box.id]
    await box.kill()
    await box.kill()
    assert pool_containers(docker_client) == []
    assert await box.exit_reason() == "removed"


async def test_exit_reason_is_none_while_the_agent_runs(
    backend: DockerBackend, spec: SandboxSpec
) -> None:
    box = await backend.launch(spec)
    try:
        with anyio.fail_after(10):
            await read_frame(box.stream)
        assert await box.exit_reason() is None
    finally:
        await box.kill()


async def test_a_missing_image_is_unavailable_at_once_and_leaves_nothing(
    sandbox_image: str, spec: SandboxSpec, docker_client: docker.DockerClient
) -> None:
    backend = DockerBackend(DockerOptions(image="gem-sandbox/sandbox:no-such-tag"))
    started = time.monotonic()
    with pytest.raises(SandboxUnavailable, match="no-such-tag"):
        await backend.launch(spec)
    assert time.monotonic() - started < 2, "a 404 is the caller's mistake, not retried"
    assert pool_containers(docker_client) == []
    await backend.aclose()


async def test_without_a_daemon_launch_says_so(
    monkeypatch: pytest.MonkeyPatch, spec: SandboxSpec
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    backend = DockerBackend(DockerOptions(image="gem-sandbox/sandbox:latest", retry_s=0.5))
    with pytest.raises(SandboxUnavailable, match="Docker daemon did not answer"):
        await backend.launch(spec)
    assert "no Docker daemon answers" in DockerBackend.check()
    await backend.aclose()


async def test_check_passes_with_a_daemon_and_an_image(sandbox_image: str) -> None:
    assert DockerBackend.check() is None


async def test_a_cancelled_launch_leaves_no_container(
    backend: DockerBackend, spec: SandboxSpec, docker_client: docker.DockerClient
) -> None:
    with anyio.move_on_after(0.05) as scope:
        await backend.launch(spec)
    assert scope.cancelled_caught
    assert pool_containers(docker_client) == []


async def test_concurrent_launches_each_get_their_own_agent(
    backend: DockerBackend, spec: SandboxSpec
) -> None:
    boxes = []

    async def launch() -> None:
        box = await backend.launch(spec)
        boxes.append(box)
        with anyio.fail_after(20):
            assert (await read_frame(box.stream))[0]["op"] == "hello"

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(launch)
        assert len({box.id for box in boxes}) == 6
    finally:
        for box in boxes:
            await box.kill()
