"""A tool's connection to its MCP server: one open session at a time, each held open by a task
of its own, replaced by a fresh one when it dies.

The session's lifetime belongs to the tool: it opens on first use, on the event loop of that
use, and stays open for later calls until :meth:`MCPConnection.aclose`. The SDK's transports
are context managers over anyio task groups, which must be entered and exited by one task,
while a tool's calls and its close come from whatever tasks the caller runs; so each session
is held open by a task of its own (:class:`Session`), which every call talks to and ``aclose``
tells to finish. Calls from another loop (another thread) are handed to the session's loop.
Sync callers go through the sync faces, whose coroutines all run on gem-sandbox's one
background loop, so their session lives there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TextIO, TypeVar

import anyio

from gem_sandbox.tools.mcp_calls import CallFailed, MCPConnectionError, MCPErrorKind, MCPToolSpec
from gem_sandbox.tools.mcp_sdk import CONNECTION_CLOSED, describe, is_connection_error, sdk
from gem_sandbox.tools.mcp_transport import MCPServer

T = TypeVar("T")

#: Seconds a closing session may take to stop its server (the SDK bounds a stdio shutdown at
#: about six: stdin closed, then SIGTERM, then SIGKILL).
CLOSE_TIMEOUT = 10.0
#: Seconds the ping after a timed-out call may take (see :meth:`MCPConnection.call`).
PROBE_TIMEOUT = 2.0


def running_loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("MCPTool runs on asyncio event loops (anyio's default backend)") from None


class Session:
    """An MCP session held open by a dedicated task on the loop that opened it, until
    :meth:`close` or until its transport fails."""

    def __init__(self, server: MCPServer, connect_timeout: float, errlog: TextIO | None) -> None:
        self.loop = running_loop()
        self.opened = anyio.Event()  # set once open, or once it failed to open
        self.stop = anyio.Event()
        self.done = anyio.Event()
        self.client: Any = None  # the ClientSession while open
        self.tools: list[MCPToolSpec] = []
        self.error: BaseException | None = None
        self.was_open = False
        self.task = self.loop.create_task(self._hold(server, connect_timeout, errlog), name="mcp-session")

    async def _hold(self, server: MCPServer, connect_timeout: float, errlog: TextIO | None) -> None:
        try:
            async with server.connect(connect_timeout, errlog) as (client, tools):
                self.client, self.tools, self.was_open = client, tools, True
                self.opened.set()
                await self.stop.wait()
        except Exception as exc:  # a failed connect or a dead transport: callers read it here
            self.error = exc
        finally:
            self.client = None
            self.opened.set()
            self.done.set()

    @property
    def ended(self) -> bool:
        return self.done.is_set() or self.stop.is_set()

    def usable_from(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether calls from ``loop`` can reach it: on its own loop, or on one still running
        in another thread (calls are then handed to it)."""
        return not self.loop.is_closed() and (self.loop is loop or self.loop.is_running())

    async def close(self) -> None:
        self.stop.set()
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await self.done.wait()

    def stop_soon(self) -> None:
        """Tell the holding task to close the session, from any thread, without waiting."""
        if self.loop.is_closed():
            return
        if self.loop is running_loop():
            self.stop.set()
        else:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self.loop.call_soon_threadsafe(self.stop.set)


async def _guarded(session: Session, fn: Callable[[], Awaitable[T]], limit: float) -> tuple[str, Any]:
    """``await fn()`` bounded by ``limit`` seconds and by the session's end: ("ok", its value),
    ("error", what it raised), ("timeout", None) or ("ended", None). Nothing is raised inside
    the task group, which would wrap it in an exception group."""
    outcome: tuple[str, Any] = ("ended", None)
    with anyio.move_on_after(limit) as deadline:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await session.done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                outcome = ("ok", await fn())
            except Exception as exc:
                outcome = ("error", exc)
            tg.cancel_scope.cancel()
    if deadline.cancelled_caught and outcome[0] == "ended":  # the deadline, not the session's end
        outcome = ("timeout", None)
    return outcome


