"""A pool of warm sandboxes: leases, recycling, and every sandbox's life from launch to kill.

Life of a sandbox::

    launch -> idle -> leased -> (release) -> verified reset -> idle  (or destroy -> refill)
                         `-> (a stateless run that left it clean) -> idle

Everything the pool does in the background lives in one task group owned by the pool: the
supervisor (:mod:`.supervisor`: refills to ``min_idle`` plus demand, health checks), each
sandbox's protocol reader, each launch, probe and reset. Leaving ``async with pool`` kills
every sandbox the pool made, whatever state it is in.

Callers wait in a fair, bounded line (:mod:`.waiters`), each at most ``acquire_timeout``.

Liveness: every sandbox tells the pool when it dies (its ``on_death`` hook), so a dead idle
sandbox leaves the idle set at once and a replacement starts; and ``acquire`` checks the one
it hands out, discarding a dead one and taking the next, so a caller never gets a sandbox
whose agent stream already failed. Health pings remain for agents that hang without dying.

Resets: at most :func:`resets_at_once` run together, the rest wait their turn. A reset kills
the tenant's processes and empties its dirs: CPU and kernel work (unmapping a kernel's memory,
freeing its pages) that hundreds of releases at once would only slow down for each other,
until every one overran its timeout. A turn's ``reset_timeout`` starts when its reset does,
so a sandbox is never retired for having waited in line; one whose reset fails or overruns
is retired (killed and replaced), never handed out.
"""

from __future__ import annotations

import enum
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from gem_sandbox.sandbox.backends.base import POOL_LABEL, Backend
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import AcquireTimeout, PoolClosed, SandboxError, SandboxUnavailable
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import forks
from gem_sandbox.sandbox.pool.config import PoolConfig
from gem_sandbox.sandbox.pool.seats import Seats
from gem_sandbox.sandbox.pool.statistics import Counters, PoolStatistics
from gem_sandbox.sandbox.pool.supervisor import Supervisor
from gem_sandbox.sandbox.pool.waiters import WaitQueue
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sandbox.snapshots import Snapshot, SnapshotStore

if TYPE_CHECKING:
    from gem_sandbox.sandbox.protocols import LeasedSandbox, Pool

log = logging.getLogger(__name__)
_pool_numbers = itertools.count(1)

LAUNCH_TIMEOUT = 30.0  # seconds a launched agent has to say hello
PROBE_TIMEOUT = 5.0  # seconds an idle agent has to answer a health ping
RESETS_PER_CPU = 2  # one resetting while another waits on the kernel keeps a core busy


def resets_at_once() -> int:
    """How many resets a pool runs together: enough to keep this host's cores busy."""
    return max(2, RESETS_PER_CPU * len(os.sched_getaffinity(0)))


@asynccontextmanager
async def leased(pool: Pool, timeout: float | None) -> AsyncIterator[LeasedSandbox]:
    """What every pool's ``lease()`` is (this one's, the remote and the Ray pools'): a sandbox
    from ``pool.acquire``, given back to ``pool.release`` even when the block is cancelled."""
    sandbox = await pool.acquire(timeout)
    try:
        yield sandbox
    finally:
        with anyio.CancelScope(shield=True):
            await pool.release(sandbox)


class PoolState(str, enum.Enum):
    NEW = "new"
    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


@dataclass(eq=False)
class _Slot:
    sandbox: Sandbox
    born: float = field(default_factory=time.monotonic)
    uses: int = 0
    destroyed: bool = False  # _destroy() ran (or runs): the one kill this sandbox gets


