"""The host side of a sandbox: :class:`Sandbox` speaks the agent protocol over a :class:`Box`.

This module holds the requests and the sandbox's life (:class:`SandboxState`); frames on the
stream are :mod:`.framing`'s, the tar streams of file transfers :mod:`.transfer`'s. One
reader task (:meth:`Sandbox.serve`, run in the owner's task group) routes responses to
waiting requests by id, so any number of requests can be in flight on the one stream. Every
wait is bounded: a run's by its own timeout plus a grace period. An agent that does not
answer in time, sends a bad frame or whose stream ends marks the sandbox dead; pending and
later runs then return ``infra_error`` (other calls raise :class:`SandboxCrashed`), so a
wedged agent never hangs a caller.
"""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox import transfer
from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.errors import (
    AgentError,
    FileTransferError,
    ProcessEnded,
    ProtocolError,
    SandboxCrashed,
    SandboxError,
    SnapshotUnsupported,
    UnsafePath,
    UnsupportedLanguage,
)
from gem_sandbox.sandbox.framing import FrameStream
from gem_sandbox.sandbox.limits import (
    CONTROL_TIMEOUT,
    DEFAULT_GRACE,
    DEFAULT_RUN_TIMEOUT,
    SNAPSHOT_TIMEOUT,
    RunLimits,
)
from gem_sandbox.sandbox.result import INFRA_REFUSALS, ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot
from gem_sandbox.sandbox.spawned import Process

CLOSE_TIMEOUT = 2.0  # seconds the agent gets to shut down politely before the box is killed
_SESSION_OPS = ("shell", "kernel_exec")  # a timed-out command gets protocol.INTERRUPT_GRACE to stop

_ERRORS: dict[str, type[Exception]] = {
    "unsupported_language": UnsupportedLanguage,
    "unsafe_path": UnsafePath,
    "file_error": FileTransferError,
    "reset_failed": SandboxCrashed,
    "no_process": ProcessEnded,
    "snapshot_unsupported": SnapshotUnsupported,
    "snapshot_too_large": SnapshotUnsupported,
}


class SandboxState(enum.Enum):
    """Where a sandbox is in its life. It only moves forward, along ``STARTING -> ALIVE ->
    DEAD -> CLOSED`` (or from ``STARTING`` straight to ``DEAD``). It dies when its stream
    fails, its agent stops answering or never says hello, or it is closed; :attr:`Sandbox.death`
    says which."""

    STARTING = "starting"  # launched; the agent has not said hello yet
    ALIVE = "alive"  # the agent said hello and the stream has not failed since
    DEAD = "dead"  # unusable: runs give infra_error, other requests raise SandboxCrashed
    CLOSED = "closed"  # dead and its box killed


