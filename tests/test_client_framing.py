"""Frames on the host's stream: whole frames in order however the bytes arrive, the end of the
stream as the end, and anything that is not a frame refused."""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator
from functools import partial

import anyio
import anyio.abc
import pytest
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.errors import ProtocolError
from gem_sandbox.sandbox.framing import CHUNK, FrameStream

pytestmark = pytest.mark.anyio

PING = ({"id": 1, "op": "ping"}, b"")
RESULT = ({"id": 2, "ok": True, "status": "ok", "stdout_len": 3}, b"out\xff\x00err")


class MemoryByteStream(anyio.abc.ByteStream):
    """A memory object stream of chunks seen as a byte stream: each receive returns the next
    chunk as it was sent (cut at ``max_bytes``), so a test decides how the bytes arrive."""

    def __init__(self, chunks: MemoryObjectReceiveStream[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        chunk = self._rest or await self._chunks.receive()
        self._rest = chunk[max_bytes:]
        return chunk[:max_bytes]

    async def send(self, item: bytes) -> None:
        raise NotImplementedError

    async def send_eof(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        await self._chunks.aclose()


def memory_frames() -> tuple[MemoryObjectSendStream[bytes], FrameStream]:
    """A frame stream whose incoming bytes are the chunks sent into the returned stream."""
    send, receive = anyio.create_memory_object_stream[bytes](100_000)
    return send, FrameStream(MemoryByteStream(receive))


@pytest.fixture
async def socket_pair() -> AsyncIterator[tuple[SocketStream, SocketStream]]:
    a, b = socket.socketpair()
    ours, theirs = await SocketStream.from_socket(a), await SocketStream.from_socket(b)
    async with ours, theirs:
        yield ours, theirs


async def test_a_frame_split_into_one_byte_chunks_reads_back_whole():
    chunks, frames = memory_frames()
    for byte in protocol.encode(*RESULT):
        chunks.send_nowait(bytes([byte]))
    chunks.close()
    assert await frames.receive() == RESULT
    assert await frames.receive() is None


async def test_several_frames_in_one_chunk_read_back_in_order():
    chunks, frames = memory_frames()
    chunks.send_nowait(protocol.encode(*PING) + protocol.encode(*RESULT) + protocol.encode(*PING))
    chunks.close()
    assert [await frames.receive() for _ in range(3)] == [PING, RESULT, PING]
    assert await frames.receive() is None


async def test_a_frame_larger_than_a_read_reads_back_whole():
    payload = bytes(range(256)) * (3 * CHUNK // 256 + 1)
    chunks, frames = memory_frames()
    chunks.send_nowait(protocol.encode({"id": 3}, payload))
    chunks.close()
    assert await frames.receive() == ({"id": 3}, payload)


async def test_a_stream_cut_inside_a_frame_ends_after_the_whole_frames():
    chunks, frames = memory_frames()
    chunks.send_nowait(protocol.encode(*PING) + protocol.encode(*RESULT)[:-2])
    chunks.close()
    assert await frames.receive() == PING
    assert await frames.receive() is None


async def test_a_stream_cut_inside_a_length_prefix_ends():
    chunks, frames = memory_frames()
    chunks.send_nowait(protocol.encode(*PING)[:3])
    chunks.close()
    assert await frames.receive() is None


async def test_a_length_prefix_over_the_maximum_is_refused_without_waiting_for_its_body():
    chunks, frames = memory_frames()
    chunks.send_nowait(struct.pack(">I", protocol.MAX_FRAME + 1))  # and the stream stays open
    with anyio.fail_after(5), pytest.raises(ProtocolError, match="bad frame length"):
        await frames.receive()


async def test_a_header_that_is_not_json_is_refused():
    chunks, frames = memory_frames()
    head = b"{not json"
    chunks.send_nowait(struct.pack(">II", 4 + len(head), len(head)) + head)
    with pytest.raises(ProtocolError, match="not JSON"):
        await frames.receive()


async def test_frames_read_back_over_a_socket(socket_pair):
    ours, theirs = socket_pair
    big = ({"id": 4}, b"\x07" * (5 * CHUNK + 3))
    await theirs.send(protocol.encode(*PING) + protocol.encode(*big) + protocol.encode(*RESULT))
    await theirs.send_eof()
    frames = FrameStream(ours)
    assert [await frames.receive() for _ in range(3)] == [PING, big, RESULT]
    assert await frames.receive() is None


async def test_frames_sent_at_once_by_many_tasks_arrive_whole(socket_pair):
    ours, theirs = socket_pair
    sender, receiver = FrameStream(ours), FrameStream(theirs)
    sent = [({"id": i}, bytes([i]) * (i * 10_000)) for i in range(1, 21)]
    received = []

    async def read_all() -> None:
        while len(received) < len(sent):
            frame = await receiver.receive()
            assert frame is not None
            received.append(frame)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_all)
        for frame in sent:
            tg.start_soon(partial(sender.send, protocol.encode(*frame), timeout=10.0))
    assert sorted(received, key=lambda f: f[0]["id"]) == sent


async def test_a_send_that_cannot_go_out_in_time_reports_it():
    a, b = socket.socketpair()  # nobody reads b, so the socket's buffers fill up
    with b:
        async with await SocketStream.from_socket(a) as ours:
            frames = FrameStream(ours)
            with anyio.fail_after(5):
                frame = protocol.encode({"id": 1}, b"x" * (32 << 20))
                assert not await frames.send(frame, timeout=0.2)
