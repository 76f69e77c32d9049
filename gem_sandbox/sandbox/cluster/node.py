"""One node's sandbox pool, as the Ray actor that serves it: :class:`NodePool`.

:mod:`.placement` places one on each node of the cluster, pinned there (hard node affinity),
detached so it outlives the command that placed it, and named ``<pools>@<node id>`` in the
:data:`NAMESPACE` namespace, where clients (:mod:`.client`) find it. It owns a
:class:`~gem_sandbox.sandbox.pool.SandboxPool` on its node's backend, opened by its first call
in a task of its own on the actor's event loop (Ray's async actors run on asyncio).

It hands its sandboxes out as leases: an unguessable id, and a deadline that each call on the
lease and each heartbeat of its client push ``lease_ttl`` seconds on, so a client that dies
gives its sandboxes back within that time. Runs come back as the pool's own
:class:`~gem_sandbox.sandbox.result.ExecResult` and errors as the pool raised them; the actor
adds no verdict of its own. Answers that start runs or leases carry the node's free room, which
is how clients choose where the next one goes without polling.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import ray

from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import PoolClosed, SandboxCrashed
from gem_sandbox.sandbox.pool import SandboxPool
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot

log = logging.getLogger(__name__)

NAMESPACE = "gem_sandbox"  # the Ray namespace of every pool actor
REAP_INTERVAL = 1.0  # seconds between looks for leases past their deadline
#: What a client may call on a leased sandbox: its public API, nothing else.
OPERATIONS = frozenset(
    {"run", "shell", "kernel_exec", "kernel_restart", "write_files", "read_files", "reset", "ping", "snapshot"}
)


def actor_name(pools: str, node_id: str) -> str:
    """The name of the pool actor of the set ``pools`` on node ``node_id``."""
    return f"{pools}@{node_id}"


@dataclass(frozen=True)
class NodeSettings:
    """What every pool actor of a set is made with. ``options`` are pool options by name (any
    :class:`~gem_sandbox.sandbox.pool.PoolConfig`, ``SandboxSpec`` or ``RunLimits`` field),
    applied over the node's own ``GEM_SANDBOX_*`` settings."""

    backend: str = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)
    lease_ttl: float = 120.0

    def __post_init__(self) -> None:
        defaults.with_options(defaults.pool_config(), dict(self.options))  # a bad option fails here
        if self.lease_ttl <= 0:
            raise ValueError(f"lease_ttl must be positive, got {self.lease_ttl!r}")


@dataclass(eq=False)
class _Lease:
    sandbox: Sandbox
    ttl: float
    deadline: float = 0.0
    busy: int = 0

    def __post_init__(self) -> None:
        self.renew()

    def renew(self) -> None:
        self.deadline = time.monotonic() + self.ttl