_NEXT: dict[SandboxState, tuple[SandboxState, ...]] = {
    SandboxState.STARTING: (SandboxState.ALIVE, SandboxState.DEAD),
    SandboxState.ALIVE: (SandboxState.DEAD,),
    SandboxState.DEAD: (SandboxState.CLOSED,),
    SandboxState.CLOSED: (),
}


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
        default_timeout: float = DEFAULT_RUN_TIMEOUT,
        limits: RunLimits = RunLimits(),
        grace: float = DEFAULT_GRACE,
        on_death: Callable[[Sandbox], None] | None = None,
    ) -> None:
        self.box = box
        self.on_death = on_death
        self.id = box.id
        self.backend = backend
        self.default_timeout = default_timeout
        self.limits = limits
        self.grace = grace
        self.state = SandboxState.STARTING
        self.death: str | None = None  # why it died, once it did
        self.hello: dict[str, Any] = {}  # the agent's hello frame, once it came
        self._frames = FrameStream(box.stream)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Reply] = {}
        self._processes: dict[int, Process] = {}  # spawn request id -> its program, while it runs
        self._echoes: dict[int, Callable[[int, bytes], None]] = {}  # request id -> its output's taker
        self._reader: anyio.CancelScope | None = None  # the reader loop's, cancelled at death
        self.lender: Any = None  # the pool that leased it out, which keeps its snapshots

    def __repr__(self) -> str:
        death = f": {self.death}" if self.death else ""
        return f"<Sandbox {self.id} {self.backend} {self.state.value}{death}>"

    @property
    def alive(self) -> bool:
        """The agent said hello and the stream has not failed since."""
        return self.state is SandboxState.ALIVE

    def _become(self, state: SandboxState, death: str | None = None) -> bool:
        """Move on to ``state``: the one place the state changes. A move :data:`_NEXT` does
        not allow (a second death, a hello after a close) changes nothing and gives False.
        Dying stops the reader, releases every waiting request and tells the owner."""
        if state not in _NEXT[self.state]:
            return False
        self.state = state
        if state is SandboxState.DEAD:
            self.death = death
            if self._reader is not None:
                self._reader.cancel()
            for reply in self._pending.values():
                reply.failure = death
                reply.done.set()
            self._pending.clear()
            for process in self._processes.values():
                process._ended()
            if self.on_death is not None:
                self.on_death(self)
        return True

    def _die(self, reason: str) -> None:
        self._become(SandboxState.DEAD, reason)

    # --- the reader task ----------------------------------------------------------------

    async def serve(
        self,
        *,
        hello_timeout: float = 30.0,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read frames until the stream ends; report started once the agent said hello.
        Raises :class:`SandboxCrashed` if no hello comes within ``hello_timeout``."""
        try:
            with anyio.fail_after(hello_timeout):
                hello = await self._frames.receive()
        except TimeoutError:
            hello, reason = None, f"no hello from the agent within {hello_timeout:.0f}s"
        except SandboxCrashed as exc:
            hello, reason = None, str(exc)
        else:
            reason = "the agent exited before saying hello"
        if hello is None:
            self._die(reason)
            raise SandboxCrashed(f"sandbox {self.id}: {reason}")
        header, _ = hello
        if header.get("op") != "hello" or header.get("version") != protocol.VERSION:
            self._die(f"unexpected first frame {header!r}")
            raise ProtocolError(f"sandbox {self.id}: the agent speaks another protocol: {header!r}")
        self.hello = header
        if not self._become(SandboxState.ALIVE):
            raise SandboxCrashed(f"sandbox {self.id} said hello after it died: {self.death}")
        task_status.started()
        reason = "the reader task was cancelled"
        try:
            with anyio.CancelScope() as self._reader:
                while (frame := await self._frames.receive()) is not None:
                    if "event" in frame[0]:  # a spawned program's, before its response
                        process = self._processes.get(frame[0]["id"])
                        if process is not None:
                            process._event(*frame)
                        elif (echo := self._echoes.get(frame[0]["id"])) is not None:
                            echo(frame[0].get("fd", 1), frame[1])  # a streamed kernel command's
                        continue
                    reply = self._pending.pop(frame[0]["id"], None)
                    if reply is not None:
                        reply.header, reply.payload = frame
                        reply.done.set()
                    if (process := self._processes.get(frame[0]["id"])) is not None:
                        process._ended()
                reason = "the agent's stream ended"
        except SandboxCrashed as exc:
            reason = str(exc)
        finally:
            self._die(reason)

    # --- requests -----------------------------------------------------------------------

    async def _request(
        self,
        header: dict[str, Any],
        payload: bytes = b"",
        *,
        wait: float,
        accept: Collection[str] = (),
        echo: Callable[[int, bytes], None] | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait up to ``wait`` seconds for its response. A refusal
        raises its typed error, unless its type is in ``accept`` (then it is returned).
        ``echo`` takes the ``(fd, bytes)`` output events that come before the response."""
        request_id, frame = self._frame(header, payload)
        if echo is None:
            return await self._exchange_frame(request_id, frame, header["op"], wait=wait, accept=accept)
        self._echoes[request_id] = echo
        try:
            return await self._exchange_frame(request_id, frame, header["op"], wait=wait, accept=accept)
        finally:
            del self._echoes[request_id]

    def _frame(self, header: dict[str, Any], payload: bytes) -> tuple[int, bytes]:
        if self.state is not SandboxState.ALIVE:
            raise SandboxCrashed(f"sandbox {self.id} is not usable: {self.death or 'not started'}")
        request_id = next(self._ids)
        try:
            return request_id, protocol.encode(dict(header, id=request_id), payload)
        except protocol.FrameError as exc:
            raise FileTransferError(f"request too large: {exc}") from None

    async def _exchange_frame(
        self, request_id: int, frame: bytes, op: str, *, wait: float, accept: Collection[str] = ()
    ) -> tuple[dict[str, Any], bytes]:
        """Send a request's ``frame`` and wait up to ``wait`` seconds for its response."""
        reply = await self._send(request_id, frame, op, wait)
        return await self._answer(request_id, reply, op, wait=wait, accept=accept)

    async def _send(self, request_id: int, frame: bytes, op: str, wait: float) -> _Reply:
        """Send a request's ``frame`` (within ``wait`` seconds); the reply it will get."""
        reply = self._pending[request_id] = _Reply()
        try:
            if not await self._frames.send(frame, timeout=wait):
                self._die(f"sending {op} to the agent took over {wait:.1f}s")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self._die(f"sending to the agent failed: {exc!r}")
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return reply

    async def _answer(
        self, request_id: int, reply: _Reply, op: str, *, wait: float, accept: Collection[str] = ()
    ) -> tuple[dict[str, Any], bytes]:
        """The response to a sent request, within ``wait`` seconds (past them the agent is
        declared dead). A refusal raises its typed error, unless its type is in ``accept``."""
        try:
            with anyio.move_on_after(wait):
                await reply.done.wait()
            if not reply.done.is_set():
                self._die(f"the agent did not answer {op} within {wait:.1f}s")
        finally:
            self._pending.pop(request_id, None)
        if reply.failure is not None:
            raise SandboxCrashed(f"sandbox {self.id}: {reply.failure}")
        response = reply.header
        if not response.get("ok"):
            error = response.get("error") or {}
            kind, message = error.get("type", "internal"), error.get("message", "")
            if kind not in accept:
                error_type = _ERRORS.get(kind)
                raise error_type(message) if error_type else AgentError(kind, message)
        return response, reply.payload

    async def _result(self, header: dict[str, Any], payload: bytes = b"") -> ExecResult:
        """A run (``header`` with its ``timeout``, None for the default) whose answer is an
        :class:`ExecResult`. The host waits its timeout, the agent's ``protocol.INTERRUPT_GRACE`` for
        a session command (it gets that long to stop before it is killed), then ``grace``;
        a dead sandbox gives ``infra_error``."""
        return (await self._exchange(header, payload))[0]

    async def _exchange(
        self, header: dict[str, Any], payload: bytes, echo: Callable[[int, bytes], None] | None = None
    ) -> tuple[ExecResult, dict[str, Any]]:
        """:meth:`_result`, with the response header (empty when the sandbox died)."""
        timeout = self.default_timeout if header["timeout"] is None else header["timeout"]
        interrupt = protocol.INTERRUPT_GRACE if header["op"] in _SESSION_OPS else 0.0
        compiling = 0.0  # a compiled language's compile phase has a deadline of its own
        if header.get("language", "python") != "python":
            compiling = header.get("compile_timeout") or protocol.COMPILE_TIMEOUT
        wait = compiling + timeout + interrupt + self.grace
        started = time.perf_counter()
        try:
            response, out = await self._request(
                dict(header, timeout=timeout), payload, wait=wait, accept=INFRA_REFUSALS, echo=echo
            )
        except SandboxCrashed as exc:
            return ExecResult.infra_error(str(exc), _ms_since(started)), {}
        return ExecResult.from_wire(response, out, waited_ms=_ms_since(started)), response

    async def ping(self, timeout: float = 5.0) -> float:
        """Round trip to the agent in milliseconds."""
        started = time.perf_counter()
        await self._request({"op": "ping"}, wait=timeout)
        return _ms_since(started)

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
        compile_timeout: float | None = None,
    ) -> ExecResult:
        """Run ``code`` in a fresh process. The code's own failures come back as the
        result's status; only the caller's mistakes raise. A compiled language compiles
        first, within ``compile_timeout`` (``protocol.COMPILE_TIMEOUT``), its result ``compile``."""
        header, data = self._run_request(code, language, stdin, timeout, env, cwd, limits)
        return await self._result(dict(header, compile_timeout=compile_timeout), data)

    async def run_stateless(
        self,
        code: str,
        language: str = "python",
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        limits: RunLimits | None = None,
        shared: bool = False,
        compile_timeout: float | None = None,
    ) -> tuple[ExecResult, bool]:
        """:meth:`run`, and whether the agent then found the sandbox clean: no process, file,
        IPC object, kernel or shell left, as a verified :meth:`reset` leaves it. A pool hands
        a clean sandbox to the next tenant without resetting it. A ``shared`` run (only where
        ``hello["isolation"] == "uid"``) may run beside others: its cwd, HOME and TMPDIR are a
        dir of its own, its group is its own and its files are private (umask 077)."""
        header, data = self._run_request(code, language, stdin, timeout, env, None, limits)
        header = dict(header, stateless=True, shared=shared, compile_timeout=compile_timeout)
        result, response = await self._exchange(header, data)
        return result, response.get("clean") is True

    def _run_request(
        self,
        code: str,
        language: str,
        stdin: str | bytes | None,
        timeout: float | None,
        env: Mapping[str, str] | None,
        cwd: str | None,
        limits: RunLimits | None,
    ) -> tuple[dict[str, Any], bytes]:
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
        return header, data

    async def spawn(
        self,
        code: str,
        language: str = "bash",
        *,
        stdin: str | bytes | None = None,
        stdin_open: bool = False,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        limits: RunLimits | None = None,
        pty: tuple[int, int] | None = None,
    ) -> Process:
        """Start ``code`` as :meth:`run` would and return once it started: its output comes
        as it is written (:meth:`Process.output`), ``stdin_open`` keeps its stdin open for
        :meth:`Process.write`, and ``timeout`` None lets it run until it ends, is signalled
        or the sandbox is reset. ``pty`` (rows, cols) runs it on a pseudo-terminal, all its
        output on fd 1 (:meth:`Process.resize` changes the size). Its verdict
        (:meth:`Process.wait`) comes as a run's does. A program that could not start at all
        is already ended when this returns."""
        header, data = self._run_request(code, language, stdin, None, env, None, limits)
        header = dict(header, op="spawn", timeout=timeout, stdin_open=stdin_open)
        if pty is not None:
            header["pty"] = list(pty)
        request_id, frame = self._frame(header, data)
        process = self._processes[request_id] = Process(self, request_id, timeout, _Reply())
        try:
            process.reply = await self._send(request_id, frame, "spawn", CONTROL_TIMEOUT)
            with anyio.fail_after(CONTROL_TIMEOUT + self.grace):
                await process.started.wait()
        except TimeoutError:
            self._die(f"the agent did not start a spawned program within {CONTROL_TIMEOUT:.0f}s")
        except BaseException:
            self._processes.pop(request_id, None)
            raise
        if not process.pid and process.reply.done.is_set() and process.reply.failure is None:
            response = process.reply.header  # refused before it started: the caller's mistake
            error = response.get("error") or {}
            if not response.get("ok") and error.get("type") not in INFRA_REFUSALS:
                self._processes.pop(request_id, None)
                await self._answer(request_id, process.reply, "spawn", wait=0)
        return process

    async def shell(
        self, command: str, *, session: str = "default", timeout: float | None = None
    ) -> ExecResult:
        """Run ``command`` in a persistent bash session (cwd and exports persist)."""
        header = {
            "op": "shell",
            "session": session,
            "command": command,
            "timeout": timeout,
            "limits": self.limits.to_wire(),
        }
        return await self._result(header)

    async def kernel_exec(
        self,
        code: str,
        *,
        kernel: str = "default",
        timeout: float | None = None,
        display: bool = False,
        on_output: Callable[[int, bytes], None] | None = None,
    ) -> ExecResult:
        """Run ``code`` in a persistent Python namespace (output captured at the fd level).
        What it shows (``display()``, plots) is the result's ``display``; with ``display``,
        so is the value of a last expression (a notebook's ``Out``), which is otherwise
        printed. ``on_output(fd, bytes)`` gets its output as it is written (the result has
        it all too)."""
        header = {
            "op": "kernel_exec",
            "kernel": kernel,
            "code": code,
            "display": display,
            "stream": on_output is not None,
            "timeout": timeout,
            "limits": self.limits.to_wire(),
        }
        return (await self._exchange(header, b"", on_output))[0]

    async def kernel_restart(self, kernel: str = "default") -> None:
        """Drop the kernel's namespace; the next :meth:`kernel_exec` starts a fresh one."""
        await self._request({"op": "kernel_restart", "kernel": kernel}, wait=CONTROL_TIMEOUT)

    async def write_files(
        self,
        files: Mapping[str, bytes | str],
        *,
        dest: str = ".",
        executable: Collection[str] = (),
        directories: Collection[str] = (),
        xattrs: Mapping[str, str] | None = None,
    ) -> None:
        """Write files under ``dest`` in the work dir (paths relative to it); those named in
        ``executable`` can be run; ``directories`` are made too, even if no file goes in them.
        ``xattrs`` (``user.*`` names) become each file's extended attributes, replacing the
        ``user.*`` ones it had."""
        if dest not in ("", "."):
            transfer.check_path(dest)
        archive = await transfer.pack(files, executable, directories)
        header: dict[str, Any] = {"op": "write_files", "dest": dest}
        if xattrs is not None:
            header["xattrs"] = dict(xattrs)
        await self._request(header, archive, wait=CONTROL_TIMEOUT)

    async def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        """The contents of files in the work dir, by path."""
        for path in paths:
            transfer.check_path(path)
        response, archive = await self._request(
            {"op": "read_files", "paths": list(paths)}, wait=CONTROL_TIMEOUT
        )
        if response.get("missing"):
            raise FileTransferError(
                f"not found in sandbox {self.id}: {', '.join(response['missing'])}"
            )
        return await transfer.unpack(archive, paths)

    async def capture(self) -> tuple[dict[str, Any], bytes]:
        """The agent's snapshot stream of the work and tmp dirs, kernels and shells, with its
        manifest. State it cannot carry raises :class:`SnapshotUnsupported`."""
        response, data = await self._request({"op": "snapshot"}, wait=SNAPSHOT_TIMEOUT)
        return response["manifest"], data

    async def load(self, data: bytes) -> None:
        """Make this sandbox, which has no kernel, shell or process, hold the state
        :meth:`capture` took, in place of its files."""
        await self._request({"op": "restore"}, data, wait=SNAPSHOT_TIMEOUT)

    async def snapshot(self, ttl: float | None = None) -> Snapshot:
        """Its state now, kept by its pool for ``ttl`` seconds (see ``Pool.restore``)."""
        return await self._lent().snapshot_of(self, ttl)

    async def fork(self, n: int) -> list[Sandbox]:
        """``n`` new leases of its pool, each starting from this sandbox's state now."""
        return await self._lent().fork(self, n)

    def _lent(self) -> Any:
        if self.lender is None:
            raise SandboxError("snapshots and forks are kept by a pool: lease the sandbox from one")
        return self.lender

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
        if self.state is SandboxState.CLOSED:
            return
        with anyio.CancelScope(shield=True):
            try:
                if self.alive:
                    try:
                        await self._request({"op": "shutdown"}, wait=CLOSE_TIMEOUT)
                    except SandboxError:
                        pass  # crashed or refused: the kill below ends it either way
            finally:
                self._die("closed")
                await self.box.kill()
                self._become(SandboxState.CLOSED)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


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
