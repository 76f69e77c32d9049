"""Blocking faces of the pool and its sandboxes, for callers without an event loop.

The pool lives on the shared background loop (:mod:`gem_sandbox._loop`); every method here
submits one coroutine to it and waits. ``with SyncSandboxPool() as pool: pool.run("print(1)")``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from gem_sandbox._loop import portal
from gem_sandbox.sandbox import config as settings
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import ExecResult


class SyncSandbox:
    """A leased sandbox with blocking methods mirroring :class:`Sandbox`."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def run(self, code: str, language: str = "python", **kwargs: Any) -> ExecResult:
        return portal().call(lambda: self._sandbox.run(code, language, **kwargs))

    def shell(self, command: str, **kwargs: Any) -> ExecResult:
        return portal().call(lambda: self._sandbox.shell(command, **kwargs))

    def kernel_exec(self, code: str, **kwargs: Any) -> ExecResult:
        return portal().call(lambda: self._sandbox.kernel_exec(code, **kwargs))

    def write_files(self, files: Mapping[str, bytes | str], dest: str = ".") -> None:
        portal().call(lambda: self._sandbox.write_files(files, dest=dest))

    def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        return portal().call(self._sandbox.read_files, paths)

    @property
    def id(self) -> str:
        return self._sandbox.id


class SyncSandboxPool:
    """A :class:`SandboxPool` driven from synchronous code.

    ``backend`` and ``options`` default to :func:`gem_sandbox.configure`'s settings.
    """

    def __init__(self, backend: str | None = None, config: PoolConfig | None = None, **options: Any) -> None:
        self.backend_name = settings.resolve_backend_name(backend or settings.backend_name())
        base = config or settings.pool_config()
        self.config = settings.with_options(base, options) if options else base
        self._context: Any = None
        self.pool: SandboxPool | None = None

    def __enter__(self) -> SyncSandboxPool:
        backend = settings.backend_class(self.backend_name)()
        self._context = portal().wrap_async_context_manager(SandboxPool(backend, self.config))
        self.pool = self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._context is not None:
            context, self._context = self._context, None
            context.__exit__(None, None, None)

    def _pool(self) -> SandboxPool:
        if self.pool is None or self._context is None:
            raise RuntimeError("use the pool inside 'with SyncSandboxPool() as pool:'")
        return self.pool

    def run(self, code: str, language: str = "python", **kwargs: Any) -> ExecResult:
        pool = self._pool()
        return portal().call(lambda: pool.run(code, language, **kwargs))

    @contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[SyncSandbox]:
        pool = self._pool()
        sandbox = portal().call(pool.acquire, timeout)
        try:
            yield SyncSandbox(sandbox)
        finally:
            portal().call(pool.release, sandbox)

    def wait_ready(self, timeout: float = 60.0) -> None:
        portal().call(self._pool().wait_ready, timeout)

    @property
    def stats(self) -> dict[str, int]:
        return self._pool().stats.as_dict()
