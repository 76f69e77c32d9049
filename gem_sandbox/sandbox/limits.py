"""Per-run limits, applied by the agent to each forked run (rlimits and output caps)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Seconds a run may take when its caller gives no timeout.
DEFAULT_RUN_TIMEOUT = 10.0
#: Seconds past a request's own deadline that the host waits for the agent before declaring it
#: dead (a run's answer needs time to arrive after its kill).
DEFAULT_GRACE = 5.0


@dataclass(frozen=True, slots=True)
class RunLimits:
    memory_mb: int = 1024  # RLIMIT_AS of the run's processes; 0 = no per-run cap
    cpu_seconds: int | None = None  # RLIMIT_CPU; None = derived from the wall timeout
    max_output_bytes: int = 64 * 1024  # per stream; head and tail are kept past it
    file_size_mb: int = 64  # RLIMIT_FSIZE
    nofile: int = 256  # RLIMIT_NOFILE

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)
