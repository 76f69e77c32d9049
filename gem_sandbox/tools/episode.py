"""The sandboxes one episode holds, passed explicitly from the tool wrapper to its tools.

Tools are shared and stateless (GEM's factory builds one tool instance for every env it
wraps), so an episode's sandbox cannot live on the tool. The wrapper owns an
:class:`Episode` and hands it to each call (``tool.aexecute(call, episode)``); a stateful tool
asks it for the episode's sandbox on its runtime, which is leased on first use and kept, with
its kernels, shell sessions and files, until the wrapper releases it.
"""

from __future__ import annotations

from typing import Any

import anyio

from gem_sandbox.runtime import LeasedSandbox, Runtime


class Episode:
    """At most one leased sandbox per runtime, until :meth:`release`."""

    def __init__(self) -> None:
        self._leases: dict[Runtime, LeasedSandbox] = {}

    def __len__(self) -> int:
        return len(self._leases)

    async def sandbox(self, runtime: Runtime) -> LeasedSandbox:
        """This episode's sandbox on ``runtime``. One that died is given back and a fresh one
        leased: the episode's state is lost either way, but later calls can succeed."""
        sandbox = self._leases.get(runtime)
        if sandbox is not None and not sandbox.alive:
            await self._release(runtime)
            sandbox = None
        if sandbox is None:
            sandbox = self._leases[runtime] = await runtime.acquire()
        return sandbox

    async def fork(self, n: int) -> list[Episode]:
        """``n`` episodes, each holding a fork of every sandbox this one holds (see
        ``LeasedSandbox.fork``): all of them or, raising, none."""
        episodes = [Episode() for _ in range(n)]
        try:
            for runtime, sandbox in self._leases.items():
                for episode, branch in zip(episodes, await sandbox.fork(n), strict=True):
                    episode._leases[runtime] = branch
        except BaseException:
            for episode in episodes:
                await episode.release()
            raise
        return episodes

    async def release(self) -> None:
        """Give every leased sandbox back (its runtime resets it for the next tenant)."""
        with anyio.CancelScope(shield=True):
            for runtime in list(self._leases):
                await self._release(runtime)

    async def _release(self, runtime: Runtime) -> None:
        await runtime.release(self._leases.pop(runtime))

    async def __aenter__(self) -> Episode:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()
