"""The two shapes every pool and every sandbox it lends has, whatever runs them.

A :class:`Pool` is a local :class:`~gem_sandbox.sandbox.pool.SandboxPool`, a
:class:`~gem_sandbox.sandbox.remote.RemotePool` of leases on the pool service or a
:class:`~gem_sandbox.sandbox.cluster.RayPool` of leases on a Ray cluster's pool actors; the
:class:`LeasedSandbox` it lends is, respectively, a
:class:`~gem_sandbox.sandbox.client.Sandbox`, a :class:`~gem_sandbox.sandbox.remote.RemoteSandbox`
or a :class:`~gem_sandbox.sandbox.cluster.RaySandbox`. The runtime, the tools and the service
hold these protocols, never one of the classes, so a new kind of pool is a new class and no
caller changes. ``tests/test_pool_conformance.py`` holds every kind to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from gem_sandbox.sandbox.limits import RunLimits
    from gem_sandbox.sandbox.pool.statistics import PoolStatistics
    from gem_sandbox.sandbox.result import ExecResult
    from gem_sandbox.sandbox.snapshots import Snapshot


@runtime_checkable
class LeasedSandbox(Protocol):
    """One tenant's sandbox until it is released: files, shell sessions and kernels persist
    between calls. Sandboxed code's own failures come back as an :class:`ExecResult`'s status;
    a sandbox that died gives ``infra_error`` runs and raises ``SandboxCrashed`` elsewhere."""

    id: str
    backend: str  # the backend it runs on, where it runs ("local", "docker", ...)
    hello: dict[str, Any]  # what its agent said it offers (languages, isolation)

    @property
    def alive(self) -> bool:
        """Usable, as far as this side knows."""
        ...

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
    ) -> ExecResult:
        """Run ``code`` in a fresh process."""
        ...

    async def shell(self, command: str, *, session: str = "default", timeout: float | None = None) -> ExecResult:
        """Run ``command`` in a persistent bash session (cwd and exports persist)."""
        ...

    async def kernel_exec(
        self, code: str, *, kernel: str = "default", timeout: float | None = None, display: bool = False
    ) -> ExecResult:
        """Run ``code`` in a persistent Python namespace; with ``display``, the value of its
        last expression is the result's display data (a notebook's ``Out``), not printed."""
        ...

    async def kernel_restart(self, kernel: str = "default") -> None:
        """Drop a kernel's namespace."""
        ...

    async def write_files(
        self,
        files: Mapping[str, bytes | str],
        *,
        dest: str = ".",
        executable: Collection[str] = (),
        directories: Collection[str] = (),
    ) -> None:
        """Write files under ``dest`` in the work dir."""
        ...

    async def read_files(self, paths: Sequence[str]) -> dict[str, bytes]:
        """Files of the work dir by path; a missing one raises ``FileTransferError``."""
        ...

    async def snapshot(self, ttl: float | None = None) -> Snapshot:
        """Its files, kernels and shells now, kept by its pool for ``ttl`` seconds; state a
        snapshot cannot carry (another process still running) raises
        ``SnapshotUnsupported`` and leaves the sandbox as it was."""
        ...

    async def fork(self, n: int) -> Sequence[LeasedSandbox]:
        """``n`` new leases of its pool, each starting from its state now and diverging from
        there; all of them or, raising ``ForkError``, none."""
        ...

    async def reset(self, timeout: float = 10.0) -> None:
        """Back to a clean sandbox: no process, session, kernel or file left."""
        ...

    async def ping(self, timeout: float = 5.0) -> float:
        """Round trip in milliseconds."""
        ...

    async def close(self) -> None:
        """End it (a leased one: give it back to its pool)."""
        ...


@runtime_checkable
class Pool(Protocol):
    """Warm sandboxes for stateless runs and for leases. Opened once with ``async with``;
    :meth:`aclose` ends every lease it gave and leaves nothing running."""

    @property
    def backend_name(self) -> str:
        """What its sandboxes run on, as :attr:`Runtime.backend` reports it: a backend's name,
        ``"remote"`` (the pool service) or ``"ray"`` (a Ray cluster)."""
        ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> bool | None: ...

    async def aclose(self) -> None:
        """End every lease and stop; idempotent."""
        ...

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until it can serve (its ``min_idle`` sandboxes are warm)."""
        ...

    async def acquire(self, timeout: float | None = None) -> LeasedSandbox:
        """A sandbox for one tenant until :meth:`release`."""
        ...

    async def release(self, sandbox: Any) -> None:
        """Give a sandbox back (reset for the next tenant); one of another pool raises
        ``SandboxError``."""
        ...

    def lease(self, timeout: float | None = None) -> AbstractAsyncContextManager[LeasedSandbox]:
        """``async with pool.lease() as sandbox:`` acquired, released however the block ends."""
        ...

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
        """One stateless run on any warm sandbox: nothing carries over."""
        ...

    async def restore(self, snapshot: Snapshot | str, timeout: float | None = None) -> LeasedSandbox:
        """A new lease holding a snapshot's state; ``SnapshotNotFound`` once it expired or
        was dropped (or is another pool's or token's)."""
        ...

    async def drop_snapshot(self, snapshot: Snapshot | str) -> None:
        """Forget a snapshot; one already gone is not an error."""
        ...

    def statistics(self) -> PoolStatistics:
        """A snapshot of its counters and population."""
        ...
