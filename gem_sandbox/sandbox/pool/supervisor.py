"""When the pool launches and probes: the supervisor's loop, apart from how it is done.

The loop wakes when demand changes (:meth:`Supervisor.poke`) or a health check is due, starts
as many launches as the pool is short of its target, and backs off exponentially (up to 5 s)
while launches keep failing, so a broken daemon is not hammered.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

MAX_BACKOFF = 5.0


class Supervisor:
    """``shortfall()`` says how many sandboxes to start now, ``launch()`` starts one in the
    background, ``check_health()`` starts probes, ``failing()`` says whether the last launch
    failed."""

    def __init__(
        self,
        health_interval: float,
        *,
        shortfall: Callable[[], int],
        launch: Callable[[], None],
        check_health: Callable[[], None],
        failing: Callable[[], bool],
    ) -> None:
        self.health_interval = health_interval
        self._shortfall, self._launch, self._check_health, self._failing = shortfall, launch, check_health, failing
        self._wake = anyio.Event()

    def poke(self) -> None:
        """Demand changed: look again now, not at the next health check."""
        self._wake.set()

    async def run(self) -> None:
        """Until cancelled (the pool's task group owns this task)."""
        backoff = 0.0
        next_health = time.monotonic() + self.health_interval
        while True:
            with anyio.move_on_after(max(0.0, next_health - time.monotonic())):
                await self._wake.wait()
            self._wake = anyio.Event()
            if time.monotonic() >= next_health:
                self._check_health()
                next_health = time.monotonic() + self.health_interval
            for _ in range(self._shortfall()):
                self._launch()
            if self._failing():
                backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF)
                await anyio.sleep(backoff)
            else:
                backoff = 0.0
