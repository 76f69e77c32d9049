"""Frames of the agent protocol (:mod:`gem_sandbox.agent.protocol`) on an anyio byte stream.

:class:`FrameStream` reads whole frames in order and writes whole frames one at a time. The
frames are cut by the protocol's own :class:`~gem_sandbox.agent.protocol.FrameDecoder`, the one
the agent reads the host's frames with, from reads of up to :data:`CHUNK` bytes: frames that
arrived together come out of one read, and a bad length prefix is refused before anything is
buffered for its body.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.errors import ProtocolError

CHUNK = 64 * 1024  # bytes asked of the stream per read, whatever the frame's size

Frame = tuple[dict[str, Any], bytes]  # (header, payload)

_ENDED = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)


class FrameStream:
    """Frames to and from the agent over ``stream``."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._frames = protocol.FrameDecoder()
        self._send_lock = anyio.Lock()

    async def receive(self) -> Frame | None:
        """The next frame; ``None`` once the stream has ended or failed (also partway through
        a frame: the rest of it will never come). Raises :class:`ProtocolError` for bytes
        that do not form a frame; the stream is then unusable."""
        try:
            frame = self._frames.next_frame()
            while frame is None:
                self._frames.feed(await self._stream.receive(CHUNK))
                frame = self._frames.next_frame()
            return frame
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
