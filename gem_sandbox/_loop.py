"""One background event loop that drives async code for sync callers.

Sync faces (``Env.step``, the sync pool facade) submit coroutines here instead of starting an
event loop per call: sandboxes and pools created through the sync API live on this loop for
the life of the process, so their connections and background tasks survive between calls.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_stack = ExitStack()


def portal() -> BlockingPortal:
    """The shared portal, started on first use and stopped at interpreter exit."""
    global _portal
    with _lock:
        if _portal is None:
            _portal = _stack.enter_context(start_blocking_portal(backend="asyncio"))
            atexit.register(_stack.close)
        return _portal


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run ``await fn(*args, **kwargs)`` on the shared loop and return its result."""
    if kwargs:
        return portal().call(lambda: fn(*args, **kwargs))
    return portal().call(fn, *args)