async def _on_loop_of(session: Session, limit: float, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """``await fn(*args)`` on the session's loop, here or handed to it in its thread, given up
    after ``limit`` seconds: what runs there bounds itself, so only a loop that stopped (the
    thread of the sync faces' loop exiting, say) gets that far."""
    with anyio.move_on_after(limit):
        if session.loop is running_loop():
            return await fn(*args)
        try:
            future = asyncio.run_coroutine_threadsafe(fn(*args), session.loop)
        except RuntimeError:  # that loop closed meanwhile
            raise CallFailed(MCPErrorKind.CONNECTION, "the event loop that held the MCP session is closed") from None
        try:
            return await asyncio.wrap_future(future)
        finally:
            future.cancel()  # nothing once it is done
    raise CallFailed(MCPErrorKind.CONNECTION, f"the MCP session's event loop did not answer within {limit:g}s")


class MCPConnection:
    """The session of one server: opened on first need, replaced when it died (unless not
    ``reconnect``: every later call then fails), closed by :meth:`aclose`."""

    def __init__(self, server: MCPServer, connect_timeout: float, reconnect: bool, errlog: TextIO | None) -> None:
        self.server = server
        self.connect_timeout = connect_timeout
        self.reconnect = reconnect
        self.errlog = errlog
        self.session: Session | None = None
        self._retired: list[Session] = []  # sessions left behind, still shutting down
        self._lost = False  # a session died (what reconnect=False stops at)
        self._lock = threading.Lock()  # guards the session slot against loops in other threads

    async def open(self) -> Session:
        """The open session, opened on this loop when there is none or the last one ended."""
        loop = running_loop()
        with self._lock:
            session = self.session
            if session is None or session.ended or not session.usable_from(loop):
                if session is not None:  # it died, or its loop is gone
                    self._lost = self._lost or (session.ended and session.was_open)
                    self._keep_closing(session)
                if self._lost and not self.reconnect:
                    raise CallFailed(
                        MCPErrorKind.CONNECTION, f"the connection to the MCP server ({self.server.description}) was lost"
                    )
                session = self.session = Session(self.server, self.connect_timeout, self.errlog)
        await _on_loop_of(session, self.connect_timeout + CLOSE_TIMEOUT, session.opened.wait)
        if session.client is None:
            cause = describe(session.error) if session.error is not None else "it closed"
            raise CallFailed(MCPErrorKind.CONNECTION, f"cannot reach the MCP server ({self.server.description}): {cause}")
        return session

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The result of the MCP tool ``name``; :class:`CallFailed` for a call that fails. A
        session whose connection failed is retired: the next call opens a fresh one."""
        session = await self.open()
        limit = timeout + PROBE_TIMEOUT + CLOSE_TIMEOUT
        try:
            return await _on_loop_of(session, limit, self._call_on, session, name, arguments, timeout)
        except CallFailed as failure:
            if failure.kind is MCPErrorKind.CONNECTION:
                self._retire(session)
            raise

    async def _call_on(self, session: Session, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The call on the session's own loop, bounded by the timeout and by the session's end.
        A call that times out is followed by a ping, which tells a slow tool from a server that
        is gone without the transport saying so (mcp 1.x's HTTP client leaves such a request
        waiting)."""
        client = session.client
        if client is None:
            raise CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))
        state, value = await _guarded(session, lambda: client.call_tool(name, arguments), timeout)
        if state == "ok":
            return value
        if state == "error":
            raise self._failure(session, name, value)
        if state == "timeout":
            probe, answer = await _guarded(session, client.send_ping, PROBE_TIMEOUT)
            lost = probe == "ended" or (
                probe == "error" and self._failure(session, name, answer).kind is MCPErrorKind.CONNECTION
            )
            if not lost:
                raise CallFailed(MCPErrorKind.TIMEOUT, f"{name!r} did not finish within {timeout:g}s")
        raise CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))

    def _failure(self, session: Session, name: str, exc: Exception) -> CallFailed:
        """The failure a call that raised ``exc`` is."""
        if isinstance(exc, sdk().MCPError):
            if getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED:
                return CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))
            return CallFailed(MCPErrorKind.SERVER_ERROR, f"the MCP server refused {name!r}: {exc}")
        if is_connection_error(exc):
            return CallFailed(MCPErrorKind.CONNECTION, self._lost_message(session, name))
        return CallFailed(MCPErrorKind.PROTOCOL, f"unreadable answer to {name!r}: {describe(exc)}")

    def _lost_message(self, session: Session, name: str) -> str:
        cause = f" ({describe(session.error)})" if session.error is not None else ""
        return f"the MCP server ({self.server.description}) went away during {name!r}{cause}"

    def _retire(self, session: Session) -> None:
        """Stop using a session whose connection failed."""
        with self._lock:
            if self.session is session:
                self.session = None
                self._lost = True
                self._keep_closing(session)
        session.stop_soon()

    def _keep_closing(self, session: Session) -> None:
        """Remember a session left behind until it is closed, for :meth:`aclose` to wait on."""
        self._retired = [s for s in self._retired if not s.done.is_set() and s is not session]
        if not session.done.is_set():
            self._retired.append(session)

    def list_in_thread(self) -> list[MCPToolSpec]:
        """The tools over a short-lived connection on a loop of a thread of its own, for sync
        code running inside an event loop that it must not wait on."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["tools"] = anyio.run(self._list_once)
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc

        thread = threading.Thread(target=run, name="mcp-list-tools", daemon=True)
        thread.start()
        thread.join(self.connect_timeout + CLOSE_TIMEOUT)
        if thread.is_alive():
            raise MCPConnectionError(f"listing the tools of the MCP server ({self.server.description}) did not finish")
        if "error" in box:
            raise box["error"]
        tools: list[MCPToolSpec] = box["tools"]
        return tools

    async def _list_once(self) -> list[MCPToolSpec]:
        try:
            async with self.server.connect(self.connect_timeout, self.errlog) as (_, tools):
                return tools
        except Exception as exc:
            raise MCPConnectionError(f"cannot reach the MCP server ({self.server.description}): {describe(exc)}") from None

    async def aclose(self) -> None:
        """Close the session and stop its server (a stdio server's process ends here); a later
        call opens a new one. Safe to call twice, and from any loop."""
        with self._lock:
            sessions = [s for s in (self.session, *self._retired) if s is not None]
            self.session, self._retired, self._lost = None, [], False
        loop = running_loop()
        for session in sessions:
            if session.usable_from(loop):
                with contextlib.suppress(CallFailed):  # its loop stopped meanwhile
                    await _on_loop_of(session, 2 * CLOSE_TIMEOUT, session.close)
