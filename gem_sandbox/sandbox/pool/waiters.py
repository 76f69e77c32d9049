"""The line of callers waiting for a sandbox: first come, first served, and bounded.

A sandbox that frees up is handed to the longest waiter directly (never put in the idle set
for the quickest caller to grab), so a burst is served in arrival order; a waiter that gives
up after being handed one (timeout at the same instant, cancellation) gives it back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio

from gem_sandbox.sandbox.errors import SandboxUnavailable

T = TypeVar("T")


class _Waiter(Generic[T]):
    __slots__ = ("event", "item", "error")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.item: T | None = None
        self.error: BaseException | None = None


class WaitQueue(Generic[T]):
    """At most ``limit`` waiters; beyond that :meth:`wait` raises at once (backpressure)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._waiters: deque[_Waiter[T]] = deque()

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, timeout: float, give_back: Callable[[T], None]) -> T | None:
        """The item handed to this caller, or None when ``timeout`` passed first. Raises the
        error the queue was failed with. Cancelled after being handed an item, the caller
        passes it to ``give_back``."""
        if len(self._waiters) >= self.limit:
            raise SandboxUnavailable(f"{len(self._waiters)} callers already waiting; the pool is saturated")
        waiter: _Waiter[T] = _Waiter()
        self._waiters.append(waiter)
        try:
            with anyio.move_on_after(timeout):
                await waiter.event.wait()
        except BaseException:
            if waiter.item is not None:
                give_back(waiter.item)
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        if waiter.error is not None:
            raise waiter.error
        return waiter.item

    def hand(self, item: T) -> bool:
        """Give ``item`` to the longest waiter; False when nobody waits."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.event.is_set():
                waiter.item = item
                waiter.event.set()
                return True
        return False

    def fail_all(self, error: BaseException) -> None:
        """Wake every waiter with ``error``."""
        while self._waiters:
            waiter = self._waiters.popleft()
            waiter.error = error
            waiter.event.set()
