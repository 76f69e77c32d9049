"""Runtimes for blocking code: :class:`SyncRuntime` and the process default.

Sync callers reach the async core through :mod:`gem_sandbox.bridge`; the runtimes they use live
on its loop, held open there: each :class:`SyncRuntime`, and the process default, one
:class:`~gem_sandbox.runtime.Runtime` opened on first use from :func:`gem_sandbox.configure`'s
settings. Async code on a loop of its own never reaches the default: it opens a ``Runtime`` and
passes it (``runtime=``), so its tool calls cost no thread and no hop (:func:`resolve_runtime`
says so when one is missing).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import anyio

from gem_sandbox import bridge
from gem_sandbox.bridge import run_sync
from gem_sandbox.runtime import LeasedSandbox, Runtime, RuntimeState
from gem_sandbox.sandbox.errors import SandboxError
from gem_sandbox.sandbox.pool import PoolConfig, PoolStatistics
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot


class MissingRuntime(SandboxError, RuntimeError):
    """Something that needs sandboxes ran on an event loop of the caller's without a runtime."""


class _Default:
    """The process default runtime; touched only on the bridge's loop."""

    runtime: Runtime | None = None
    lock: anyio.Lock | None = None


async def _default_runtime() -> Runtime:
    if not bridge.on_loop():
        raise MissingRuntime(
            "sandboxes were asked for on your own event loop without a runtime: the process "
            "default serves sync callers only. Open one on your loop (async with "
            "gem_sandbox.Runtime() as runtime) and pass runtime=runtime to the tool, "
            "get_wrapper_fns, make or make_vec"
        )
    runtime = _Default.runtime
    if runtime is not None and runtime.state is RuntimeState.OPEN:
        return runtime
    if _Default.lock is None:
        _Default.lock = anyio.Lock()
    async with _Default.lock:
        if _Default.runtime is None or _Default.runtime.state is not RuntimeState.OPEN:
            runtime = Runtime()
            await bridge.hold(runtime)
            _Default.runtime = runtime
        return _Default.runtime


async def _close_default() -> None:
    runtime, _Default.runtime = _Default.runtime, None
    if runtime is not None:
        await bridge.release(runtime)


async def resolve_runtime(runtime: Runtime | SyncRuntime | None) -> Runtime:
    """The runtime a call should use: the one given, else the process default (which only
    sync callers, whose coroutines run on the bridge, can reach)."""
    if isinstance(runtime, SyncRuntime):
        return runtime.runtime
    if runtime is not None:
        return runtime
    return await _default_runtime()


def close_default_runtime() -> None:
    """Close the process default runtime; the next sync use opens a new one with the settings
    :func:`gem_sandbox.configure` holds then."""
    if bridge.running():
        bridge.call(_close_default)


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

    def snapshot(self, ttl: float | None = None) -> Snapshot:
        return run_sync(self.sandbox.snapshot, ttl)

    def fork(self, n: int) -> list[SyncSandbox]:
        """``n`` new leases from its state (give each back with ``SyncRuntime.release``)."""
        return [SyncSandbox(branch) for branch in run_sync(self.sandbox.fork, n)]


async def _restored(runtime: Runtime, snapshot: Snapshot | str, timeout: float | None) -> LeasedSandbox:
    return await (await runtime.pool()).restore(snapshot, timeout)


class SyncRuntime:
    """A :class:`Runtime` for blocking code: ``with SyncRuntime("local", max_size=4) as rt:``
    (or ``SyncRuntime(url=..., token=...)`` on the pool service).

    The runtime lives on the bridge's loop; ``rt.run(...)`` blocks, and ``rt`` itself can be
    passed as ``runtime=`` to tools, wrappers and envs driven through their sync faces.
    """

    def __init__(self, backend: str | None = None, config: PoolConfig | None = None, **options: Any) -> None:
        self.runtime = Runtime(backend, config, **options)

    def __enter__(self) -> SyncRuntime:
        bridge.call(bridge.hold, self.runtime)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the runtime's sandboxes. Idempotent."""
        if self.runtime.state is RuntimeState.OPEN:
            bridge.call(bridge.release, self.runtime)

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

    def release(self, sandbox: SyncSandbox) -> None:
        """Give back a lease that no ``with`` block holds (a fork's branch)."""
        run_sync(self.runtime.release, sandbox.sandbox)

    @contextmanager
    def restore(self, snapshot: Snapshot | str, timeout: float | None = None) -> Iterator[SyncSandbox]:
        """A new lease holding a snapshot's state, for the ``with`` block."""
        sandbox = run_sync(_restored, self.runtime, snapshot, timeout)
        try:
            yield SyncSandbox(sandbox)
        finally:
            run_sync(self.runtime.release, sandbox)

    def drop_snapshot(self, snapshot: Snapshot | str) -> None:
        run_sync(self.runtime.drop_snapshot, snapshot)

    def wait_ready(self, timeout: float = 60.0) -> None:
        run_sync(self.runtime.wait_ready, timeout)

    def statistics(self) -> PoolStatistics:
        return bridge.call(self.runtime.statistics)
