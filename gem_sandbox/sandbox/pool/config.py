"""How a pool is sized and paced: :class:`PoolConfig`, checked when it is made."""

from __future__ import annotations

from dataclasses import dataclass

from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.errors import ConfigError
from gem_sandbox.sandbox.limits import DEFAULT_GRACE, DEFAULT_RUN_TIMEOUT, RunLimits
from gem_sandbox.sandbox.settings import check, setting

DEFAULT_MIN_IDLE = 2


@dataclass(frozen=True)
class PoolConfig:
    """``min_idle`` defaults to 2, or to ``max_size`` when that is smaller (a pool of one is
    fine); given explicitly, it must not exceed ``max_size``."""

    min_idle: int | None = setting(
        None,
        kind=int,
        at_least=0,
        doc="warm sandboxes kept ready beyond demand, at most max_size; None = min(2, max_size)",
    )
    max_size: int = setting(8, kind=int, at_least=1, doc="sandboxes alive at once, leased or not")
    max_uses: int = setting(1000, kind=int, at_least=1, doc="leases before a sandbox is replaced rather than reset")
    max_lifetime: float = setting(
        3600.0, kind=float, above=0, doc="seconds after its launch a sandbox is retired, at its next release or check"
    )
    acquire_timeout: float = setting(60.0, kind=float, above=0, doc="seconds acquire() waits for a free sandbox")
    max_waiters: int = setting(
        10_000, kind=int, at_least=0, doc="callers acquire() queues; one more raises at once (0 = never queue)"
    )
    runs_per_sandbox: int = setting(
        1,
        kind=int,
        at_least=1,
        doc="stateless runs (pool.run) one sandbox serves at once, each its own uid, group and dir",
    )
    reset_timeout: float = setting(10.0, kind=float, above=0, doc="seconds a sandbox may take to reset between leases")
    health_interval: float = setting(
        15.0, kind=float, above=0, doc="seconds between health checks (pings) of idle sandboxes"
    )
    launch_attempts: int = setting(3, kind=int, at_least=1, doc="launch failures in a row before waiters are failed")
    run_timeout: float = setting(
        DEFAULT_RUN_TIMEOUT, kind=float, above=0, doc="seconds a run may take when its caller gives no timeout"
    )
    grace: float = setting(
        DEFAULT_GRACE, kind=float, above=0, doc="seconds past a run's timeout before a silent agent is declared dead"
    )
    spec: SandboxSpec = setting(kind=SandboxSpec, factory=SandboxSpec, doc="each sandbox's resources, a `SandboxSpec`")
    limits: RunLimits = setting(kind=RunLimits, factory=RunLimits, doc="each run's default limits, a `RunLimits`")

    def __post_init__(self) -> None:
        check(self)
        if self.min_idle is not None and self.min_idle > self.max_size:
            raise ConfigError(
                f"min_idle must be an int from 0 to max_size ({self.max_size}), got {self.min_idle}; "
                "raise max_size or lower min_idle"
            )

    @property
    def idle_target(self) -> int:
        """Warm sandboxes to keep: ``min_idle``, or when unset ``min(2, max_size)``. Derived
        here rather than stored, so a config copied with a new ``max_size`` follows it."""
        return min(DEFAULT_MIN_IDLE, self.max_size) if self.min_idle is None else self.min_idle
