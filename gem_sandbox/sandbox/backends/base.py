"""What a backend provides: a running box with the agent started, and a way to kill it.

Backends know how to start an isolated environment (a bubblewrap child, a Docker container)
and attach to the agent inside it. Everything above the byte stream (the protocol, runs,
files, resets) is shared and lives in :mod:`gem_sandbox.sandbox.client` and its framing and
transfer modules.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import ClassVar

from anyio.abc import ByteStream

from gem_sandbox.sandbox.settings import check, setting

POOL_LABEL = "gem-sandbox.pool"  # names the pool a sandbox belongs to, where backends label them

MIB = 1024 * 1024


@dataclass(frozen=True)
class SandboxSpec:
    """Resource limits and identity for one sandbox. Backends map each field to their own
    mechanism (cgroups for Docker, rlimits and tmpfs sizes for bubblewrap)."""

    memory_mb: int = setting(
        1024,
        kind=int,
        at_least=64,
        doc="whole-sandbox memory, in MiB (Docker: mem_limit and memswap_limit; local: each run's RLIMIT_AS ceiling)",
    )
    cpus: float = setting(
        1.0, kind=float, at_least=0.01, doc="CPU quota (Docker: nano_cpus); OMP_NUM_THREADS and the like follow it"
    )
    pids: int = setting(
        256, kind=int, at_least=8, doc="processes in the sandbox (Docker: pids_limit; local: RLIMIT_NPROC)"
    )
    workdir_mb: int = setting(256, kind=int, at_least=1, doc="size of the work dir tmpfs, in MiB")
    tmp_mb: int = setting(64, kind=int, at_least=1, doc="size of the /tmp tmpfs, in MiB")
    labels: dict[str, str] = setting(
        kind=dict, factory=dict, doc="labels the backend puts on the sandbox; the pool adds its own, for reaping"
    )
    image: str | None = setting(
        None, kind=str, doc="backend-specific image or template name; None = the backend default"
    )

    def __post_init__(self) -> None:
        check(self)

    @property
    def threads(self) -> int:
        """What thread-count variables (``OMP_NUM_THREADS`` etc.) are set to: the CPU quota,
        rounded up, so numeric libraries do not start a thread per host core."""
        return max(1, math.ceil(self.cpus))


class Box(abc.ABC):
    """A running sandbox whose agent is started and connected."""

    id: str
    stream: ByteStream  # to and from the agent; the client speaks the protocol on it

    @abc.abstractmethod
    async def kill(self) -> None:
        """Tear the sandbox down now. Idempotent; never raises for one already gone."""

    async def exit_reason(self) -> str | None:
        """Why the box died, when it did and the backend can tell (e.g. "OOMKilled")."""
        return None


class Backend(abc.ABC):
    """Starts boxes. One instance may serve many pools."""

    name: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def check(cls) -> str | None:
        """``None`` when this backend can run here, else what is missing and how to fix it."""

    @abc.abstractmethod
    async def launch(self, spec: SandboxSpec) -> Box:
        """Start a sandbox and its agent; return once the agent's stream is attached."""

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        """Remove sandboxes left by owners that died; return how many were removed."""
        return 0

    async def aclose(self) -> None:
        """Release backend-wide resources (API clients). Boxes are killed by their owners."""
