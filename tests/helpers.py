"""Small envs for testing the env machinery itself (vector envs, wrappers)."""

from __future__ import annotations

from typing import Any

import anyio

from gem_sandbox.core import Env


class CountdownEnv(Env):
    """Ends after ``length`` steps; the observation is the remaining count. An action of
    ``"raise"`` raises, ``"hang"`` sleeps far past any step timeout."""

    blocking = False

    def __init__(self, length: int = 3, seed: int | None = None) -> None:
        super().__init__(seed)
        self.length = length
        self.resets = 0

    def reset(self, seed: int | None = None, **kwargs: Any):
        self.seed_rng(seed)
        self.remaining = self.length
        self.resets += 1
        self.secret = self.rng.randint(0, 10**9)
        return f"start {self.secret}", {"kwargs": kwargs}

    def step(self, action: Any):
        if action == "raise":
            raise RuntimeError("boom")
        self.remaining -= 1
        done = self.remaining == 0
        return f"left {self.remaining}", float(done), done, False, {"action": action}


class AsyncSleepEnv(Env):
    """An async-native env whose step waits (as a sandbox call would)."""

    def __init__(self, delay: float = 0.05, seed: int | None = None) -> None:
        super().__init__(seed)
        self.delay = delay

    async def areset(self, seed: int | None = None, **kwargs: Any):
        self.seed_rng(seed)
        return "ready", {}

    async def astep(self, action: Any):
        await anyio.sleep(float("inf") if action == "hang" else self.delay)
        return f"echo {action}", 0.0, False, False, {}