class SandboxPool:
    """``async with SandboxPool(backend) as pool: async with pool.lease() as sb: ...``

    A pool is opened once: entering it a second time (or after it closed) raises."""

    def __init__(self, backend: Backend, config: PoolConfig | None = None, *, name: str | None = None) -> None:
        self.backend = backend
        self.config = config or PoolConfig()
        self.name = name or f"{os.getpid()}-{next(_pool_numbers)}"
        self.state = PoolState.NEW
        self._counters = Counters()
        self._idle: deque[_Slot] = deque()
        self._leased: dict[int, _Slot] = {}  # id(sandbox) -> slot
        self._all: set[_Slot] = set()
        self._probing: set[_Slot] = set()
        self._waiters: WaitQueue[_Slot] = WaitQueue(self.config.max_waiters)
        self._seats = Seats(self.config.runs_per_sandbox)
        self._starting = 0
        self._recycling = 0
        self._consecutive_failures = 0
        self._supervisor = Supervisor(
            self.config.health_interval,
            shortfall=self._shortfall,
            launch=self._start_launch,
            check_health=self._check_health,
            failing=lambda: self._consecutive_failures > 0,
        )
        self._tg: TaskGroup | None = None
        self._resets: anyio.CapacityLimiter | None = None  # made in the pool's event loop
        self.snapshots = SnapshotStore()

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> SandboxPool:
        if self.state is not PoolState.NEW:
            raise RuntimeError(f"pool {self.name} is {self.state.value}; a pool is opened once")
        self.state = PoolState.OPENING
        try:
            self._resets = anyio.CapacityLimiter(resets_at_once())
            reaped = await self.backend.reap_orphans()
            if reaped:
                log.warning("removed %d sandboxes left by owners that died", reaped)
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
        except BaseException:
            self.state = PoolState.CLOSED
            raise
        self.state = PoolState.OPEN
        self._tg.start_soon(self._supervisor.run)
        self._supervisor.poke()  # fill to min_idle now, not at the first health check
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        await self.aclose()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(*exc)

    async def aclose(self) -> None:
        """Fail the waiters and kill every sandbox; idempotent."""
        if self.state is not PoolState.OPEN:
            return
        self.state = PoolState.CLOSING
        self._waiters.fail_all(PoolClosed(f"pool {self.name} was closed"))
        self._seats.wake_all()  # runs waiting for a seat see the pool closed
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for slot in list(self._all):
                    tg.start_soon(self._destroy, slot, False)
        self._idle.clear()
        self._leased.clear()
        self.snapshots.clear()
        self.state = PoolState.CLOSED

    @property
    def backend_name(self) -> str:
        """The name of the backend its sandboxes run on."""
        return self.backend.name

    @property
    def open(self) -> bool:
        return self.state is PoolState.OPEN

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until ``min_idle`` sandboxes are warm."""
        with anyio.fail_after(timeout):
            while len(self._idle) < self.config.idle_target:
                self._check_open()
                await anyio.sleep(0.01)

    def statistics(self) -> PoolStatistics:
        """A fresh snapshot of the counters and the current population."""
        c = self._counters
        return PoolStatistics(
            launched=c.launched,
            leases=c.leases,
            waits=c.waits,
            resets=c.resets,
            clean_returns=c.clean_returns,
            replacements=c.replacements,
            launch_failures=c.launch_failures,
            acquire_timeouts=c.acquire_timeouts,
            idle=len(self._idle),
            leased=len(self._leased),
            starting=self._starting,
            recycling=self._recycling,
            waiting=len(self._waiters),
        )

    # -- leases ------------------------------------------------------------------------
    async def acquire(self, timeout: float | None = None) -> Sandbox:
        """A live sandbox for exclusive use until :meth:`release`. Raises
        :class:`AcquireTimeout` when none frees up in time and :class:`SandboxUnavailable`
        when none can be started. A sandbox that died while idle (or on its way to this
        caller) is never handed out: it is replaced and the caller gets the next one."""
        self._check_open()
        limit = self.config.acquire_timeout if timeout is None else timeout
        deadline = anyio.current_time() + limit
        while True:
            slot = await self._next_slot(deadline, limit)
            if slot.sandbox.alive:
                return self._lease(slot)
            self._discard(slot)  # no await since it was chosen: nothing can die in between

    async def _next_slot(self, deadline: float, limit: float) -> _Slot:
        """An idle slot, or the first one handed over while this caller waits in line."""
        if self._idle and not len(self._waiters):
            return self._idle.popleft()
        self._counters.waits += 1
        self._supervisor.poke()
        slot = await self._waiters.wait(max(0.0, deadline - anyio.current_time()), self._offer)
        if slot is None:
            self._counters.acquire_timeouts += 1
            raise AcquireTimeout(
                f"no sandbox became free within {limit:g} s ({len(self._leased)} leased, "
                f"max_size={self.config.max_size}); raise max_size or release leases sooner"
            )
        return slot

    async def release(self, sandbox: Sandbox) -> None:
        """Hand a leased sandbox back; it is reset and probed in the background.

        After the pool closed this is a no-op: closing killed every sandbox already, and a
        lease that outlives its pool (``async with pool.lease()`` around the pool's exit)
        must not turn its cleanup into an error. While the pool is open, releasing a sandbox
        it did not lease, or releasing one twice, raises :class:`SandboxError`: that is a bug
        in the caller (a double release could hand one sandbox to two tenants), not a state
        to paper over."""
        await self._return(sandbox, clean=False)

    async def _return(self, sandbox: Sandbox, clean: bool) -> None:
        """:meth:`release`; a sandbox the agent just verified ``clean`` skips the reset."""
        slot = self._leased.pop(id(sandbox), None)
        if self.state is not PoolState.OPEN:
            if slot is not None:
                await self._destroy(slot, False)
            return
        if slot is None:
            raise SandboxError("release() of a sandbox this pool did not lease (or released twice)")
        if clean and sandbox.alive and not self._expired(slot):
            self._counters.clean_returns += 1
            self._offer(slot)
            return
        self._recycling += 1
        assert self._tg is not None
        self._tg.start_soon(self._recycle, slot)

    def lease(self, timeout: float | None = None) -> AbstractAsyncContextManager[Sandbox]:
        """``async with pool.lease() as sandbox:`` acquired, and released however the block ends."""
        return leased(self, timeout)

    # -- snapshots and forks (see forks.py) -----------------------------------------------
    async def snapshot_of(self, sandbox: Sandbox, ttl: float | None = None) -> Snapshot:
        """A leased sandbox's state, kept here for ``ttl`` seconds."""
        self._check_leased(sandbox)
        manifest, data = await forks.capture(sandbox)
        return self.snapshots.keep(manifest, data, ttl)

    async def fork(self, sandbox: Sandbox, n: int) -> list[Sandbox]:
        """``n`` new leases starting from a leased sandbox's state now, or none."""
        self._check_leased(sandbox)
        _, data = await forks.capture(sandbox)
        return await forks.load_into_leases(self, data, n, self._room())

    async def restore(self, snapshot: Snapshot | str, timeout: float | None = None) -> Sandbox:
        """A new lease holding a snapshot's state (release it as any lease). Raises what
        leasing raises (``AcquireTimeout``...), or what loading the state does."""
        self._check_open()
        data = self.snapshots.state(snapshot)
        sandbox = await self.acquire(timeout)
        try:
            await sandbox.load(data)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.release(sandbox)
            raise
        return sandbox

    async def drop_snapshot(self, snapshot: Snapshot | str) -> None:
        """Forget a snapshot; one already gone is not an error."""
        self.snapshots.drop(snapshot)

    def _check_leased(self, sandbox: Sandbox) -> None:
        self._check_open()
        if id(sandbox) not in self._leased:
            raise SandboxError("snapshot or fork of a sandbox this pool has not leased (or released already)")

    def _room(self) -> int:
        return self.config.max_size - len(self._leased)

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

        The agent checks the sandbox right after the run (a few reads of ``/proc`` and the
        dirs): a run that wrote no file and left nothing behind hands it straight to the next
        caller, and only one that did costs a reset. Runs with ``files`` always reset. With
        ``runs_per_sandbox > 1`` runs share sandboxes (see :mod:`.seats`); the last one out
        of a sandbox gives it back."""
        if files:
            async with self.lease() as sandbox:
                await sandbox.write_files(files)
                return await sandbox.run(code, language, stdin=stdin, timeout=timeout, env=env, limits=limits)
        sharing = self.config.runs_per_sandbox > 1
        sandbox = await (self._seat() if sharing else self.acquire())
        clean = False
        try:
            result, clean = await sandbox.run_stateless(
                code,
                language,
                stdin=stdin,
                timeout=timeout,
                env=env,
                limits=limits,
                shared=sharing and self._seats.shared(sandbox),
            )
        finally:
            if not sharing or self._seats.leave(sandbox):
                with anyio.CancelScope(shield=True):
                    await self._return(sandbox, clean)
        return result

    async def _seat(self) -> Sandbox:
        """A seat for one stateless run: on a lent sandbox with room, else on one the pool
        lends now (idle, or launched while the pool may grow), else the first of either to
        come free."""
        self._check_open()
        limit = self.config.acquire_timeout
        deadline = anyio.current_time() + limit
        while True:
            sandbox = self._seats.take()
            if sandbox is not None:
                return sandbox
            if (self._idle and not len(self._waiters)) or len(self._all) + self._starting < self.config.max_size:
                sandbox = await self.acquire(max(0.0, deadline - anyio.current_time()))
                self._seats.lend(sandbox)
                return sandbox
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await self._seats.wait()
            if anyio.current_time() >= deadline:
                self._counters.acquire_timeouts += 1
                raise AcquireTimeout(
                    f"no sandbox or seat became free within {limit:g} s ({len(self._leased)} leased, "
                    f"max_size={self.config.max_size}); raise max_size or runs_per_sandbox"
                )
            self._check_open()

    # -- internals ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.state is not PoolState.OPEN:
            raise PoolClosed(f"pool {self.name} is {self.state.value}")

    def _lease(self, slot: _Slot) -> Sandbox:
        slot.uses += 1
        self._leased[id(slot.sandbox)] = slot
        slot.sandbox.lender = self
        self._counters.leases += 1
        if self._shortfall():  # the idle set needs topping up; else waking it is wasted work on every call
            self._supervisor.poke()
        return slot.sandbox

    def _offer(self, slot: _Slot) -> None:
        """A ready sandbox goes to the longest waiter, else to the idle set; a dead one is
        replaced instead."""
        if not slot.sandbox.alive:
            self._discard(slot)
        elif not self._waiters.hand(slot):
            self._idle.append(slot)
            self._seats.changed()  # shared runs waiting for room may take it

    async def _recycle(self, slot: _Slot) -> None:
        try:
            if not self._expired(slot) and await self._reset(slot) and self.open:
                self._offer(slot)
                return
            await self._destroy(slot, self.open)  # at shutdown nothing is replaced
        finally:
            self._recycling -= 1

    async def _reset(self, slot: _Slot) -> bool:
        """Reset ``slot``'s sandbox in its turn; whether it came back clean. The agent answers
        a reset only once it verified the sandbox clean: that is the probe."""
        assert self._resets is not None
        async with self._resets:
            sandbox = slot.sandbox
            if not (sandbox.alive and self.open):  # it died, or the pool closed, in line
                return False
            try:
                await sandbox.reset(timeout=self.config.reset_timeout)
            except (SandboxError, TimeoutError) as exc:
                if self.open:  # at shutdown the pool itself closed it
                    log.warning("sandbox %s failed its reset (%s); retiring it", sandbox.id, exc)
                return False
        self._counters.resets += 1
        return True

    def _discard(self, slot: _Slot) -> None:
        """Destroy a dead sandbox that is in no list any more, and have it replaced."""
        if not self.open:
            return  # aclose() kills everything in ``_all``
        self._all.discard(slot)  # at once, so the supervisor counts the replacement in
        assert self._tg is not None
        self._tg.start_soon(self._destroy, slot, True)

    def _died(self, slot: _Slot) -> None:
        """A sandbox's ``on_death`` hook: an idle one is dropped and replaced now. Leased,
        recycling and starting ones are handled where they are (release, reset, launch)."""
        if not self.open or slot not in self._idle:
            return
        self._idle.remove(slot)
        log.warning("idle %r; replacing it", slot.sandbox)
        self._discard(slot)

    def _expired(self, slot: _Slot) -> bool:
        """Used or aged enough to be replaced rather than handed on."""
        return slot.uses >= self.config.max_uses or self._too_old(slot)

    def _too_old(self, slot: _Slot) -> bool:
        return time.monotonic() - slot.born > self.config.max_lifetime

    async def _destroy(self, slot: _Slot, replace_it: bool) -> None:
        if slot.destroyed:
            return
        slot.destroyed = True
        self._all.discard(slot)
        self._probing.discard(slot)
        if slot in self._idle:
            self._idle.remove(slot)
        if replace_it:
            self._counters.replacements += 1
            self._supervisor.poke()
        with anyio.CancelScope(shield=True):
            try:
                await slot.sandbox.close()
            except Exception as exc:  # a sandbox that can't be closed politely is killed by close()
                log.warning("closing sandbox %s failed: %s", slot.sandbox.id, exc)

    def _shortfall(self) -> int:
        """Launches to start now: everyone served plus ``min_idle`` spare, up to ``max_size``."""
        if not self.open:
            return 0
        cfg = self.config
        demand = len(self._leased) + self._recycling + len(self._waiters) + cfg.idle_target
        return max(0, min(cfg.max_size, demand) - len(self._all) - self._starting)

    def _check_health(self) -> None:
        """Probe idle sandboxes in the background, one probe per sandbox at a time: probes
        never hold up the supervisor, since killing a dead box can wait on a daemon."""
        assert self._tg is not None
        for slot in list(self._idle):
            if slot not in self._probing:
                self._probing.add(slot)
                self._tg.start_soon(self._probe, slot)

    async def _probe(self, slot: _Slot) -> None:
        """Replace an idle sandbox that is dead, unresponsive or expired."""
        try:
            healthy = slot.sandbox.alive and not self._too_old(slot)
            if healthy:
                await slot.sandbox.ping(timeout=PROBE_TIMEOUT)
        except (SandboxError, TimeoutError):
            healthy = False
        finally:
            self._probing.discard(slot)
        if not healthy and slot in self._idle:
            await self._destroy(slot, True)

    def _start_launch(self) -> None:
        self._starting += 1
        assert self._tg is not None
        self._tg.start_soon(self._launch)

    async def _launch(self) -> None:
        cfg = self.config
        spec = replace(cfg.spec, labels={**cfg.spec.labels, POOL_LABEL: self.name})
        box = None
        try:
            box = await self.backend.launch(spec)
            sandbox = Sandbox(
                box, backend=self.backend.name, default_timeout=cfg.run_timeout, limits=cfg.limits, grace=cfg.grace
            )
            slot = _Slot(sandbox)
            sandbox.on_death = lambda _: self._died(slot)
            assert self._tg is not None
            with anyio.fail_after(LAUNCH_TIMEOUT):
                await self._tg.start(sandbox.serve)
        except BaseException as exc:  # cancelled mid-launch (pool closing) must not leak the box
            if box is not None:
                with anyio.CancelScope(shield=True):
                    await box.kill()
            if not isinstance(exc, Exception):
                raise
            self._launch_failed(exc)
            return
        finally:
            self._starting -= 1
        self._consecutive_failures = 0
        self._counters.launched += 1
        self._all.add(slot)
        if self.open:
            self._offer(slot)
        else:
            await self._destroy(slot, False)

    def _launch_failed(self, exc: BaseException) -> None:
        self._counters.launch_failures += 1
        self._consecutive_failures += 1
        log.warning("launching a %s sandbox failed: %s", self.backend.name, exc)
        if self._consecutive_failures >= self.config.launch_attempts:
            error = SandboxUnavailable(
                f"{self._consecutive_failures} launches of a {self.backend.name} sandbox failed in a row; "
                f"last error: {exc}"
            )
            error.__cause__ = exc
            self._waiters.fail_all(error)
        self._supervisor.poke()

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<SandboxPool {self.name} {self.backend.name} {self.state.value} "
            f"idle={s.idle} leased={s.leased} starting={s.starting}>"
        )
