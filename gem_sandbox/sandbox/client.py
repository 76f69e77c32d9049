"""The host side of a sandbox: :class:`Sandbox` speaks the agent protocol over a :class:`Box`.

One reader task (:meth:`Sandbox.serve`, run in the owner's task group) routes responses to
waiting requests by id, so any number of requests can be in flight on the one stream. Every
wait is bounded: a run's by its own timeout plus a grace period. An agent that does not
answer in time, sends a bad frame or whose stream ends marks the sandbox dead; pending and
later runs then return ``infra_error`` (other calls raise :class:`SandboxCrashed`), so a
wedged agent never hangs a caller.
"""

from __future__ import annotations

import io
import itertools
import tarfile
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.errors import (
    AgentError,
    FileTransferError,
    ProtocolError,
    SandboxCrashed,
    SandboxError,
    UnsafePath,
    UnsupportedLanguage,
)
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult

CONTROL_TIMEOUT = 30.0  # seconds for requests that run no user code (files, stats, restarts)
CLOSE_TIMEOUT = 2.0  # seconds the agent gets to shut down politely before the box is killed
INTERRUPT_GRACE = 0.5  # the agent's own grace for a timed-out kernel or shell command

_ERRORS: dict[str, type[Exception]] = {
    "unsupported_language": UnsupportedLanguage,
    "unsafe_path": UnsafePath,
    "file_error": FileTransferError,
    "reset_failed": SandboxCrashed,
}


