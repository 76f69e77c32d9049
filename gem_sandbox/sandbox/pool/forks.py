"""Snapshots and forks over a pool: a sandbox's captured state loaded into new leases.

One way for every backend the agent runs on (bubblewrap, Docker, e2b): the agent captures the
parent's files, kernels and shells as one stream (``gem_sandbox/agent/snapshots.py``), and
each branch is a warm sandbox of the same pool that loads it. A branch is therefore a sandbox
of its own, with its own uids, files and limits; nothing is shared with the parent or another
branch. ``docs/snapshots.md`` says why this design and what the others would cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from gem_sandbox.sandbox.errors import ForkError, SandboxCrashed, SnapshotUnsupported

if TYPE_CHECKING:
    from gem_sandbox.sandbox.client import Sandbox

MAX_BRANCHES = 256  # branches one fork may ask for


async def load_into_leases(pool: Any, data: bytes, n: int, room: int, timeout: float | None = None) -> list[Sandbox]:
    """``n`` new leases of ``pool`` (which has ``room`` more to lend), each holding ``data``;
    all of them or, raising :class:`ForkError`, none (those made are released)."""
    if not isinstance(n, int) or not 1 <= n <= MAX_BRANCHES:
        raise ValueError(f"a fork makes 1 to {MAX_BRANCHES} branches, not {n!r}")
    if n > room:
        raise ForkError(f"the pool has room for {room} more leases, not {n}; raise max_size or release leases first")
    branches: list[Sandbox] = []

    async def branch() -> None:
        sandbox = await pool.acquire(timeout)
        branches.append(sandbox)
        await sandbox.load(data)

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(branch)
    except BaseException as exc:
        with anyio.CancelScope(shield=True):
            for sandbox in branches:
                await pool.release(sandbox)
        if not isinstance(exc, Exception):
            raise
        first = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) else exc
        raise ForkError(f"a branch could not be made, so none was: {type(first).__name__}: {first}") from exc
    return branches


async def capture(sandbox: Sandbox) -> tuple[dict[str, Any], bytes]:
    """The sandbox's state, or :class:`SnapshotUnsupported` saying why not (a dead sandbox
    raises ``SandboxCrashed``, a closed one ``SandboxError``)."""
    if not sandbox.alive:
        raise SandboxCrashed(f"sandbox {sandbox.id} is {sandbox.death or 'not alive'}: nothing to snapshot")
    try:
        return await sandbox.capture()
    except SnapshotUnsupported as exc:
        raise SnapshotUnsupported(f"sandbox {sandbox.id}: {exc}") from None
