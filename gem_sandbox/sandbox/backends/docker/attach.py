"""The agent's byte stream in a container: the hijacked socket of its attach, demultiplexed.

The agent is the container's process, attached (stdin, stdout and stderr) before it starts;
that API connection stays open for the container's life, so a run costs a frame on an open
socket instead of a ``docker exec``. Here: taking the socket from the Docker SDK (with the
bytes it already read), and splitting the daemon's multiplexed frames into the agent's
protocol (stdout) and its log (stderr).
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from anyio.abc import ByteStream, SocketStream

from gem_sandbox.sandbox.errors import SandboxUnavailable

_LOG_TAIL = 8 * 1024  # bytes of the agent's stderr kept for exit_reason()


class AttachStream(ByteStream):
    """The agent's stdout from Docker's multiplexed attach stream (8-byte frame headers:
    stream kind, 3 zero bytes, big-endian length). Stdin is not multiplexed, so sends are
    raw. The agent's stderr is its log: the last few KiB are kept for :meth:`log_tail`."""

    def __init__(self, sock: SocketStream, pending: bytes) -> None:
        self._sock = sock
        self._buffer = bytearray(pending)
        self._kind = 0
        self._left = 0  # bytes of the current frame not yet returned
        self._log = bytearray()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            while self._left == 0:
                while len(self._buffer) < 8:
                    self._buffer += await self._sock.receive()
                self._kind, self._left = struct.unpack(">BxxxI", self._buffer[:8])
                del self._buffer[:8]
            if not self._buffer:
                self._buffer += await self._sock.receive()
            chunk = bytes(self._buffer[: min(self._left, max_bytes, len(self._buffer))])
            del self._buffer[: len(chunk)]
            self._left -= len(chunk)
            if self._kind == 1:
                return chunk
            self._log = (self._log + chunk)[-_LOG_TAIL:]

    async def send(self, item: bytes) -> None:
        await self._sock.send(item)

    async def send_eof(self) -> None:
        await self._sock.send_eof()

    async def aclose(self) -> None:
        await self._sock.aclose()

    def log_tail(self) -> str:
        return self._log.decode("utf-8", errors="replace").strip()


def take_socket(attached: Any) -> tuple[socket.socket, bytes]:
    """Detach the hijacked connection that ``attach_socket`` returns from the SDK."""
    raw = getattr(attached, "_sock", None)
    if not isinstance(raw, socket.socket):
        raise SandboxUnavailable(
            f"cannot attach over this Docker connection ({type(attached).__name__}); "
            "use a unix:// or tcp:// DOCKER_HOST"
        )
    response = attached._response
    try:
        return detach(raw, response.raw._fp.fp)
    finally:
        response.close()
        attached.close()


def detach(raw: socket.socket, reader: io.BufferedReader) -> tuple[socket.socket, bytes]:
    """A dup of the connection's socket, ours alone, plus the bytes the HTTP reader buffered
    past the response headers: the agent's hello can arrive in the same read."""
    raw.setblocking(False)  # so peek() returns what is buffered instead of waiting for more
    return raw.dup(), reader.peek()
