"""The one bridge from blocking code to the async core, and the runtimes it hosts.

GEM's and Gymnasium's API is synchronous (``env.step``, ``tool.execute_action``); the core is
async. Every sync face calls :func:`run_sync`, which runs its coroutine on one event loop in a
background thread and blocks until it returns. That loop hosts the runtimes sync code uses:
each :class:`SyncRuntime`, and the process default, one :class:`~gem_sandbox.runtime.Runtime`
opened on first use from :func:`gem_sandbox.configure`'s settings. Async code on a loop of its
own never reaches the default: it opens a ``Runtime`` and passes it (``runtime=``), so its tool
calls cost no thread and no hop (:func:`resolve_runtime` says so when one is missing).

The thread is a daemon: Python joins non-daemon threads *before* it runs ``atexit`` hooks, so
a loop on one would keep every process that used it from exiting. At exit the hook closes every
hosted runtime (killing their sandboxes) and stops the loop.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal

from gem_sandbox.runtime import LeasedSandbox, Runtime, RuntimeState
from gem_sandbox.sandbox.errors import SandboxError
from gem_sandbox.sandbox.pool import PoolConfig, PoolStatistics
from gem_sandbox.sandbox.result import ExecResult

T = TypeVar("T")

#: Seconds the exit hook waits for hosted runtimes to close (their sandboxes to be killed).
CLOSE_AT_EXIT = 20.0


class MissingRuntime(SandboxError, RuntimeError):
    """Something that needs sandboxes ran on an event loop of the caller's without a runtime."""


class _Bridge:
    """The background loop, started on first use, and the runtimes living on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._hosted: dict[Runtime, tuple[anyio.Event, anyio.Event]] = {}  # (close it, closed)
        self._default: Runtime | None = None
        self._default_lock: anyio.Lock | None = None

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
                self._portal, self._tg, self._default_lock = portal, tg, anyio.Lock()
                ready.set()
                await portal.sleep_until_stopped()
            tg.cancel_scope.cancel()

    def on_loop(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def call(self, fn: Callable[..., Awaitable[T] | T], *args: Any) -> T:
        if self.on_loop():
            raise RuntimeError("a sync face was called from async code on gem-sandbox's loop; await the async face")
        return self.portal().call(fn, *args)  # type: ignore[arg-type]

    # -- hosting (on the loop) ---------------------------------------------------------
    async def host(self, runtime: Runtime) -> None:
        """Open ``runtime`` in a task of the bridge that holds it open until :meth:`unhost`."""
        assert self._tg is not None
        await self._tg.start(self._hold, runtime)

    async def _hold(self, runtime: Runtime, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        release, closed = self._hosted[runtime] = anyio.Event(), anyio.Event()
        try:
            async with runtime:
                task_status.started()
                await release.wait()
        finally:
            del self._hosted[runtime]
            closed.set()

    async def unhost(self, runtime: Runtime) -> None:
        """Close a hosted runtime and wait until it is closed; nothing if it is not hosted."""
        events = self._hosted.get(runtime)
        if events is not None:
            events[0].set()
            await events[1].wait()

    async def default_runtime(self) -> Runtime:
        if not self.on_loop():
            raise MissingRuntime(
                "sandboxes were asked for on your own event loop without a runtime: the process "
                "default serves sync callers only. Open one on your loop (async with "
                "gem_sandbox.Runtime() as runtime) and pass runtime=runtime to the tool, "
                "get_wrapper_fns, make or make_vec"
            )
        runtime = self._default
        if runtime is not None and runtime.state is RuntimeState.OPEN:
            return runtime
        assert self._default_lock is not None
        async with self._default_lock:
            if self._default is None or self._default.state is not RuntimeState.OPEN:
                runtime = Runtime()
                await self.host(runtime)
                self._default = runtime
            return self._default

    async def close_default(self) -> None:
        runtime, self._default = self._default, None
        if runtime is not None:
            await self.unhost(runtime)

    async def _close_all(self) -> None:
        with anyio.move_on_after(CLOSE_AT_EXIT):
            async with anyio.create_task_group() as tg:
                for runtime in list(self._hosted):
                    tg.start_soon(self.unhost, runtime)

    def close(self) -> None:
        """Close every hosted runtime and stop the loop (the exit hook)."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is None:
            return
        portal.call(self._close_all)
        portal.call(portal.stop)
        if self._thread is not None:
            self._thread.join(CLOSE_AT_EXIT)


_bridge = _Bridge()


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await fn(*args, **kwargs)`` on the bridge's loop, from blocking code."""
    return _bridge.call(partial(fn, *args, **kwargs))


async def resolve_runtime(runtime: Runtime | SyncRuntime | None) -> Runtime:
    """The runtime a call should use: the one given, else the process default (which only
    sync callers, whose coroutines run on the bridge, can reach)."""
    if isinstance(runtime, SyncRuntime):
        return runtime.runtime
    if runtime is not None:
        return runtime
    return await _bridge.default_runtime()


def close_default_runtime() -> None:
    """Close the process default runtime; the next sync use opens a new one with the settings
    :func:`gem_sandbox.configure` holds then."""
    if _bridge._portal is not None:
        _bridge.call(_bridge.close_default)


class SyncSandbox:
    """A leased sandbox with blocking methods mirroring :class:`Sandbox`."""

    def __init__(self, sandbox: LeasedSandbox) -> None:
        self.sandbox = sandbox

    @property
    def id(self) -> str:
        return self.sandbox.id

    def run(self, code: str, language: str = "python", **kwargs: Any) -> ExecResult:
        return run_sync(self.sandbox.run, code, language, **kwargs)

    def shell(self, command: str, **kwargs: Any) -> ExecResult:
        return run_sync(self.sandbox.shell, command, **kwargs)

    def kernel_exec(self, code: str, **kwargs: Any) -> ExecResult:
        return run_sync(self.sandbox.kernel_exec, code, **kwargs)

    def write_files(self, files: Mapping[str, bytes | str], dest: str = ".") -> None:
        run_sync(self.sandbox.write_files, files, dest=dest)

    def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        return run_sync(self.sandbox.read_files, paths)


class SyncRuntime:
    """A :class:`Runtime` for blocking code: ``with SyncRuntime("local", max_size=4) as rt:``
    (or ``SyncRuntime(url=..., token=...)`` on the pool service).

    The runtime lives on the bridge's loop; ``rt.run(...)`` blocks, and ``rt`` itself can be
    passed as ``runtime=`` to tools, wrappers and envs driven through their sync faces.
    """

    def __init__(self, backend: str | None = None, config: PoolConfig | None = None, **options: Any) -> None:
        self.runtime = Runtime(backend, config, **options)

    def __enter__(self) -> SyncRuntime:
        _bridge.call(_bridge.host, self.runtime)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the runtime's sandboxes. Idempotent."""
        if self.runtime.state is RuntimeState.OPEN:
            _bridge.call(_bridge.unhost, self.runtime)

    @property
    def backend(self) -> str:
        return self.runtime.backend

    def run(self, code: str, language: str = "python", **kwargs: Any) -> ExecResult:
        """One stateless run (see :meth:`Runtime.run`)."""
        return run_sync(self.runtime.run, code, language, **kwargs)

    @contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[SyncSandbox]:
        sandbox = run_sync(self.runtime.acquire, timeout)
        try:
            yield SyncSandbox(sandbox)
        finally:
            run_sync(self.runtime.release, sandbox)

    def wait_ready(self, timeout: float = 60.0) -> None:
        run_sync(self.runtime.wait_ready, timeout)

    def statistics(self) -> PoolStatistics:
        return _bridge.call(self.runtime.statistics)
