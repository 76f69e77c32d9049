"""Sandboxes held by clients between requests: :class:`Leases`.

A lease is a pool lease with an owner and a deadline. Each request on it renews the deadline
(``ttl`` seconds after the request ends) and holds it off while in flight; a lease past its
deadline is ended by :meth:`Leases.reap`, which runs in the service's task group, so a client
that crashed or forgot gives its sandbox back to the pool. A lease that does not ``renew``
(e2b's sandboxes) has an absolute deadline instead, which requests neither push back nor hold
off. Ids are unguessable, and an id is looked up together with its owner: another token's
lease is indistinguishable from none.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from gem_sandbox.runtime import LeasedSandbox, Runtime
from gem_sandbox.service.access import Tenant
from gem_sandbox.service.admission import Admission, Ticket
from gem_sandbox.sandbox.snapshots import Snapshot
from gem_sandbox.service.errors import Problem, not_found

if TYPE_CHECKING:
    from gem_sandbox.service.e2b.state import E2bSandbox

REAP_INTERVAL = 1.0  # seconds between looks for expired leases


@dataclass(eq=False)
class Lease:
    id: str
    tenant: Tenant
    sandbox: LeasedSandbox
    ttl: float
    renews: bool = True  # False: the deadline is absolute, as e2b's timeout is
    deadline: float = field(default=0.0)
    busy: int = 0
    started: float = field(default_factory=time.time)  # wall clock, for the APIs that show it
    e2b: E2bSandbox | None = None  # what an e2b sandbox keeps (docs/service.md, e2b-compatible endpoint)
    runtime: Runtime | None = None  # the one it came from, when not the service's (an e2b template's)
    ticket: Ticket | None = None  # the pool capacity it holds until it ends

    def __post_init__(self) -> None:
        self.expire_in(self.ttl)

    def renew(self) -> None:
        if self.renews:
            self.expire_in(self.ttl)

    def expire_in(self, seconds: float) -> None:
        """Set the deadline ``seconds`` from now, and make that the lease's ttl."""
        self.ttl = seconds
        self.deadline = time.monotonic() + seconds

    def describe(self) -> dict[str, Any]:
        """The ``Lease`` object of the API."""
        return {
            "id": self.id,
            "backend": self.sandbox.backend,
            "languages": self.sandbox.hello.get("languages", []),
            "isolation": self.sandbox.hello.get("isolation"),
            "alive": self.sandbox.alive,
            "ttl": self.ttl,
            "expires_in": round(max(0.0, self.deadline - time.monotonic()), 3) if not self.busy or not self.renews else self.ttl,
        }