class _FrameReader:
    """Frames from the agent's stream, one at a time; None once the stream has ended."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.frames: deque[tuple[dict[str, Any], bytes]] = deque()

    async def next(self) -> tuple[dict[str, Any], bytes] | None:
        while not self.frames:
            try:
                self.buffer += await self.stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return None
            try:
                while len(self.buffer) >= 4:
                    end = 4 + protocol.frame_length(bytes(self.buffer[:4]))
                    if len(self.buffer) < end:
                        break
                    self.frames.append(protocol.decode_body(bytes(self.buffer[4:end])))
                    del self.buffer[:end]
            except protocol.FrameError as exc:
                raise ProtocolError(f"bad frame from the agent: {exc}") from None
        return self.frames.popleft()


class _Reply:
    """Where the reader task leaves one response (or the reason none will come)."""

    __slots__ = ("done", "header", "payload", "failure")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.header: dict[str, Any] = {}
        self.payload = b""
        self.failure: str | None = None


class Sandbox:
    """One running sandbox. Start :meth:`serve` in a task group first (``await
    tg.start(sb.serve)`` returns once the agent said hello), or use :func:`open_sandbox`.

    ``grace`` is how long past a request's own deadline the host waits for the agent before
    declaring it dead. ``on_death`` is called once, synchronously, when the sandbox stops
    being usable (its stream failed, the agent stopped answering, or it was closed), so an
    owner such as a pool can drop and replace it at once instead of at its next health check.
    """

    def __init__(
        self,
        box: Box,
        *,
        backend: str,
        default_timeout: float = 10.0,
        limits: RunLimits = RunLimits(),
        grace: float = 5.0,
        on_death: Callable[[Sandbox], None] | None = None,
    ) -> None:
        self.box = box
        self.on_death = on_death
        self.id = box.id
        self.backend = backend
        self.default_timeout = default_timeout
        self.limits = limits
        self.grace = grace
        self.hello: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._pending: dict[int, _Reply] = {}
        self._send_lock = anyio.Lock()
        self._dead: str | None = None
        self._reader_scope: anyio.CancelScope | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"dead: {self._dead}" if self._dead else "starting"
        return f"<Sandbox {self.id} {self.backend} {state}>"

    @property
    def alive(self) -> bool:
        """The agent said hello and the stream has not failed since."""
        return bool(self.hello) and self._dead is None

    # --- the reader task ----------------------------------------------------------------

    async def serve(
        self,
        *,
        hello_timeout: float = 30.0,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read frames until the stream ends; report started once the agent said hello.
        Raises :class:`SandboxCrashed` if no hello comes within ``hello_timeout``."""
        frames = _FrameReader(self.box.stream)
        try:
            with anyio.fail_after(hello_timeout):
                hello = await frames.next()
        except TimeoutError:
            hello, reason = None, f"no hello from the agent within {hello_timeout:.0f}s"
        except SandboxCrashed as exc:
            hello, reason = None, str(exc)
        else:
            reason = "the agent exited before saying hello"
        if hello is None:
            self._fail(reason)
            raise SandboxCrashed(f"sandbox {self.id}: {reason}")
        header, _ = hello
        if header.get("op") != "hello" or header.get("version") != protocol.VERSION:
            self._fail(f"unexpected first frame {header!r}")
            raise ProtocolError(f"sandbox {self.id}: the agent speaks another protocol: {header!r}")
        self.hello = header
        task_status.started()
        reason = "the reader task was cancelled"
        try:
            with anyio.CancelScope() as self._reader_scope:
                while (frame := await frames.next()) is not None:
                    reply = self._pending.pop(frame[0]["id"], None)
                    if reply is not None:
                        reply.header, reply.payload = frame
                        reply.done.set()
                reason = "the agent's stream ended"
        except SandboxCrashed as exc:
            reason = str(exc)
        finally:
            self._fail(reason)

    def _fail(self, reason: str) -> None:
        """Mark the sandbox dead, release every waiting request, and tell the owner (once)."""
        first = self._dead is None
        if first:
            self._dead = reason
            if self._reader_scope is not None:
                self._reader_scope.cancel()
        for reply in self._pending.values():
            reply.failure = reason
            reply.done.set()
        self._pending.clear()
        if first and self.on_death is not None:
            self.on_death(self)

    # --- requests -----------------------------------------------------------------------

    async def _request(
        self, header: dict[str, Any], payload: bytes = b"", *, wait: float
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait up to ``wait`` seconds for its response."""
        if self._dead is not None or not self.hello:
            raise SandboxCrashed(f"sandbox {self.id} is not usable: {self._dead or 'not started'}")
        request_id = next(self._ids)
        reply = self._pending[request_id] = _Reply()
        try:
            frame = protocol.encode(dict(header, id=request_id), payload)
        except protocol.FrameError as exc:
            del self._pending[request_id]
            raise FileTransferError(f"request too large: {exc}") from None
        try:
            with anyio.move_on_after(wait):
                try:
                    # Shielded: a frame cut short by a cancellation would corrupt the stream.
                    deadline = anyio.current_time() + wait
                    with anyio.CancelScope(shield=True, deadline=deadline) as sending:
                        async with self._send_lock:
                            await self.box.stream.send(frame)
                    if sending.cancelled_caught:
                        self._fail(f"sending {header['op']} to the agent took over {wait:.1f}s")
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
                    self._fail(f"sending to the agent failed: {exc!r}")
                await reply.done.wait()
            if not reply.done.is_set():
                self._fail(f"the agent did not answer {header['op']} within {wait:.1f}s")
        finally:
            self._pending.pop(request_id, None)
        if reply.failure is not None:
            raise SandboxCrashed(f"sandbox {self.id}: {reply.failure}")
        response = reply.header
        if not response.get("ok"):
            error = response.get("error") or {}
            kind, message = error.get("type", "internal"), error.get("message", "")
            error_type = _ERRORS.get(kind)
            raise error_type(message) if error_type else AgentError(kind, message)
        return response, reply.payload

    async def _result(self, header: dict[str, Any], payload: bytes, wait: float) -> ExecResult:
        """A request whose answer is an :class:`ExecResult`; a dead sandbox gives
        ``infra_error``."""
        started = time.perf_counter()
        try:
            response, out = await self._request(header, payload, wait=wait)
        except SandboxCrashed as exc:
            return ExecResult.infra_error(str(exc), (time.perf_counter() - started) * 1000)
        except AgentError as exc:
            if exc.kind != "busy":
                raise
            # The sandbox had no room to start the run (its process limit was still full).
            return ExecResult.infra_error(str(exc), (time.perf_counter() - started) * 1000)
        split = response.get("stdout_len", 0)
        return ExecResult.from_wire(response, out[:split], out[split:])

    async def ping(self, timeout: float = 5.0) -> float:
        """Round trip to the agent in milliseconds."""
        started = time.perf_counter()
        await self._request({"op": "ping"}, wait=timeout)
        return (time.perf_counter() - started) * 1000

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        limits: RunLimits | None = None,
    ) -> ExecResult:
        """Run ``code`` in a fresh process. The code's own failures come back as the
        result's status; only the caller's mistakes raise."""
        languages = self.hello.get("languages", [])
        if self.hello and language not in languages:
            raise UnsupportedLanguage(
                f"{language!r} cannot run in sandbox {self.id}; it has {', '.join(languages)}"
            )
        timeout = self.default_timeout if timeout is None else timeout
        data = protocol.text_bytes(stdin) if isinstance(stdin, str) else stdin or b""
        header = {
            "op": "run",
            "language": language,
            "code": code,
            "stdin": stdin is not None,
            "timeout": timeout,
            "env": dict(env or {}),
            "cwd": cwd,
            "limits": (limits or self.limits).to_wire(),
        }
        return await self._result(header, data, timeout + self.grace)

    async def shell(
        self, command: str, *, session: str = "default", timeout: float | None = None
    ) -> ExecResult:
        """Run ``command`` in a persistent bash session (cwd and exports persist)."""
        timeout = self.default_timeout if timeout is None else timeout
        header = {
            "op": "shell",
            "session": session,
            "command": command,
            "timeout": timeout,
            "limits": self.limits.to_wire(),
        }
        return await self._result(header, b"", timeout + INTERRUPT_GRACE + self.grace)

    async def kernel_exec(
        self, code: str, *, kernel: str = "default", timeout: float | None = None
    ) -> ExecResult:
        """Run ``code`` in a persistent Python namespace (output captured at the fd level)."""
        timeout = self.default_timeout if timeout is None else timeout
        header = {
            "op": "kernel_exec",
            "kernel": kernel,
            "code": code,
            "timeout": timeout,
            "limits": self.limits.to_wire(),
        }
        return await self._result(header, b"", timeout + INTERRUPT_GRACE + self.grace)

    async def kernel_restart(self, kernel: str = "default") -> None:
        """Drop the kernel's namespace; the next :meth:`kernel_exec` starts a fresh one."""
        await self._request({"op": "kernel_restart", "kernel": kernel}, wait=CONTROL_TIMEOUT)

    async def write_files(self, files: Mapping[str, bytes | str], *, dest: str = ".") -> None:
        """Write files under ``dest`` in the work dir (paths relative to it)."""
        if dest not in ("", "."):
            _check_path(dest)
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for path, content in files.items():
                _check_path(path)
                data = protocol.text_bytes(content) if isinstance(content, str) else bytes(content)
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = 0o664
                tar.addfile(info, io.BytesIO(data))
        await self._request(
            {"op": "write_files", "dest": dest}, archive.getvalue(), wait=CONTROL_TIMEOUT
        )

    async def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of files in the work dir, by path."""
        for path in paths:
            _check_path(path)
        response, payload = await self._request(
            {"op": "read_files", "paths": list(paths)}, wait=CONTROL_TIMEOUT
        )
        if response.get("missing"):
            raise FileTransferError(
                f"not found in sandbox {self.id}: {', '.join(response['missing'])}"
            )
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:") as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}

    async def reset(self, timeout: float = 10.0) -> None:
        """Back to a clean sandbox for the next tenant: no user process, kernel, shell or
        file left. Raises :class:`SandboxCrashed` if the agent cannot verify that."""
        await self._request({"op": "reset"}, wait=timeout)

    async def stats(self) -> dict[str, Any]:
        response, _ = await self._request({"op": "stats"}, wait=CONTROL_TIMEOUT)
        return {k: v for k, v in response.items() if k not in ("id", "ok")}

    async def close(self) -> None:
        """Ask the agent to shut down, then kill the box, whatever the polite part did: an
        error from the agent is swallowed, any other exception (or a cancellation) propagates
        only after the kill. Idempotent once the box was killed; a close whose kill failed is
        retried in full by the next call, so a failed close never leaves a box running."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            try:
                if self.alive:
                    try:
                        await self._request({"op": "shutdown"}, wait=CLOSE_TIMEOUT)
                    except SandboxError:
                        pass  # crashed or refused: the kill below ends it either way
            finally:
                self._fail("closed")
                await self.box.kill()
                self._closed = True


def _check_path(path: str) -> None:
    """Refuse what the agent would refuse, before anything is sent."""
    if not path or "\0" in path:
        raise UnsafePath(f"bad path {path!r}")
    if path.startswith("/"):
        raise UnsafePath(f"{path!r} is absolute; give paths relative to the work dir")
    if ".." in path.split("/"):
        raise UnsafePath(f"{path!r} climbs out of the work dir with '..'")


@asynccontextmanager
async def open_sandbox(
    backend: Backend, spec: SandboxSpec = SandboxSpec(), **sandbox_kwargs: Any
) -> AsyncIterator[Sandbox]:
    """A sandbox for use without a pool: launched, served, and closed on exit."""
    box = await backend.launch(spec)
    sandbox = Sandbox(box, backend=backend.name, **sandbox_kwargs)
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(sandbox.serve)
                yield sandbox
            except Exception as exc:  # re-raised below as itself, not in an ExceptionGroup
                failure = exc
            finally:
                await sandbox.close()
    finally:
        await box.kill()
    if failure is not None:
        raise failure
