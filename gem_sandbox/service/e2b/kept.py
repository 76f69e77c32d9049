"""What the e2b-compatible endpoint keeps beside leases: paused sandboxes and e2b snapshots,
each a pool :class:`~gem_sandbox.sandbox.snapshots.Snapshot` with what e2b shows of it.

A paused sandbox holds no lease (so no capacity): its state is a snapshot, its record keeps
its id, access token, metadata and env, and resuming restores the snapshot into a new lease
under the same id. An e2b snapshot is a template of the key's token: creating a sandbox with
its id (or name) as the template restores it. Both are the token's own: another token's are
indistinguishable from none. A snapshot stays in the pool of the runtime that took it (an
operator's template has its own), so restores and drops go there.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
import weakref
from dataclasses import dataclass, field

from gem_sandbox.runtime import LeasedSandbox, Runtime
from gem_sandbox.sandbox.errors import SnapshotUnsupported
from gem_sandbox.sandbox.snapshots import Snapshot
from gem_sandbox.service.access import Tenant
from gem_sandbox.service.e2b.state import E2bSandbox
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.leases import Lease
from gem_sandbox.service.state import Service


@dataclass(eq=False)
class Saved:
    """A pool snapshot of one token's, and the runtime whose pool keeps it."""

    tenant: Tenant
    snapshot: Snapshot
    runtime: Runtime | None  # None: the service's
    state: E2bSandbox  # the sandbox's record when it was taken
    sandbox_id: str  # the sandbox it was taken from
    names: list[str] = field(default_factory=list)
    started: float = 0.0  # when the sandbox it was taken from started (a paused one's)


@dataclass
class Kept:
    paused: dict[str, Saved] = field(default_factory=dict)  # by sandbox id
    snapshots: dict[str, Saved] = field(default_factory=dict)  # e2b snapshots, by id


_KEPT: weakref.WeakKeyDictionary[Service, Kept] = weakref.WeakKeyDictionary()


def kept(service: Service) -> Kept:
    """The service's paused sandboxes and snapshots (kept as long as the service lives)."""
    return _KEPT.setdefault(service, Kept())


def copied(state: E2bSandbox, access_token: str | None = None) -> E2bSandbox:
    """A restored sandbox's record from ``state``: the same template, metadata, env and code
    contexts (their kernels are carried; a JavaScript one's process is not), a new access
    token unless told, no commands, watchers or metrics."""
    contexts = {key: dataclasses.replace(context, node=None) for key, context in state.contexts.items()}
    token = access_token or secrets.token_urlsafe(24)
    return E2bSandbox(state.template, token, dict(state.metadata), dict(state.env), contexts)


async def snapshot_of(lease: Lease, ttl: float) -> Snapshot:
    """A snapshot of an e2b sandbox's state; 400 when it holds what a snapshot cannot carry
    (not 409: on pause the SDK reads that as "already paused")."""
    if lease.e2b is not None and lease.e2b.commands:
        raise Problem(400, "snapshot_unsupported", "the sandbox has running commands, which a snapshot cannot carry; kill them first")
    try:
        return await lease.sandbox.snapshot(ttl)
    except SnapshotUnsupported as exc:
        raise Problem(400, "snapshot_unsupported", f"{exc}; end it first") from None


async def restore(
    service: Service, saved: Saved, timeout: float, state: E2bSandbox, lease_id: str | None = None
) -> Lease:
    """A new e2b lease of the snapshot's token, holding its state (named ``lease_id``, if given)."""
    runtime = saved.runtime or service.runtime

    async def make() -> list[LeasedSandbox]:
        return [await (await runtime.pool()).restore(saved.snapshot)]

    ids = None if lease_id is None else [lease_id]
    [lease] = await service.leases.adopt(saved.tenant, 1, make, timeout, renews=False, runtime=saved.runtime, ids=ids)
    lease.e2b = state
    return lease


async def drop(service: Service, saved: Saved) -> None:
    await (saved.runtime or service.runtime).drop_snapshot(saved.snapshot)


def snapshots_of(service: Service, tenant: Tenant) -> list[Saved]:
    """The token's e2b snapshots (forgetting expired ones)."""
    snapshots = kept(service).snapshots
    for key in [key for key, saved in snapshots.items() if saved.snapshot.expires <= time.time()]:
        del snapshots[key]
    return [saved for saved in snapshots.values() if saved.tenant is tenant]


def find_snapshot(service: Service, tenant: Tenant, name: str) -> Saved | None:
    """The token's e2b snapshot with this id or name."""
    return next((s for s in snapshots_of(service, tenant) if name in (s.snapshot.id, *s.names)), None)


def paused(service: Service, tenant: Tenant, sandbox_id: str) -> Saved | None:
    saved = kept(service).paused.get(sandbox_id)
    return saved if saved is not None and saved.tenant is tenant else None


async def resume(service: Service, saved: Saved, timeout: float) -> Lease:
    """A paused sandbox running again under its own id and access token (the SDK's object
    for it keeps both); its snapshot is dropped once restored."""
    records = kept(service).paused
    del records[saved.sandbox_id]  # a connect meanwhile finds it no longer paused
    try:
        state = copied(saved.state, saved.state.access_token)
        lease = await restore(service, saved, timeout, state, saved.sandbox_id)
    except BaseException:
        records[saved.sandbox_id] = saved
        raise
    lease.started = saved.started
    await drop(service, saved)
    return lease


def paused_of(service: Service, tenant: Tenant) -> list[Saved]:
    """The token's paused sandboxes (forgetting those whose snapshot expired)."""
    records = kept(service).paused
    for key in [key for key, saved in records.items() if saved.snapshot.expires <= time.time()]:
        del records[key]
    return [saved for saved in records.values() if saved.tenant is tenant]
