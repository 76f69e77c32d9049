"""Frames of the agent protocol (:mod:`gem_sandbox.agent.protocol`) on an anyio byte stream.

:class:`FrameStream` reads whole frames in order and writes whole frames one at a time. Reads
go through anyio's :class:`~anyio.streams.buffered.BufferedByteReceiveStream`: exactly the
4-byte length prefix, then exactly the body it announces (checked first, so a bad prefix is
refused before anything is buffered for it).
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.errors import ProtocolError

CHUNK = 64 * 1024  # bytes asked of the stream per read, whatever the frame's size

Frame = tuple[dict[str, Any], bytes]  # (header, payload)

_ENDED = (
    anyio.IncompleteRead,
    anyio.EndOfStream,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
)


class _Chunks(anyio.abc.ObjectReceiveStream[bytes]):
    """A byte stream seen as a stream of chunks of up to :data:`CHUNK` bytes.

    Wrapping a byte stream, ``BufferedByteReceiveStream`` asks it for exactly the bytes it
    lacks: one read of 4 bytes per prefix and another per body, however many frames one read
    could have brought. Wrapping a stream of chunks, it takes each chunk whole and buffers
    the rest, so the frames that arrived together are cut from the buffer without a read.
    """

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream

    async def receive(self) -> bytes:
        return await self._stream.receive(CHUNK)

    async def aclose(self) -> None:
        await self._stream.aclose()


class FrameStream:
    """Frames to and from the agent over ``stream``."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._incoming = BufferedByteReceiveStream(_Chunks(stream))
        self._send_lock = anyio.Lock()

    async def receive(self) -> Frame | None:
        """The next frame; ``None`` once the stream has ended or failed (also partway through
        a frame: the rest of it will never come). Raises :class:`ProtocolError` for bytes
        that do not form a frame; the stream is then unusable."""
        try:
            length = protocol.frame_length(await self._incoming.receive_exactly(4))
            return protocol.decode_body(await self._incoming.receive_exactly(length))
        except protocol.FrameError as exc:
            raise ProtocolError(f"bad frame from the agent: {exc}") from None
        except _ENDED:
            return None

    async def send(self, frame: bytes, *, timeout: float) -> bool:
        """Send one encoded frame whole, after any other sender's; ``False`` if it had not
        gone out within ``timeout`` seconds (then part of it may have, and the stream is
        unusable). Shielded from cancellation, since a frame cut short by one would corrupt
        the stream; the stream's own errors propagate."""
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + timeout) as sending:
            async with self._send_lock:
                await self._stream.send(frame)
        return not sending.cancelled_caught
