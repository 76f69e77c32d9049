"""The owner of the sandboxes (and connections) that tool calls use: :class:`Runtime`.

A runtime is to tools what an httpx client is to requests: the caller makes one, passes it to
the tools, wrappers and envs that need sandboxes (``runtime=``), and closes it when done::

    async with Runtime(backend="docker", max_size=16) as runtime:
        tool = PythonCodeTool(runtime=runtime)
        ...

It lives on the event loop that opened it: calls from that loop go straight to its pool, with
no thread and no hop. A call from another loop is a bug in the caller (the pool's sandboxes,
events and streams belong to one loop), and says so. Sync code never opens one of these
directly: :mod:`gem_sandbox.sync` hosts runtimes for it (the process default among them).

A runtime is one :class:`~gem_sandbox.sandbox.protocols.Pool`, opened at the first call that
needs a sandbox, and what it lends is a :class:`~gem_sandbox.sandbox.protocols.LeasedSandbox`: a
:class:`~gem_sandbox.sandbox.pool.SandboxPool` on one backend; given a service URL (or
``GEM_SANDBOX_URL``), a :class:`~gem_sandbox.sandbox.remote.RemotePool` whose sandboxes are
leases on the pool service (docs/service.md); given the name of a set of pool actors on a Ray
cluster (or ``GEM_SANDBOX_RAY``), a :class:`~gem_sandbox.sandbox.cluster.RayPool` that leases
across the cluster's nodes (docs/scale-out.md). Plus an HTTP session for tools that talk to
servers (the search tool).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.errors import BackendNotAvailable, ConfigError, SandboxError
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import PoolConfig, PoolStatistics, SandboxPool
from gem_sandbox.sandbox.protocols import LeasedSandbox, Pool
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot

if TYPE_CHECKING:
    import aiohttp

__all__ = ["LeasedSandbox", "Runtime", "RuntimeState", "WrongEventLoop"]


class RuntimeState(str, enum.Enum):
    NEW = "new"
    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class WrongEventLoop(SandboxError, RuntimeError):
    """A runtime was used from an event loop (or thread) other than the one that opened it."""


class Runtime:
    """``async with Runtime(backend, **options) as runtime:`` sandboxes for tool calls.

    ``backend`` is a backend name (``"auto"``, ``"local"``, ``"docker"``, ``"process"``) or a
    :class:`~gem_sandbox.sandbox.backends.base.Backend` instance; ``config`` and ``options``
    (any :class:`PoolConfig`, ``SandboxSpec`` or ``RunLimits`` field) size the pool. Both
    default to :func:`gem_sandbox.configure`'s settings (or ``GEM_SANDBOX_*`` variables).

    ``url`` (instead of a backend) runs everything on the pool service there, as ``token``;
    with neither given, ``GEM_SANDBOX_URL`` does the same (see
    :func:`~gem_sandbox.sandbox.defaults.service_endpoint`). ``ray`` (instead of either) names
    the set of pool actors on the Ray cluster this process is in (``gem-sandbox ray up``),
    joining it with ``ray.init(address="auto")`` if it has not; ``GEM_SANDBOX_RAY`` does the
    same. The service's or the pool actors' settings size the pools; of this runtime's,
    ``run_timeout`` and ``acquire_timeout`` apply.
    """

    def __init__(
        self,
        backend: str | Backend | None = None,
        config: PoolConfig | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        ray: str | None = None,
        **options: Any,
    ) -> None:
        given = {"a backend": backend, "a service url": url, "Ray pools": ray}
        if sum(value is not None for value in given.values()) > 1:
            named = " and ".join(f"{what} ({value!r})" for what, value in given.items() if value is not None)
            raise ConfigError(f"give a runtime one of a backend, a service url or Ray pools, not {named}")
        if url is None and backend is None and ray is None:
            endpoint, ray = defaults.service_endpoint(), defaults.ray_pools()
            if endpoint is not None and ray is not None:
                raise ConfigError(
                    f"{defaults.URL_VARIABLE} and {defaults.RAY_VARIABLE} are both set; unset one of them"
                )
            if endpoint is not None:
                url, token = endpoint[0], token or endpoint[1]
        self.config = defaults.with_options(config or defaults.pool_config(), options)
        self._backend = backend if isinstance(backend, Backend) else None
        self._backend_name = None if isinstance(backend, Backend) else backend
        if self._backend_name not in (None, "auto"):
            defaults.backend_class(self._backend_name)  # a bad name fails here, not at open
        self._url, self._token, self._ray = url, token, ray
        self.state = RuntimeState.NEW
        self._pool: Pool | None = None
        self._pool_lock: anyio.Lock | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._loop: object = None
        self._http: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:
        backend = self.backend or ("remote" if self._url else "ray" if self._ray else self._backend_name or "auto")
        return f"<Runtime {backend} {self.state.value}>"

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> Runtime:
        if self.state is not RuntimeState.NEW:
            raise RuntimeError(f"a runtime is opened once; this one is {self.state.value}")
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._loop, self._pool_lock = _current_loop(), anyio.Lock()
        self.state = RuntimeState.OPEN
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._check_loop()
        if self.state is not RuntimeState.OPEN:
            return
        self.state = RuntimeState.CLOSING
        try:
            with anyio.CancelScope(shield=True):
                if self._http is not None:
                    await self._http.close()
                if self._pool is not None:
                    await self._pool.aclose()
        finally:
            assert self._tg is not None
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self.state = RuntimeState.CLOSED

    async def pool(self) -> Pool:
        """The pool, opened on first use: a runtime that only serves HTTP tools never probes a
        backend, launches a sandbox or connects to a service. Raises
        :class:`BackendNotAvailable` when the backend cannot run here."""
        self._check_open()
        if self._pool is None:
            assert self._pool_lock is not None
            async with self._pool_lock:
                if self._pool is None:
                    pool = await self._make_pool()
                    assert self._tg is not None
                    await self._tg.start(self._hold, pool)
                    self._pool = pool
        return self._pool

    async def _make_pool(self) -> Pool:
        if self._url is not None:
            try:
                from gem_sandbox.sandbox.remote import RemotePool
            except ImportError as exc:
                raise BackendNotAvailable(
                    f"the remote runtime cannot be imported: {exc} (pip install 'gem-sandbox[service]')"
                ) from exc
            return RemotePool(self._url, self._token, self.config)
        if self._ray is not None:
            try:
                from gem_sandbox.sandbox.cluster import RayPool
            except ImportError as exc:
                raise BackendNotAvailable(
                    f"the Ray runtime cannot be imported: {exc} (pip install 'gem-sandbox[ray]')"
                ) from exc
            return RayPool(self._ray, self.config)
        backend = self._backend
        if backend is None:  # probing a backend runs programs (bwrap, the Docker API)
            backend = await anyio.to_thread.run_sync(defaults.make_backend, self._backend_name)
        return SandboxPool(backend, self.config)

    @staticmethod
    async def _hold(pool: Pool, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with pool:
            task_status.started()
            await anyio.sleep_forever()

    # -- what tools use ----------------------------------------------------------------
    @property
    def backend(self) -> str | None:
        """The name of the backend the sandboxes run on, once the pool is open (``"remote"``
        on the pool service, ``"ray"`` on a Ray cluster)."""
        return self._pool.backend_name if self._pool is not None else None

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes | str] | None = None,
        limits: RunLimits | None = None,
    ) -> ExecResult:
        """One stateless run on any warm sandbox (GEM's semantics): nothing carries over.
        ``limits`` replaces the pool's :class:`RunLimits` for this run."""
        pool = await self.pool()
        return await pool.run(code, language, stdin=stdin, timeout=timeout, env=env, files=files, limits=limits)

    async def acquire(self, timeout: float | None = None) -> LeasedSandbox:
        """A sandbox for one tenant until :meth:`release` (see :meth:`SandboxPool.acquire`)."""
        return await (await self.pool()).acquire(timeout)

    async def release(self, sandbox: LeasedSandbox) -> None:
        """Give a sandbox back; it is reset for the next tenant."""
        self._check_open()
        if self._pool is not None:
            # Each pool takes back only what it leased and refuses the rest with a SandboxError.
            await self._pool.release(sandbox)

    @asynccontextmanager
    async def lease(self, timeout: float | None = None) -> AsyncIterator[LeasedSandbox]:
        async with (await self.pool()).lease(timeout) as sandbox:
            yield sandbox

    @asynccontextmanager
    async def restore(self, snapshot: Snapshot | str, timeout: float | None = None) -> AsyncIterator[LeasedSandbox]:
        """``async with runtime.restore(snap) as sandbox:`` a new lease holding the state
        ``await sandbox.snapshot()`` took, released however the block ends."""
        pool = await self.pool()
        sandbox = await pool.restore(snapshot, timeout)
        try:
            yield sandbox
        finally:
            with anyio.CancelScope(shield=True):
                await pool.release(sandbox)

    async def drop_snapshot(self, snapshot: Snapshot | str) -> None:
        """Forget a snapshot before its expiry (its pool forgets them all when it closes)."""
        await (await self.pool()).drop_snapshot(snapshot)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the pool's ``min_idle`` sandboxes are warm (on the service: until it can
        serve)."""
        await (await self.pool()).wait_ready(timeout)

    def statistics(self) -> PoolStatistics:
        """A snapshot of the pool's counters and population (all zero before it opened)."""
        return self._pool.statistics() if self._pool is not None else PoolStatistics.empty()

    async def http_session(self) -> aiohttp.ClientSession:
        """The HTTP session that tools talking to servers share; made on first use (it needs
        the ``aiohttp`` package) and closed with the runtime."""
        self._check_open()
        if self._http is None:
            import aiohttp

            self._http = aiohttp.ClientSession()
        return self._http

    # -- internals ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.state is not RuntimeState.OPEN:
            raise RuntimeError(f"use the runtime inside 'async with Runtime() as runtime:' (it is {self.state.value})")
        self._check_loop()

    def _check_loop(self) -> None:
        if self._loop is not None and _current_loop() is not self._loop:
            raise WrongEventLoop(
                f"{self!r} belongs to the event loop that opened it; open a Runtime on this loop "
                "(async with Runtime() as runtime) and pass that one"
            )


def _current_loop() -> object:
    """The running event loop (the native object anyio's token wraps)."""
    return anyio.lowlevel.current_token().native_token
