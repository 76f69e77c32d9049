"""Per-run limits, applied by the agent to each forked run (rlimits and output caps)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gem_sandbox.sandbox.settings import check, setting

#: Seconds a run may take when its caller gives no timeout.
DEFAULT_RUN_TIMEOUT = 10.0
#: Seconds past a request's own deadline that the host waits for the agent before declaring it
#: dead (a run's answer needs time to arrive after its kill).
DEFAULT_GRACE = 5.0
CONTROL_TIMEOUT = 30.0  # seconds for requests that run no user code (files, stats, restarts)
# Seconds a snapshot or a restore may take: each kernel gets the agent's 60 to (un)pickle.
SNAPSHOT_TIMEOUT = 150.0


@dataclass(frozen=True, slots=True)
class RunLimits:
    """What one run may use. ``run_memory_mb`` is per run; the whole sandbox's memory is
    :attr:`SandboxSpec.memory_mb`, which bounds every run too."""

    run_memory_mb: int = setting(
        1024,
        kind=int,
        at_least=0,
        doc="RLIMIT_AS of each run's processes, in MiB; 0 = no per-run cap (memory_mb still bounds the sandbox)",
    )
    cpu_seconds: int | None = setting(
        None, kind=int, at_least=1, doc="RLIMIT_CPU of each run; None = its wall timeout, rounded up, plus 1"
    )
    max_output_bytes: int = setting(
        64 * 1024,
        kind=int,
        at_least=1,
        doc="bytes kept of each of a run's stdout and stderr; past it, the head and tail",
    )
    file_size_mb: int = setting(64, kind=int, at_least=0, doc="RLIMIT_FSIZE of each run, in MiB; 0 = no per-run cap")
    nofile: int = setting(
        256, kind=int, at_least=16, doc="RLIMIT_NOFILE of each run: files open at once (Python needs several to start)"
    )

    def __post_init__(self) -> None:
        check(self)

    def to_wire(self) -> dict[str, Any]:
        wire = asdict(self)
        wire["memory_mb"] = wire.pop("run_memory_mb")  # the agent protocol's key is unchanged
        return wire
