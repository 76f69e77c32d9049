"""The line for the pool's capacity: :class:`Admission`, fair between tokens and bounded in time.

Without it, requests past the pool's capacity waited in the pool's own first-come line for up
to its ``acquire_timeout`` (60 s), long after their clients had given up, and one token's
flood sat in front of every other token's requests. Here each request that needs the pool
takes ``weight`` units of its capacity (``max_size * runs_per_sandbox``: a stateless run one,
a whole sandbox ``runs_per_sandbox``) before it reaches the pool. Waiting requests are kept
per token; a freed unit goes to the waiting token that holds the fewest units, and among those
to the one served longest ago (round robin), so a token with a thousand requests queued gets
its share and no more.
A request waits at most ``queue_timeout`` seconds, or its client's ``X-Request-Timeout`` if that
is shorter, and is then answered 503 with ``Retry-After``; past ``max_queue`` waiting requests
the answer is immediate. On SandboxFusion's routes the answer is 504 instead: the one status
SandboxFusion's clients (verl's ``call_sandbox_api``) retry, after a pause; they give up on a 503. A request whose client disconnects is cancelled (the server cancels
its handler), which takes it out of the line or gives its units back at once.

The claim (which token waits, and how long it may) is set per request by the app's guard in
:data:`CLAIM`, so every API that runs code through :class:`.runs.Runs` is admitted the same way.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio

from gem_sandbox.service.errors import Problem

DEADLINE_HEADER = "X-Request-Timeout"  # seconds the client will wait for its answer
MAX_RETRY_AFTER = 30


@dataclass(frozen=True)
class Claim:
    """Who asks for capacity, and how long they may wait for it."""

    tenant: str
    patience: float | None = None  # the client's own deadline, if it sent one
    refusal: int = 503  # the status that says "no capacity in time, come back" to this client


#: The claim of the request being handled (the guard sets it; code outside requests gets the default).
CLAIM: ContextVar[Claim] = ContextVar("claim", default=Claim("service"))


@dataclass(eq=False)
class _Waiter:
    tenant: str
    weight: int
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False


class Ticket:
    """Units held until :meth:`release` (idempotent)."""

    def __init__(self, admission: Admission, tenant: str, weight: int) -> None:
        self._admission = admission
        self.tenant = tenant
        self.weight = weight

    def release(self) -> None:
        if self.weight:
            self._admission.give_back(self.tenant, self.weight)
            self.weight = 0


class Admission:
    def __init__(self, capacity: int, queue_timeout: float, max_queue: int) -> None:
        self.capacity = capacity
        self.queue_timeout = queue_timeout
        self.max_queue = max_queue
        self.free = capacity
        self.used: Counter[str] = Counter()  # units each token holds
        self.waiting = 0
        self._lines: dict[str, deque[_Waiter]] = {}  # each token's waiting requests, oldest first
        self._served: dict[str, int] = {}  # when each token was last granted units (a count of grants)
        self._grants = 0

    @asynccontextmanager
    async def seat(self, weight: int = 1) -> AsyncIterator[None]:
        """Hold ``weight`` units for the block, as the current request's :data:`CLAIM`."""
        ticket = await self.take(weight)
        try:
            yield
        finally:
            ticket.release()

    async def take(self, weight: int = 1) -> Ticket:
        """``weight`` units for the current request's :data:`CLAIM`, once its turn comes;
        503 (``overloaded``) when it does not come in time."""
        claim = CLAIM.get()
        weight = min(weight, self.capacity)
        if not self.waiting and self.free >= weight:
            self._grant(claim.tenant, weight)
            return Ticket(self, claim.tenant, weight)
        if self.waiting >= self.max_queue:
            raise self._refusal(claim, f"{self.waiting} requests are already waiting for a sandbox")
        patience = self.queue_timeout if claim.patience is None else min(claim.patience, self.queue_timeout)
        waiter = _Waiter(claim.tenant, weight)
        self._lines.setdefault(claim.tenant, deque()).append(waiter)
        self.waiting += 1
        try:
            with anyio.move_on_after(patience):
                await waiter.event.wait()
        except BaseException:
            self._leave(waiter)
            raise
        if not waiter.granted:
            self._leave(waiter)
            raise self._refusal(claim, f"no sandbox came free within {patience:g} s")
        return Ticket(self, claim.tenant, weight)

    def _grant(self, tenant: str, weight: int) -> None:
        self.free -= weight
        self.used[tenant] += weight
        self._grants += 1
        self._served[tenant] = self._grants

    def give_back(self, tenant: str, weight: int) -> None:
        self.free += weight
        self.used[tenant] -= weight
        if not self.used[tenant]:
            del self.used[tenant]
        self._dispatch()

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter that gave up (timed out or cancelled); units granted meanwhile go back."""
        if waiter.granted:
            self.give_back(waiter.tenant, waiter.weight)
            return
        line = self._lines.get(waiter.tenant)
        if line is not None and waiter in line:
            self.waiting -= 1
            line.remove(waiter)
            if not line:
                del self._lines[waiter.tenant]
        self._dispatch()  # the head of the line may have been what blocked the rest

    def _dispatch(self) -> None:
        """Grant waiting requests while units are free: each time to the head of the line of
        the token holding the fewest units (the one served longest ago on a tie). A head that
        needs more units than are free waits for them, and nobody overtakes it."""
        while self._lines:
            tenant = min(self._lines, key=lambda t: (self.used[t], self._served.get(t, -1)))
            line = self._lines[tenant]
            head = line[0]
            if head.weight > self.free:
                return
            line.popleft()
            if not line:
                del self._lines[tenant]
            self.waiting -= 1
            self._grant(tenant, head.weight)
            head.granted = True
            head.event.set()

    def _refusal(self, claim: Claim, why: str) -> Problem:
        rounds = math.ceil((self.waiting + 1) / max(1, self.capacity))
        return Problem(
            claim.refusal,
            "overloaded",
            f"{why} (capacity {self.capacity} runs); retry after Retry-After seconds",
            retry_after=min(MAX_RETRY_AFTER, rounds),
        )