class Leases:
    def __init__(self, runtime: Runtime, default_ttl: float, max_ttl: float, admission: Admission) -> None:
        self.runtime = runtime
        self.admission = admission
        self.default_ttl = default_ttl
        self.max_ttl = max_ttl
        self.expired = 0  # leases ended by their deadline, for the metrics
        self._by_id: dict[str, Lease] = {}
        self._snapshots: dict[str, tuple[Tenant, Snapshot]] = {}  # by id: whose, and what

    def __len__(self) -> int:
        return len(self._by_id)

    async def create(
        self, tenant: Tenant, ttl: float | None, *, renews: bool = True, runtime: Runtime | None = None
    ) -> Lease:
        """A sandbox of ``tenant``'s own (from ``runtime``, the service's by default), holding
        a whole sandbox's share of the pool's capacity while it lives; 429 past its
        ``max_leases``, 503 when the capacity does not come free in time."""
        source = runtime or self.runtime

        async def acquire() -> list[LeasedSandbox]:
            return [await source.acquire()]

        [lease] = await self.adopt(tenant, 1, acquire, ttl, renews=renews, runtime=runtime)
        return lease

    async def adopt(
        self,
        tenant: Tenant,
        n: int,
        make: Callable[[], Awaitable[Sequence[LeasedSandbox]]],
        ttl: float | None,
        *,
        renews: bool = True,
        runtime: Runtime | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[Lease]:
        """Leases of ``tenant`` for the ``n`` sandboxes ``make`` gives (a new one, a
        restore, a fork's branches), each counted against its ``max_leases`` (429) and
        holding a whole sandbox's share of the capacity (503 when it does not come free).
        ``ids`` names them (a resumed e2b sandbox keeps its id); by default each gets a new one."""
        if tenant.leases + n > tenant.policy.max_leases:
            raise Problem(
                429,
                "too_many_leases",
                f"token {tenant.name} holds {tenant.leases} sandboxes and its limit is "
                f"{tenant.policy.max_leases}; delete some first",
                retry_after=1,
            )
        tenant.leases += n  # counted before the wait, so concurrent creates cannot overshoot
        tickets: list[Ticket] = []
        try:
            for _ in range(n):
                tickets.append(await self.admission.take(self.runtime.config.runs_per_sandbox))
            sandboxes = await make()
        except BaseException:
            tenant.leases -= n
            for ticket in tickets:
                ticket.release()
            raise
        leases = []
        for index, (sandbox, ticket) in enumerate(zip(sandboxes, tickets)):
            lease_id = ids[index] if ids is not None else "sb-" + secrets.token_urlsafe(12)
            lease = Lease(lease_id, tenant, sandbox, self.capped(ttl or self.default_ttl), renews)
            lease.ticket, lease.runtime = ticket, runtime
            self._by_id[lease.id] = lease
            leases.append(lease)
        return leases

    async def restore(self, tenant: Tenant, snapshot_id: str, ttl: float | None) -> Lease:
        """A lease of ``tenant``'s starting from one of its snapshots."""
        snapshot = self.snapshot(tenant, snapshot_id)

        async def restore() -> list[LeasedSandbox]:
            return [await (await self.runtime.pool()).restore(snapshot)]

        [lease] = await self.adopt(tenant, 1, restore, ttl)
        return lease

    async def fork(
        self, tenant: Tenant, lease_id: str, n: int, *, ttl: float | None = None, renews: bool = True
    ) -> list[Lease]:
        """``n`` leases of ``tenant``'s, each starting from its lease's state now (from the
        same runtime; ``ttl``: the parent's by default); 409 ``fork_failed`` (never a 503,
        which would tell the client the parent failed) when there is no room for them."""
        parent = self.find(tenant, lease_id)
        runtime = parent.runtime or self.runtime
        room = runtime.config.max_size - runtime.statistics().leased
        if n > room:
            raise Problem(409, "fork_failed", f"the pool has room for {room} more sandboxes, not {n}; end some leases first")
        async with self.using(tenant, lease_id) as sandbox:
            try:
                return await self.adopt(
                    tenant, n, lambda: sandbox.fork(n), ttl or parent.ttl, renews=renews, runtime=parent.runtime
                )
            except Problem as exc:
                if exc.status != 503:
                    raise
                raise Problem(409, "fork_failed", f"no room for {n} branches: {exc.message}") from None

    async def take_snapshot(self, tenant: Tenant, lease_id: str, ttl: float | None) -> Snapshot:
        """A snapshot of a lease's sandbox, kept for ``ttl`` seconds (capped as leases are)
        and seen by ``tenant`` only."""
        async with self.using(tenant, lease_id) as sandbox:
            snapshot = await sandbox.snapshot(ttl and self.capped(ttl))
        self.keep_snapshot(tenant, snapshot)
        return snapshot

    def keep_snapshot(self, tenant: Tenant, snapshot: Snapshot) -> None:
        """Record ``tenant`` as the owner of a snapshot its pool keeps (forgetting expired ones)."""
        now = time.time()
        for key in [k for k, (_, s) in self._snapshots.items() if s.expires <= now]:
            del self._snapshots[key]
        self._snapshots[snapshot.id] = (tenant, snapshot)

    def snapshots_of(self, tenant: Tenant) -> list[Snapshot]:
        now = time.time()
        return [s for owner, s in self._snapshots.values() if owner is tenant and s.expires > now]

    async def drop_snapshot(self, tenant: Tenant, snapshot_id: str) -> None:
        snapshot = self.snapshot(tenant, snapshot_id)
        del self._snapshots[snapshot.id]
        await (await self.runtime.pool()).drop_snapshot(snapshot)

    def snapshot(self, tenant: Tenant, snapshot_id: str) -> Snapshot:
        """One of ``tenant``'s snapshots (404 for another token's, as for one that never was)."""
        owner, snapshot = self._snapshots.get(snapshot_id, (None, None))
        if owner is not tenant or snapshot is None or snapshot.expires <= time.time():
            raise not_found(f"snapshot {snapshot_id}")
        return snapshot

    def capped(self, ttl: float) -> float:
        return min(ttl, self.max_ttl)

    def get(self, lease_id: str) -> Lease | None:
        """The lease, whoever holds it: for routes that authenticate by the lease itself."""
        return self._by_id.get(lease_id)

    def find(self, tenant: Tenant, lease_id: str) -> Lease:
        lease = self._by_id.get(lease_id)
        if lease is None or lease.tenant is not tenant:
            raise not_found(f"sandbox {lease_id}")
        return lease

    def every(self) -> list[Lease]:
        """Every lease, whoever holds it: for routes that find theirs by a secret of its own."""
        return list(self._by_id.values())

    def owned_by(self, tenant: Tenant) -> list[Lease]:
        return [lease for lease in self._by_id.values() if lease.tenant is tenant]

    @asynccontextmanager
    async def using(self, tenant: Tenant, lease_id: str) -> AsyncIterator[LeasedSandbox]:
        """The lease's sandbox for one request: renewed after, and not reaped meanwhile unless
        its deadline is absolute."""
        lease = self.find(tenant, lease_id)
        lease.busy += 1
        try:
            yield lease.sandbox
        finally:
            lease.busy -= 1
            lease.renew()

    async def delete(self, tenant: Tenant, lease_id: str) -> None:
        await self._end(self.find(tenant, lease_id))

    async def reap(self) -> None:
        """End leases past their deadline, forever (run it in a task group)."""
        while True:
            await anyio.sleep(REAP_INTERVAL)
            now = time.monotonic()
            for lease in [x for x in self._by_id.values() if x.deadline <= now and not (x.busy and x.renews)]:
                self.expired += 1
                await self._end(lease)

    async def aclose(self) -> None:
        for lease in list(self._by_id.values()):
            await self._end(lease)

    async def _end(self, lease: Lease) -> None:
        """Give the sandbox back (the pool resets it); requests still in flight on it end as
        the reset kills their processes."""
        if self._by_id.pop(lease.id, None) is None:
            return
        lease.tenant.leases -= 1
        try:
            with anyio.CancelScope(shield=True):
                await (lease.runtime or self.runtime).release(lease.sandbox)
        finally:
            if lease.ticket is not None:
                lease.ticket.release()
