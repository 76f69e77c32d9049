"""Sandboxes shared by stateless runs: how many runs each holds, and waiting for a free seat.

With ``runs_per_sandbox > 1`` a pool lends one sandbox to several ``pool.run`` calls at once
(each its own uid, group and private dir in the agent). A sandbox stays lent while any run
holds it; the last run out gives it back to the pool, without a reset when the agent found
it clean then.
"""

from __future__ import annotations

from collections import deque

import anyio

from gem_sandbox.sandbox.client import Sandbox


class Seats:
    """The sandboxes lent to shared runs, each with ``[runs now, runs it may hold]``."""

    def __init__(self, per_sandbox: int) -> None:
        self.per_sandbox = per_sandbox
        self._held: dict[Sandbox, list[int]] = {}
        self._waiting: deque[anyio.Event] = deque()  # one per waiting run, longest first

    def take(self) -> Sandbox | None:
        """A seat on the live sandbox that holds the fewest runs, if one has room."""
        free = [sb for sb, (runs, most) in self._held.items() if runs < most and sb.alive]
        if not free:
            return None
        sandbox = min(free, key=lambda sb: self._held[sb][0])
        self._held[sandbox][0] += 1
        return sandbox

    def lend(self, sandbox: Sandbox) -> None:
        """A sandbox fresh from the pool, with its first run seated. Only an agent that gives
        each run its own uid can seat more than one."""
        shareable = sandbox.hello.get("isolation") == "uid"
        self._held[sandbox] = [1, self.per_sandbox if shareable else 1]

    def shared(self, sandbox: Sandbox) -> bool:
        return self._held[sandbox][1] > 1

    def leave(self, sandbox: Sandbox) -> bool:
        """A run is done with ``sandbox``; True when it was the last (give the sandbox back)."""
        held = self._held[sandbox]
        held[0] -= 1
        self.changed()
        if held[0] == 0:
            del self._held[sandbox]
            return True
        return False

    def changed(self) -> None:
        """A seat or a sandbox may have come free: wake the longest waiting run (one only,
        so a thousand waiting runs are not all woken for each seat)."""
        if self._waiting:
            self._waiting.popleft().set()

    def wake_all(self) -> None:
        while self._waiting:
            self._waiting.popleft().set()

    async def wait(self) -> None:
        """Until :meth:`changed` picks this run; a wake-up it cannot use (it was cancelled or
        timed out meanwhile) goes to the next."""
        event = anyio.Event()
        self._waiting.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():
                self.changed()
            else:
                self._waiting.remove(event)
            raise
