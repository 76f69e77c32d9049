"""Pools of warm sandboxes: :class:`SandboxPool` and what it is made of.

``config`` sizes a pool, ``waiters`` is its fair line of callers, ``seats`` lends sandboxes to
stateless runs that share them, ``supervisor`` decides when to launch and probe,
``statistics`` snapshots what it did, and ``pool`` runs every sandbox's life from launch to
kill.
"""

from gem_sandbox.sandbox.pool.config import PoolConfig
from gem_sandbox.sandbox.pool.pool import PoolState, SandboxPool, leased
from gem_sandbox.sandbox.pool.statistics import PoolStatistics

__all__ = ["PoolConfig", "PoolState", "PoolStatistics", "SandboxPool", "leased"]
