"""What a request may ask for: its timeouts and per-run limits, each held to the service's own.

Every API caps the same way, through :func:`timeout` and :func:`run_limits`: a timeout at the
service's ``max_run_timeout``, each limit at the pool's (0, "no cap", is capped too where the
pool has one), and ``cpu_seconds``, where the pool sets none, just past the longest timeout.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, overload

from pydantic import BaseModel, ConfigDict, Field

from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.service.fields import INTEGRAL

Seconds = Annotated[float, Field(gt=0, description="seconds; capped at the service's max_run_timeout")]
_UNBOUNDED_AT_ZERO = ("run_memory_mb", "file_size_mb")


class Limits(BaseModel):
    """Per-run limits (`RunLimits`'s fields); each is capped at the service's own."""

    model_config = ConfigDict(extra="forbid", strict=True)

    run_memory_mb: Annotated[int, Field(ge=0), INTEGRAL] | None = None
    cpu_seconds: Annotated[int, Field(ge=1), INTEGRAL] | None = None
    max_output_bytes: Annotated[int, Field(ge=1), INTEGRAL] | None = None
    file_size_mb: Annotated[int, Field(ge=0), INTEGRAL] | None = None
    nofile: Annotated[int, Field(ge=16), INTEGRAL] | None = None


@overload
def timeout(asked: float, ceiling: float) -> float: ...
@overload
def timeout(asked: None, ceiling: float) -> None: ...
def timeout(asked: float | None, ceiling: float) -> float | None:
    """A request's timeout, at most ``ceiling`` (None: the pool's default)."""
    return None if asked is None else min(asked, ceiling)


def run_limits(pool: RunLimits, asked: Limits | None, max_timeout: float) -> RunLimits | None:
    """The pool's limits with what the request asked for, each capped at the pool's own;
    None (the pool's as they are) when it asked for nothing."""
    if asked is None:
        return None
    cpu_cap = pool.cpu_seconds or math.ceil(max_timeout) + 1
    capped = {}
    for name, value in asked.model_dump(exclude_none=True).items():
        cap = cpu_cap if name == "cpu_seconds" else getattr(pool, name)
        unbounded = value == 0 and name in _UNBOUNDED_AT_ZERO
        capped[name] = cap if cap and (unbounded or value > cap) else value
    return dataclasses.replace(pool, **capped)