class NodePool:
    """The actor's class (:mod:`.placement` makes it a Ray actor): this node's pool and the
    leases its clients hold."""

    def __init__(self, pools: str, node_settings: NodeSettings) -> None:
        self.pools = pools
        self.settings = node_settings
        self.pool: SandboxPool | None = None
        self._leases: dict[str, _Lease] = {}
        self._opened: anyio.Event | None = None
        self._stop: anyio.Event | None = None
        self._closed: anyio.Event | None = None
        self._failure: BaseException | None = None  # why the pool could not open
        self._serving: asyncio.Task[None] | None = None
        self._expired = 0

    # -- lifecycle ---------------------------------------------------------------------
    async def ready(self, timeout: float = 60.0) -> dict[str, Any]:
        """Open the pool if no call has yet, wait until its ``min_idle`` sandboxes are warm,
        and say what this node serves (:meth:`describe`)."""
        pool = await self._open()
        await pool.wait_ready(timeout)
        return self.describe()

    def describe(self) -> dict[str, Any]:
        """This actor's node, backend, size, free room, and its pool's counters."""
        pool = self.pool
        statistics = pool.statistics().as_dict() if pool is not None else {}
        return {
            "pools": self.pools,
            "node_id": ray.get_runtime_context().get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "backend": pool.backend.name if pool is not None else None,
            "max_size": pool.config.max_size if pool is not None else 0,
            "free": self._free(),
            "lease_ttl": self.settings.lease_ttl,
            "leases_held": len(self._leases),
            "leases_expired": self._expired,
            "statistics": statistics,
            "failure": repr(self._failure) if self._failure is not None else None,
        }

    async def shutdown(self) -> None:
        """End every lease and close the pool (killing its sandboxes); the actor can then be
        killed with nothing left behind."""
        if self._stop is None:
            return
        self._stop.set()
        assert self._closed is not None
        await self._closed.wait()

    async def _open(self) -> SandboxPool:
        if self._opened is None:
            self._opened, self._stop, self._closed = anyio.Event(), anyio.Event(), anyio.Event()
            # The pool's task, the actor's for its whole life: an actor has no task group to
            # start it in, so it holds the task itself (the loop keeps only weak references).
            self._serving = asyncio.get_running_loop().create_task(self._serve())
        await self._opened.wait()
        if self.pool is None:
            raise PoolClosed(f"the pool of {self.pools} on this node is not open: {self._failure!r}")
        return self.pool

    async def _serve(self) -> None:
        """The pool's whole life: opened, reaped of expired leases, closed on :meth:`shutdown`."""
        assert self._opened is not None and self._stop is not None and self._closed is not None
        try:
            config = defaults.with_options(defaults.pool_config(), dict(self.settings.options))
            backend = await anyio.to_thread.run_sync(defaults.make_backend, self.settings.backend)
            async with SandboxPool(backend, config, name=f"ray-{self.pools}-{os.getpid()}") as pool:
                async with anyio.create_task_group() as tg:
                    self.pool = pool
                    self._opened.set()
                    tg.start_soon(self._reap)
                    await self._stop.wait()
                    tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    for lease_id in list(self._leases):
                        await self.release(lease_id)
        except Exception as exc:  # answered by every call, as the reason the pool is not open
            self._failure = exc
            log.exception("the pool of %s on this node failed", self.pools)
        finally:
            self.pool = None
            self._opened.set()
            self._closed.set()

    # -- stateless runs ----------------------------------------------------------------
    async def run(self, code: str, language: str, options: Mapping[str, Any]) -> tuple[ExecResult, int]:
        """One stateless run (:meth:`SandboxPool.run`), and the node's free room after it."""
        pool = await self._open()
        result = await pool.run(code, language, **options)
        return result, self._free()

    # -- leases ------------------------------------------------------------------------
    async def acquire(self, timeout: float | None) -> tuple[dict[str, Any], int]:
        """A lease on one of this node's sandboxes, and the node's free room after it."""
        pool = await self._open()
        return self._new_lease(await pool.acquire(timeout)), self._free()

    async def fork(self, lease_id: str, n: int) -> tuple[list[dict[str, Any]], int]:
        """Leases on ``n`` branches of a leased sandbox (see :meth:`SandboxPool.fork`)."""
        lease = self._lease(lease_id)
        lease.busy += 1
        try:
            branches = await lease.sandbox.fork(n)
        finally:
            lease.busy -= 1
            lease.renew()
        return [self._new_lease(sandbox) for sandbox in branches], self._free()

    async def restore(self, snapshot: Snapshot, timeout: float | None) -> tuple[dict[str, Any], int]:
        """A lease on a new sandbox holding a snapshot this node's pool keeps."""
        pool = await self._open()
        return self._new_lease(await pool.restore(snapshot, timeout)), self._free()

    async def drop_snapshot(self, snapshot: Snapshot) -> None:
        if self.pool is not None:
            await self.pool.drop_snapshot(snapshot)

    def _new_lease(self, sandbox: Sandbox) -> dict[str, Any]:
        lease_id = secrets.token_urlsafe(12)
        self._leases[lease_id] = _Lease(sandbox, self.settings.lease_ttl)
        return {"id": lease_id, "backend": sandbox.backend, "hello": dict(sandbox.hello)}

    async def call(self, lease_id: str, operation: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """``operation`` (one of :data:`OPERATIONS`) on a leased sandbox; renews the lease."""
        if operation not in OPERATIONS:
            raise ValueError(f"{operation!r} is not an operation of a sandbox; one of {sorted(OPERATIONS)}")
        lease = self._lease(lease_id)
        lease.busy += 1
        try:
            return await getattr(lease.sandbox, operation)(*args, **kwargs)
        finally:
            lease.busy -= 1
            lease.renew()

    def renew(self, lease_ids: Sequence[str]) -> list[str]:
        """A client's heartbeat: push its leases' deadlines on; answers the ids this node no
        longer holds (expired, or released by a :meth:`shutdown`)."""
        gone = []
        for lease_id in lease_ids:
            lease = self._leases.get(lease_id)
            if lease is None:
                gone.append(lease_id)
            else:
                lease.renew()
        return gone

    async def release(self, lease_id: str) -> int:
        """End a lease; its sandbox is reset for the next tenant. Idempotent. Answers the
        node's free room after it."""
        lease = self._leases.pop(lease_id, None)
        if lease is not None and self.pool is not None:
            with anyio.CancelScope(shield=True):
                await self.pool.release(lease.sandbox)
        return self._free()

    def _lease(self, lease_id: str) -> _Lease:
        lease = self._leases.get(lease_id)
        if lease is None:
            raise SandboxCrashed(
                f"lease {lease_id} is not held by {self.pools}'s pool on this node: it was released, or "
                f"expired after {self.settings.lease_ttl:.0f}s without a call or heartbeat from its client"
            )
        return lease

    async def _reap(self) -> None:
        while True:
            await anyio.sleep(REAP_INTERVAL)
            now = time.monotonic()
            for lease_id, lease in list(self._leases.items()):
                if lease.deadline <= now and not lease.busy:
                    self._expired += 1
                    log.warning("lease %s expired: its client sent nothing for %.0fs", lease_id, lease.ttl)
                    await self.release(lease_id)

    def _free(self) -> int:
        """Sandboxes this node can still lease without a wait: its size less those leased."""
        pool = self.pool
        if pool is None:
            return 0
        return pool.config.max_size - pool.statistics().leased

