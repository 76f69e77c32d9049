"""A program started by :meth:`Sandbox.spawn <gem_sandbox.sandbox.client.Sandbox.spawn>`:
:class:`Process`, its output as it comes, its stdin, signals, pty size and verdict, all
through the sandbox's one stream."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.errors import SandboxCrashed
from gem_sandbox.sandbox.limits import CONTROL_TIMEOUT
from gem_sandbox.sandbox.result import INFRA_REFUSALS, ExecResult

if TYPE_CHECKING:
    from gem_sandbox.sandbox.client import Sandbox, _Reply


class Process:
    """A program started by :meth:`Sandbox.spawn`. Its output arrives while it runs; its
    result, an :class:`ExecResult` whose ``stdout`` and ``stderr`` are empty (they were
    streamed) but whose byte counts are kept, comes from :meth:`wait`."""

    def __init__(self, sandbox: Sandbox, request_id: int, timeout: float | None, reply: _Reply) -> None:
        self.sandbox = sandbox
        self.id = request_id
        self.timeout = timeout
        self.pid: int | None = None  # the program's pid inside the sandbox, once it started
        self.started = anyio.Event()  # it started, or it ended without starting
        self.reply = reply  # its request's, whose response is its verdict
        self._chunks: deque[tuple[int, bytes]] = deque()  # output not yet read, unbounded:
        self._wake = anyio.Event()  # the reader must never wait for a slow consumer

    def _event(self, header: dict[str, Any], payload: bytes) -> None:
        """An event frame of this program, from the sandbox's reader."""
        if header["event"] == "started":
            self.pid = header.get("pid")
            self.started.set()
        elif header["event"] == "output":
            self._chunks.append((header.get("fd", 1), payload))
            self._wake.set()

    def _ended(self) -> None:
        """Its response came, or the sandbox died: nothing more will arrive."""
        self.started.set()
        self._wake.set()

    @property
    def running(self) -> bool:
        return self.pid is not None and not self.reply.done.is_set()

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """``(fd, bytes)`` chunks as the program writes them (fd 1 stdout, 2 stderr),
        until it ended and everything it wrote was read."""
        while (chunk := await self.next_output()) is not None:
            yield chunk

    async def next_output(self) -> tuple[int, bytes] | None:
        """The next ``(fd, bytes)`` chunk, or None once it ended and everything was read.
        Cancelling it loses nothing (a caller may wait for output with a timeout)."""
        while True:
            if self._chunks:
                return self._chunks.popleft()
            if self.reply.done.is_set():
                return None
            self._wake = anyio.Event()
            await self._wake.wait()

    async def write(self, data: str | bytes, *, eof: bool = False) -> None:
        """Send ``data`` to the program's stdin (``eof`` closes it after). Raises
        :class:`ProcessEnded` when it ended already."""
        payload = protocol.text_bytes(data) if isinstance(data, str) else data
        await self._control({"op": "process_input", "process": self.id, "eof": eof}, payload)

    async def close_stdin(self) -> None:
        await self.write(b"", eof=True)

    async def signal(self, signum: int) -> None:
        """Signal the program's process group (SIGINT, SIGTERM, SIGKILL or SIGHUP)."""
        await self._control({"op": "process_signal", "process": self.id, "signal": int(signum)})

    async def resize(self, rows: int, cols: int) -> None:
        """Resize the pty it runs on (``spawn(pty=...)``); the program gets SIGWINCH."""
        await self._control({"op": "process_resize", "process": self.id, "rows": rows, "cols": cols})

    async def wait(self) -> ExecResult:
        """Its result, once it ended; ``infra_error`` if the sandbox died first."""
        wait = math.inf if self.timeout is None else self.timeout + self.sandbox.grace
        started = time.perf_counter()
        try:
            response, _ = await self.sandbox._answer(self.id, self.reply, "spawn", wait=wait, accept=INFRA_REFUSALS)
        except SandboxCrashed as exc:
            return ExecResult.infra_error(str(exc), (time.perf_counter() - started) * 1000)
        finally:
            self.sandbox._processes.pop(self.id, None)
        return ExecResult.from_wire(response, b"", waited_ms=(time.perf_counter() - started) * 1000)

    async def _control(self, header: dict[str, Any], payload: bytes = b"") -> None:
        await self.sandbox._request(header, payload, wait=CONTROL_TIMEOUT)
