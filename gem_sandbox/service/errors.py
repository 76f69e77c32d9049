"""What the service answers when a request cannot be served: :class:`Problem`.

Handlers raise a :class:`Problem` (or one of the sandbox layer's typed errors, which
:func:`problem_for` translates); the app's error middleware renders it as
``{"error": {"type", "message"}}`` with its HTTP status (docs/service.md, "Errors").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from gem_sandbox.sandbox.errors import (
    AcquireTimeout,
    AgentError,
    FileTransferError,
    ForkError,
    PoolClosed,
    SandboxCrashed,
    SandboxError,
    SandboxUnavailable,
    SnapshotNotFound,
    SnapshotUnsupported,
    UnsafePath,
    UnsupportedLanguage,
)


class Problem(Exception):
    """An HTTP error answer: ``status``, a machine-readable ``kind`` and a message saying what
    was wrong and what to do. ``retry_after`` (seconds) becomes a ``Retry-After`` header,
    ``allow`` (the methods a path takes, on a 405) an ``Allow`` header."""

    def __init__(
        self, status: int, kind: str, message: str, *, retry_after: float | None = None, allow: Collection[str] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.allow = tuple(sorted(allow))

    def body(self) -> dict[str, dict[str, str]]:
        return {"error": {"type": self.kind, "message": self.message}}

    def headers(self) -> dict[str, str]:
        headers = {"Allow": ", ".join(self.allow)} if self.allow else {}
        if self.retry_after is not None:
            headers["Retry-After"] = str(max(1, math.ceil(self.retry_after)))
        return headers


@dataclass(frozen=True)
class Shape:
    """How an API writes its errors: the body for a problem, and that body's JSON schema
    (named ``name`` in the OpenAPI document)."""

    name: str
    body: Callable[[Problem], dict[str, Any]]
    schema: dict[str, Any]


#: The service's own errors (``/v1`` and the operations): ``{"error": {"type", "message"}}``.
ERROR = Shape(
    "Error",
    Problem.body,
    {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
                "required": ["type", "message"],
            }
        },
        "required": ["error"],
    },
)

#: How a write that ran out of room reads (ENOSPC, EDQUOT as the agent reports them).
_NO_SPACE = ("No space left on device", "Disk quota exceeded")

#: The agent's refusals that name a mistake in the request (a bad env name, a path outside the
#: work dir), as opposed to its own failures: the caller's, so 400, never 500.
_CALLERS_MISTAKES = frozenset({"bad_request", "unsafe_path"})


def bad_request(message: str) -> Problem:
    return Problem(400, "bad_request", message)


def not_found(what: str) -> Problem:
    return Problem(404, "not_found", f"{what} does not exist for this token (it never did, expired or was deleted)")


def problem_for(exc: SandboxError) -> Problem:
    """The answer for an error of the sandbox layer that reached a handler."""
    if isinstance(exc, UnsupportedLanguage):
        return Problem(400, "unsupported_language", str(exc))
    if isinstance(exc, UnsafePath):  # the request's paths were checked: this is what the sandbox holds
        return Problem(409, "file_conflict", f"unsafe path: {exc}; the sandbox's files do not allow it as they are")
    if isinstance(exc, AgentError) and exc.kind in _CALLERS_MISTAKES:
        return Problem(400, "bad_request", f"the sandbox refused the request: {exc}")
    if isinstance(exc, FileTransferError):
        if str(exc).startswith("not found"):
            return Problem(404, "file_not_found", str(exc))
        if any(reason in str(exc) for reason in _NO_SPACE):
            return Problem(507, "insufficient_storage", f"{exc}; write less, or remove files first")
        return Problem(409, "file_conflict", f"{exc}; the sandbox's files do not allow it as they are")
    if isinstance(exc, SnapshotUnsupported):
        return Problem(409, "snapshot_unsupported", f"{exc}; end it first, then snapshot again")
    if isinstance(exc, SnapshotNotFound):
        return not_found("that snapshot")
    if isinstance(exc, ForkError):  # not a 503: on the parent's route that would end the parent
        return Problem(409, "fork_failed", f"{exc}")
    if isinstance(exc, PoolClosed):
        return Problem(503, "unavailable", "the service is shutting down; retry on another instance", retry_after=5)
    if isinstance(exc, AcquireTimeout):
        return Problem(503, "unavailable", f"{exc}", retry_after=1)
    if isinstance(exc, SandboxUnavailable):
        return Problem(503, "unavailable", f"no sandbox can be started: {exc}", retry_after=5)
    if isinstance(exc, SandboxCrashed):
        return Problem(503, "unavailable", f"the sandbox failed: {exc}; lease a new one", retry_after=1)
    return Problem(500, "internal", f"{type(exc).__name__}: {exc}")
