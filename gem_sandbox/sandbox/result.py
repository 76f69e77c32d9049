"""What every run returns: :class:`ExecResult` and its :class:`Status`."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

# Refusals of a run that are the sandbox's failure, not the caller's, so the run's result is
# infra_error: "busy", no room to start it (the sandbox's process limit was still full).
INFRA_REFUSALS = ("busy",)


class Status(str, enum.Enum):
    """How a run ended. ``INFRA_ERROR`` means the sandbox failed, not the code: trainers mask
    it instead of scoring it zero."""

    OK = "ok"  # exited 0
    ERROR = "error"  # exited non-zero or raised
    TIMEOUT = "timeout"  # hit its wall-clock deadline; the whole process tree was killed
    OOM = "oom"  # hit its memory limit
    OUTPUT_LIMIT = "output_limit"  # printed more than the cap; head and tail are kept
    KILLED = "killed"  # ended by a signal it did not send itself (not timeout or oom)
    INFRA_ERROR = "infra_error"  # the sandbox, agent or daemon failed


@dataclass(frozen=True, slots=True)
class ExecResult:
    status: Status
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0  # bytes the program wrote, including any cut from the middle
    stderr_bytes: int = 0
    truncated: bool = False
    duration_ms: float = 0.0
    cpu_ms: float = 0.0
    signal: int | None = None
    display: tuple[dict[str, Any], ...] = ()  # kernels: what the command showed, as MIME bundles
    display_value: int | None = None  # which of them is the command's value (Jupyter's Out)
    # A compiled language's compile phase; when it did not end "ok" nothing ran, and this
    # result's own fields are the compile's.
    compile: ExecResult | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def infra_error(cls, message: str, duration_ms: float = 0.0) -> ExecResult:
        return cls(Status.INFRA_ERROR, stderr=message, duration_ms=duration_ms)

    def to_json(self) -> dict[str, Any]:
        """The JSON object the pool service answers for a run (docs/service.md)."""
        fields = dataclasses.asdict(self)
        fields["status"] = self.status.value
        return fields

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecResult:
        """The inverse of :meth:`to_json`; unknown keys (from a newer service) are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}
        compiled = cls.from_json(data["compile"]) if data.get("compile") else None
        display = tuple(data.get("display", ()))
        return cls(**dict(fields, status=Status(data["status"]), display=display, compile=compiled))

    @classmethod
    def from_wire(
        cls, header: dict[str, Any], payload: bytes, *, waited_ms: float = 0.0
    ) -> ExecResult:
        """Build from the agent's answer to a run: a result header and its payload (stdout,
        then stderr from ``stdout_len`` on), or a refusal of a type in :data:`INFRA_REFUSALS`
        as ``infra_error`` that took ``waited_ms``."""
        if not header.get("ok"):
            error = header["error"]
            return cls.infra_error(f"{error['type']}: {error.get('message', '')}", waited_ms)
        split = header.get("stdout_len", 0)
        stdout, stderr = payload[:split], payload[split:]
        return cls(
            status=Status(header["status"]),
            exit_code=header.get("exit_code"),
            stdout=stdout.decode("utf-8", errors="replace"),
            stderr=stderr.decode("utf-8", errors="replace"),
            stdout_bytes=header.get("stdout_bytes", len(stdout)),
            stderr_bytes=header.get("stderr_bytes", len(stderr)),
            truncated=header.get("truncated", False),
            duration_ms=header.get("duration_ms", 0.0),
            cpu_ms=header.get("cpu_ms", 0.0),
            signal=header.get("signal"),
            display=tuple(header.get("display", ())),
            display_value=header.get("display_value"),
            compile=cls.from_json(header["compile"]) if header.get("compile") else None,
        )
