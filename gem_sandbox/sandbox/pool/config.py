"""How a pool is sized and paced: :class:`PoolConfig`, checked when it is made."""

from __future__ import annotations

from dataclasses import dataclass, field

from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.limits import DEFAULT_GRACE, DEFAULT_RUN_TIMEOUT, RunLimits

DEFAULT_MIN_IDLE = 2


@dataclass(frozen=True)
class PoolConfig:
    """``min_idle`` defaults to 2, or to ``max_size`` when that is smaller (a pool of one is
    fine); given explicitly, it must not exceed ``max_size``."""

    min_idle: int | None = None  # warm sandboxes kept ready beyond current demand
    max_size: int = 8  # sandboxes alive at once, leased or not
    max_uses: int = 1000  # leases before a sandbox is replaced rather than reset
    max_lifetime: float = 3600.0  # seconds before an idle sandbox is replaced
    acquire_timeout: float = 60.0
    max_waiters: int = 10_000  # acquire() beyond this raises at once instead of queueing
    reset_timeout: float = 10.0
    health_interval: float = 15.0  # how often idle sandboxes are pinged
    launch_attempts: int = 3  # consecutive launch failures before waiters are failed
    run_timeout: float = DEFAULT_RUN_TIMEOUT  # default timeout of runs on leased sandboxes
    grace: float = DEFAULT_GRACE  # how long past a run's timeout a silent agent is declared dead
    spec: SandboxSpec = field(default_factory=SandboxSpec)
    limits: RunLimits = field(default_factory=RunLimits)

    def __post_init__(self) -> None:
        if self.max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {self.max_size}")
        if self.min_idle is None:
            object.__setattr__(self, "min_idle", min(DEFAULT_MIN_IDLE, self.max_size))
        elif not 0 <= self.min_idle <= self.max_size:
            raise ValueError(f"need 0 <= min_idle <= max_size, got min_idle={self.min_idle}, max_size={self.max_size}")
