"""The agent's ``--base64`` stream, for transports that carry only text (an e2b command's
stdin and stdout): the same protocol, each chunk one line of base64."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.abc
import pytest

from gem_sandbox import agent
from gem_sandbox.agent.protocol import Base64Lines, FrameError
from gem_sandbox.sandbox.backends.base import Box
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.result import Status

pytestmark = pytest.mark.anyio


class _TextStream(anyio.abc.ByteStream):
    """What a text-only transport gives the host: base64 lines over a process's pipes."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process, self.lines = process, Base64Lines()

    async def send(self, item: bytes) -> None:
        await self.process.stdin.send(Base64Lines.encode(item))  # type: ignore[union-attr]

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            data = self.lines.decode(await self.process.stdout.receive())  # type: ignore[union-attr]
            if data:
                return data

    async def send_eof(self) -> None:
        await self.process.stdin.aclose()  # type: ignore[union-attr]

    async def aclose(self) -> None:
        self.process.kill()


class _Box(Box):
    def __init__(self, process: anyio.abc.Process) -> None:
        self.id, self.process, self.stream = "base64", process, _TextStream(process)

    async def kill(self) -> None:
        self.process.kill()
        await self.process.wait()


@pytest.fixture
async def text_sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    os.symlink(agent.AGENT_DIR, tmp_path / "gem_agent")
    for name in ("work", "tmp"):
        (tmp_path / name).mkdir()
    argv = agent.command(sys.executable, base64=True, workdir=str(tmp_path / "work"), tmpdir=str(tmp_path / "tmp"))
    process = await anyio.open_process(argv, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, stderr=None)
    sandbox = Sandbox(_Box(process), backend="base64")
    async with anyio.create_task_group() as tg:
        await tg.start(sandbox.serve)
        yield sandbox
        await sandbox.close()


def test_lines_round_trip_whatever_the_chunking() -> None:
    frames = [bytes(range(256)) * 3, b"", b"\n\n"]
    text = b"".join(Base64Lines.encode(frame) for frame in frames)
    lines = Base64Lines()
    got = b"".join(lines.decode(text[i : i + 7]) for i in range(0, len(text), 7))
    assert got == b"".join(frames)


def test_a_line_that_is_not_base64_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        Base64Lines().decode(b"not base64 at all!\n")


async def test_the_agent_serves_runs_files_and_spawns_over_base64(text_sandbox: Sandbox) -> None:
    result = await text_sandbox.run("import sys; sys.stdout.buffer.write(bytes(range(256)))")
    assert result.status is Status.OK and result.stdout_bytes == 256
    await text_sandbox.write_files({"blob.bin": bytes(range(256))})
    assert (await text_sandbox.read_files(["blob.bin"]))["blob.bin"] == bytes(range(256))
    process = await text_sandbox.spawn("cat", stdin_open=True)
    await process.write(b"\x00\xff\n", eof=True)
    assert [data async for _, data in process.output()] == [b"\x00\xff\n"]
    assert (await process.wait()).ok
