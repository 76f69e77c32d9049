"""A pool of warm sandboxes with leases, recycling and a supervisor.

Life of a sandbox::

    launch -> idle -> leased -> (release) -> reset + probe -> idle  (or destroy -> refill)

Everything the pool does in the background lives in one task group owned by the pool: the
supervisor (refills to ``min_idle`` plus demand, health pings, lifetime expiry), each sandbox's
protocol reader, and each released sandbox's reset. Leaving ``async with pool`` kills every
sandbox the pool made, whatever state it is in.

Waiters are served strictly first come, first served; their number is bounded by
``max_waiters`` (backpressure), and each waits at most ``acquire_timeout``.

Liveness: every sandbox tells the pool when it dies (its ``on_death`` hook), so a dead idle
sandbox leaves the idle set at once and a replacement starts; and ``acquire`` checks the one
it hands out, discarding a dead one and taking the next, so a caller never gets a sandbox
whose agent stream already failed. Health pings remain for agents that hang without dying.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
import anyio
from anyio.abc import TaskGroup

from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import AcquireTimeout, PoolClosed, SandboxError, SandboxUnavailable
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult

log = logging.getLogger(__name__)
_pool_numbers = itertools.count(1)


@dataclass(frozen=True)
class PoolConfig:
    min_idle: int = 2  # warm sandboxes kept ready beyond current demand
    max_size: int = 8  # sandboxes alive at once, leased or not
    max_uses: int = 1000  # leases before a sandbox is replaced rather than reset
    max_lifetime: float = 3600.0  # seconds before an idle sandbox is replaced
    acquire_timeout: float = 60.0
    max_waiters: int = 10_000  # acquire() beyond this raises at once instead of queueing
    reset_timeout: float = 10.0
    health_interval: float = 15.0  # how often idle sandboxes are pinged
    launch_attempts: int = 3  # consecutive launch failures before waiters are failed
    run_timeout: float = 10.0  # default timeout of runs on leased sandboxes
    grace: float = 5.0  # how long past a run's timeout a silent agent is declared dead
    spec: SandboxSpec = field(default_factory=SandboxSpec)
    limits: RunLimits = field(default_factory=RunLimits)

    def __post_init__(self) -> None:
        if not 0 <= self.min_idle <= self.max_size or self.max_size < 1:
            raise ValueError(f"need 0 <= min_idle <= max_size and max_size >= 1, got {self.min_idle}, {self.max_size}")


@dataclass
class PoolStats:
    """Counters since the pool opened, and the current population."""

    launched: int = 0
    leases: int = 0
    waits: int = 0  # acquires that had to queue
    resets: int = 0
    replacements: int = 0  # sandboxes destroyed because they died, failed a probe or aged out
    launch_failures: int = 0
    acquire_timeouts: int = 0
    idle: int = 0
    leased: int = 0
    starting: int = 0
    recycling: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass(eq=False)
class _Slot:
    sandbox: Sandbox
    born: float = field(default_factory=time.monotonic)
    uses: int = 0


class _Waiter:
    __slots__ = ("event", "slot", "error")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.slot: _Slot | None = None
        self.error: BaseException | None = None


class SandboxPool:
    """``async with SandboxPool(backend) as pool: async with pool.lease() as sb: ...``"""

    def __init__(self, backend: Backend, config: PoolConfig | None = None, *, name: str | None = None) -> None:
        self.backend = backend
        self.config = config or PoolConfig()
        self.name = name or f"{os.getpid()}-{next(_pool_numbers)}"
        self.stats = PoolStats()
        self._idle: deque[_Slot] = deque()
        self._leased: dict[int, _Slot] = {}  # id(sandbox) -> slot
        self._all: set[_Slot] = set()
        self._probing: set[_Slot] = set()
        self._waiters: deque[_Waiter] = deque()
        self._starting = 0
        self._recycling = 0
        self._consecutive_failures = 0
        self._wake = anyio.Event()
        self._tg: TaskGroup | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> SandboxPool:
        exit_on_sigterm()
        reaped = await self.backend.reap_orphans()
        if reaped:
            log.warning("removed %d sandboxes left by owners that died", reaped)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._supervise)
        self._poke()  # fill to min_idle now, not at the first health check
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        await self.aclose()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(*exc)

    async def aclose(self) -> None:
        """Fail the waiters and kill every sandbox; idempotent."""
        if self._closed:
            return
        self._closed = True
        for waiter in self._waiters:
            waiter.error = PoolClosed(f"pool {self.name} was closed")
            waiter.event.set()
        self._waiters.clear()
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for slot in list(self._all):
                    tg.start_soon(self._destroy, slot, False)
        self._idle.clear()
        self._leased.clear()

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until ``min_idle`` sandboxes are warm."""
        with anyio.fail_after(timeout):
            while len(self._idle) < self.config.min_idle:
                self._check_open()
                await anyio.sleep(0.01)

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
        """An idle slot, or the first one offered while this caller waits in line."""
        if self._idle and not self._waiters:
            return self._idle.popleft()
        if len(self._waiters) >= self.config.max_waiters:
            raise SandboxUnavailable(f"{len(self._waiters)} callers already waiting; the pool is saturated")
        waiter = _Waiter()
        self._waiters.append(waiter)
        self.stats.waits += 1
        self._poke()
        try:
            with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                await waiter.event.wait()
        except TimeoutError:
            if waiter.slot is None:
                self.stats.acquire_timeouts += 1
                raise AcquireTimeout(
                    f"no sandbox became free within {limit:g} s ({len(self._leased)} leased, "
                    f"max_size={self.config.max_size}); raise max_size or release leases sooner"
                ) from None
        except BaseException:  # cancelled: give back anything handed over meanwhile
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            if waiter.slot is not None:
                self._offer(waiter.slot)
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.slot is not None
        return waiter.slot

    async def release(self, sandbox: Sandbox) -> None:
        """Hand a leased sandbox back; it is reset and probed in the background.

        After the pool closed this is a no-op: closing killed every sandbox already, and a
        lease that outlives its pool (``async with pool.lease()`` around the pool's exit)
        must not turn its cleanup into an error. While the pool is open, releasing a sandbox
        it did not lease, or releasing one twice, raises :class:`SandboxError`: that is a bug
        in the caller (a double release could hand one sandbox to two tenants), not a state
        to paper over."""
        slot = self._leased.pop(id(sandbox), None)
        if self._closed:
            if slot is not None:
                await self._destroy(slot, False)
            return
        if slot is None:
            raise SandboxError("release() of a sandbox this pool did not lease (or released twice)")
        self.stats.leased = len(self._leased)
        self._recycling += 1
        assert self._tg is not None
        self._tg.start_soon(self._recycle, slot)

    @asynccontextmanager
    async def lease(self, timeout: float | None = None) -> AsyncIterator[Sandbox]:
        sandbox = await self.acquire(timeout)
        try:
            yield sandbox
        finally:
            with anyio.CancelScope(shield=True):
                await self.release(sandbox)

    async def run(
        self,
        code: str,
        language: str = "python",
        *,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes | str] | None = None,
    ) -> ExecResult:
        """One stateless run on any warm sandbox (GEM's semantics): nothing carries over."""
        async with self.lease() as sandbox:
            if files:
                await sandbox.write_files(files)
            return await sandbox.run(code, language, stdin=stdin, timeout=timeout, env=env)

    # -- internals ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosed(f"pool {self.name} is closed")

    def _lease(self, slot: _Slot) -> Sandbox:
        slot.uses += 1
        self._leased[id(slot.sandbox)] = slot
        self.stats.leases += 1
        self._refresh_stats()
        self._poke()  # demand changed: the supervisor may top up the idle set
        return slot.sandbox

    def _offer(self, slot: _Slot) -> None:
        """A ready sandbox goes to the longest waiter, else to the idle set; a dead one is
        replaced instead."""
        if not slot.sandbox.alive:
            self._discard(slot)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.event.is_set():
                waiter.slot = slot
                waiter.event.set()
                return
        self._idle.append(slot)
        self._refresh_stats()

    async def _recycle(self, slot: _Slot) -> None:
        try:
            sandbox = slot.sandbox
            expired = slot.uses >= self.config.max_uses or self._too_old(slot)
            if sandbox.alive and not expired:
                try:
                    await sandbox.reset(timeout=self.config.reset_timeout)
                    await sandbox.ping(timeout=self.config.reset_timeout)
                    self.stats.resets += 1
                except (SandboxError, TimeoutError) as exc:
                    if not self._closed:  # at shutdown the pool itself closed it
                        log.warning("sandbox %s failed its reset probe (%s); replacing it", sandbox.id, exc)
                else:
                    if not self._closed:
                        self._offer(slot)
                        return
            await self._destroy(slot, not self._closed)  # at shutdown nothing is replaced
        finally:
            self._recycling -= 1
            self._refresh_stats()

    def _discard(self, slot: _Slot) -> None:
        """Destroy a dead sandbox that is in no list any more, and have it replaced."""
        if self._closed:
            return  # aclose() kills everything in ``_all``
        self._all.discard(slot)  # at once, so the supervisor counts the replacement in
        assert self._tg is not None
        self._tg.start_soon(self._destroy, slot, True)

    def _died(self, slot: _Slot) -> None:
        """A sandbox's ``on_death`` hook: an idle one is dropped and replaced now. Leased,
        recycling and starting ones are handled where they are (release, reset, launch)."""
        if self._closed or slot not in self._idle:
            return
        self._idle.remove(slot)
        log.warning("idle %r; replacing it", slot.sandbox)
        self._discard(slot)
        self._refresh_stats()

    def _too_old(self, slot: _Slot) -> bool:
        return time.monotonic() - slot.born > self.config.max_lifetime

    async def _destroy(self, slot: _Slot, replace_it: bool) -> None:
        self._all.discard(slot)
        self._probing.discard(slot)
        if slot in self._idle:
            self._idle.remove(slot)
        if replace_it:
            self.stats.replacements += 1
            self._poke()
        with anyio.CancelScope(shield=True):
            try:
                await slot.sandbox.close()
            except Exception as exc:  # a sandbox that can't be closed politely is killed by close()
                log.warning("closing sandbox %s failed: %s", slot.sandbox.id, exc)
        self._refresh_stats()

    def _wanted(self) -> int:
        """Sandboxes the pool should have: everyone served plus ``min_idle`` spare."""
        cfg = self.config
        demand = len(self._leased) + self._recycling + len(self._waiters) + cfg.min_idle
        return min(cfg.max_size, demand)

    def _poke(self) -> None:
        self._wake.set()

    async def _supervise(self) -> None:
        cfg = self.config
        backoff = 0.0
        next_health = time.monotonic() + cfg.health_interval
        while not self._closed:
            with anyio.move_on_after(max(0.0, next_health - time.monotonic())):
                await self._wake.wait()
            self._wake = anyio.Event()
            if time.monotonic() >= next_health:
                self._check_health()
                next_health = time.monotonic() + cfg.health_interval
            population = len(self._all) + self._starting
            for _ in range(max(0, self._wanted() - population)):
                self._starting += 1
                assert self._tg is not None
                self._tg.start_soon(self._launch)
            if self._consecutive_failures:
                backoff = min(max(backoff * 2, 0.1), 5.0)
                await anyio.sleep(backoff)
            else:
                backoff = 0.0

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
                await slot.sandbox.ping(timeout=5.0)
        except (SandboxError, TimeoutError):
            healthy = False
        finally:
            self._probing.discard(slot)
        if not healthy and slot in self._idle:
            await self._destroy(slot, True)

    async def _launch(self) -> None:
        cfg = self.config
        spec = replace(cfg.spec, labels={**cfg.spec.labels, "gem-sandbox.pool": self.name})
        box = None
        try:
            box = await self.backend.launch(spec)
            sandbox = Sandbox(
                box, backend=self.backend.name, default_timeout=cfg.run_timeout, limits=cfg.limits, grace=cfg.grace
            )
            slot = _Slot(sandbox)
            sandbox.on_death = lambda _: self._died(slot)
            assert self._tg is not None
            with anyio.fail_after(30):
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
        self.stats.launched += 1
        self._all.add(slot)
        if self._closed:
            await self._destroy(slot, False)
        else:
            self._offer(slot)

    def _launch_failed(self, exc: BaseException) -> None:
        self.stats.launch_failures += 1
        self._consecutive_failures += 1
        log.warning("launching a %s sandbox failed: %s", self.backend.name, exc)
        if self._consecutive_failures >= self.config.launch_attempts:
            error = SandboxUnavailable(
                f"{self._consecutive_failures} launches of a {self.backend.name} sandbox failed in a row; "
                f"last error: {exc}"
            )
            error.__cause__ = exc
            while self._waiters:
                waiter = self._waiters.popleft()
                waiter.error = error
                waiter.event.set()
        self._poke()
        self._refresh_stats()

    def _refresh_stats(self) -> None:
        s = self.stats
        s.idle, s.leased, s.starting, s.recycling = len(self._idle), len(self._leased), self._starting, self._recycling

    def __repr__(self) -> str:
        s = self.stats
        return f"<SandboxPool {self.name} {self.backend.name} idle={s.idle} leased={s.leased} starting={s.starting}>"


def exit_on_sigterm() -> None:
    """Make SIGTERM unwind the process like Ctrl-C does (``SystemExit(143)``), so every pool
    closes and removes its sandboxes instead of dying with them running. Only when SIGTERM
    still has its default action and we are on the main thread: a handler the application
    installed is never replaced."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_system_exit)


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
