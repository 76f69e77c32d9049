"""What a pool has done and holds: counters it bumps, and snapshots made from them on demand."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Counters:
    """Events since the pool opened; only the pool writes them."""

    launched: int = 0
    leases: int = 0
    waits: int = 0  # acquires that had to queue
    resets: int = 0
    clean_returns: int = 0  # stateless runs after which the agent found the sandbox clean: no reset
    replacements: int = 0  # sandboxes destroyed because they died, failed a probe or aged out
    launch_failures: int = 0
    acquire_timeouts: int = 0


@dataclass(frozen=True)
class PoolStatistics:
    """One snapshot: the counters and the population at the moment it was taken."""

    launched: int
    leases: int
    waits: int
    resets: int
    clean_returns: int
    replacements: int
    launch_failures: int
    acquire_timeouts: int
    idle: int
    leased: int
    starting: int
    recycling: int
    waiting: int

    @classmethod
    def empty(cls) -> PoolStatistics:
        return cls(**{name: 0 for name in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
