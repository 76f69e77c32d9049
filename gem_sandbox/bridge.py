"""The one bridge from blocking code to the async core: an event loop in a background thread.

GEM's and Gymnasium's API is synchronous (``env.step``, ``tool.execute_action``); the core is
async. Every sync face calls :func:`run_sync`, which runs its coroutine on one event loop in a
background thread, started on first use, and blocks until it returns. What must stay open
between calls (the runtimes :mod:`gem_sandbox.sync` hosts) is held open on that loop by
:func:`hold` until :func:`release`.

The thread is a daemon: Python joins non-daemon threads *before* it runs ``atexit`` hooks, so
a loop on one would keep every process that used it from exiting. At exit the hook releases
everything held (closing runtimes kills their sandboxes) and stops the loop.

This module needs anyio only: the env core runs its async envs through it, and must not load
sandbox code to do so.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal

T = TypeVar("T")

#: Seconds the exit hook waits for what is held to close (runtimes, their sandboxes killed).
CLOSE_AT_EXIT = 20.0


class _Loop:
    """The background loop and the contexts held open on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._held: dict[AbstractAsyncContextManager[Any], tuple[anyio.Event, anyio.Event]] = {}  # (leave, left)

    def portal(self) -> BlockingPortal:
        with self._lock:
            if self._portal is None:
                ready = threading.Event()
                self._thread = threading.Thread(
                    target=anyio.run, args=(self._main, ready), name="gem-sandbox-sync", daemon=True
                )
                self._thread.start()
                ready.wait()
                atexit.register(self.close)
            assert self._portal is not None
            return self._portal

    async def _main(self, ready: threading.Event) -> None:
        async with anyio.create_task_group() as tg:
            async with BlockingPortal() as portal:
                self._portal, self._tg = portal, tg
                ready.set()
                await portal.sleep_until_stopped()
            tg.cancel_scope.cancel()

    def running(self) -> bool:
        return self._portal is not None

    def on_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def call(self, fn: Callable[..., Awaitable[T] | T], *args: Any) -> T:
        if self.on_loop():
            raise RuntimeError("a sync face was called from async code on gem-sandbox's loop; await the async face")
        return self.portal().call(fn, *args)  # type: ignore[arg-type]

    async def hold(self, context: AbstractAsyncContextManager[Any]) -> None:
        assert self._tg is not None
        await self._tg.start(self._hold, context)

    async def _hold(self, context: AbstractAsyncContextManager[Any], *, task_status: anyio.abc.TaskStatus[None]) -> None:
        leave, left = self._held[context] = anyio.Event(), anyio.Event()
        try:
            async with context:
                task_status.started()
                await leave.wait()
        finally:
            del self._held[context]
            left.set()

    async def release(self, context: AbstractAsyncContextManager[Any]) -> None:
        events = self._held.get(context)
        if events is not None:
            events[0].set()
            await events[1].wait()

    async def _release_all(self) -> None:
        with anyio.move_on_after(CLOSE_AT_EXIT):
            async with anyio.create_task_group() as tg:
                for context in list(self._held):
                    tg.start_soon(self.release, context)

    def close(self) -> None:
        """Release everything held and stop the loop (the exit hook)."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is None:
            return
        portal.call(self._release_all)
        portal.call(portal.stop)
        if self._thread is not None:
            self._thread.join(CLOSE_AT_EXIT)


_loop = _Loop()


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await fn(*args, **kwargs)`` on the bridge's loop, from blocking code."""
    return _loop.call(partial(fn, *args, **kwargs))


def call(fn: Callable[..., Awaitable[T] | T], *args: Any) -> T:
    """``fn(*args)`` on the bridge's loop (awaited if it is async), from blocking code; for
    sync functions that must run on the loop's thread."""
    return _loop.call(fn, *args)


def running() -> bool:
    """Whether the loop has been started (and not yet stopped at exit)."""
    return _loop.running()


def on_loop() -> bool:
    """Whether the caller runs on the bridge's loop, i.e. was reached from a sync face."""
    return _loop.on_loop()


async def hold(context: AbstractAsyncContextManager[Any]) -> None:
    """Enter ``context`` in a task of the loop that keeps it entered until :func:`release` (or
    exit); returns once it is entered. Call on the loop."""
    await _loop.hold(context)


async def release(context: AbstractAsyncContextManager[Any]) -> None:
    """Exit a held ``context`` and wait until it has; nothing if it is not held. Call on the loop."""
    await _loop.release(context)
