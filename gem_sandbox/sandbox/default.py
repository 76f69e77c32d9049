"""The process-wide default pools: what tools use when nobody handed them a pool.

One pool per backend name, opened on first use from :func:`gem_sandbox.configure` settings
(or ``GEM_SANDBOX_*`` variables), living on the shared background loop
(:mod:`gem_sandbox._loop`) and closed at interpreter exit. Settings changed later apply to
pools opened later: :func:`close_default_pools` makes the next use open fresh ones.

Why the shared loop: sync callers (``env.step``, GEM's tool API) have no loop of their own,
and a pool must outlive any one call to keep its sandboxes warm. The price is paid by async
callers on *another* loop (``anyio.run(...)`` of their own): a pool's sandboxes, events and
streams belong to the loop that made them, so every call from a foreign loop hops through a
worker thread that blocks on :meth:`BlockingPortal.call` (:func:`hop`). That costs a thread
per call in flight (bounded by :data:`HOP_THREADS` per loop) and about 0.2 ms per call (0.5 ms
with a thousand in flight, measured on 2 cores); the alternative, a default pool per event
loop, would keep a warm set of sandboxes per loop and tie their lifetime to loops that may end
without closing them. Async code that cares passes its own pool (``pool=`` or ``using_pool``)
and pays nothing.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from anyio.lowlevel import RunVar

from gem_sandbox._loop import portal
from gem_sandbox.sandbox import config as settings
from gem_sandbox.sandbox.pool import SandboxPool
from gem_sandbox.sandbox.sync import SyncSandboxPool

T = TypeVar("T")

#: Worker threads one foreign event loop may block on the shared loop at once. Calls beyond it
#: queue; it must exceed the tool calls a caller runs concurrently (e.g. a vector env's size).
HOP_THREADS = 1024

_lock = threading.Lock()
_pools: dict[str, SyncSandboxPool] = {}  # by resolved backend name
_resolved: dict[str, str] = {}  # requested name ("auto", "docker", ...) -> backend that runs
_loop_thread: int | None = None  # the shared loop's thread, known once a pool was opened
_atexit_registered = False
_hop_limiter: RunVar[CapacityLimiter] = RunVar("gem_sandbox_hop_limiter")


def default_pool(backend: str | None = None) -> SandboxPool:
    """The default pool for ``backend`` (default: the configured one), opened if need be.
    Blocks: call it from sync code or a worker thread, never from the shared loop itself."""
    global _loop_thread, _atexit_registered
    requested = backend or settings.backend_name()
    with _lock:
        if requested not in _resolved:
            _resolved[requested] = settings.resolve_backend_name(requested)
        name = _resolved[requested]
        pool = _pools.get(name)
        if pool is None:
            pool = SyncSandboxPool(name)
            pool.__enter__()
            _pools[name] = pool
            _loop_thread = portal().call(threading.get_ident)
            if not _atexit_registered:  # registered after the loop's own hook, so runs before it
                atexit.register(close_default_pools)
                _atexit_registered = True
    assert pool.pool is not None
    return pool.pool


async def adefault_pool(backend: str | None = None) -> SandboxPool:
    """:func:`default_pool` from any event loop, the shared one included: opening the pool
    runs on the shared loop, so the caller waits for it in a worker thread."""
    name = _resolved.get(backend or settings.backend_name())
    opened = _pools.get(name) if name else None
    if opened is not None and opened.pool is not None:
        return opened.pool
    return await anyio.to_thread.run_sync(default_pool, backend)


def close_default_pools() -> None:
    """Close every default pool (their sandboxes are killed); later uses open new ones."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
        _resolved.clear()
    for pool in pools:
        pool.close()


def on_shared_loop() -> bool:
    """Whether the caller runs on the shared loop's thread (where default pools live)."""
    return threading.get_ident() == _loop_thread


async def hop(fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()`` on the shared loop, from whichever loop the caller is on."""
    if on_shared_loop():
        return await fn()
    try:
        limiter = _hop_limiter.get()
    except LookupError:
        limiter = CapacityLimiter(HOP_THREADS)
        _hop_limiter.set(limiter)
    return await anyio.to_thread.run_sync(portal().call, fn, limiter=limiter)
