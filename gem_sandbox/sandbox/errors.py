"""Typed errors. Each message says what happened and what to do about it.

Failures of the *code under test* are never raised: they come back as an
:class:`~gem_sandbox.sandbox.result.ExecResult` status. These exceptions are for mistakes
of the caller and for sandboxes that cannot be had.
"""

from __future__ import annotations


class SandboxError(Exception):
    """Base of every gem-sandbox error."""


class ConfigError(SandboxError, ValueError):
    """A setting has the wrong type or range, or names no setting; the message lists the valid
    names or range."""


class SandboxUnavailable(SandboxError):
    """No sandbox could be started or leased (backend missing, daemon down, pool closed)."""


class BackendNotAvailable(SandboxUnavailable):
    """The chosen backend cannot run on this machine (e.g. no ``bwrap``, no Docker daemon)."""


class AcquireTimeout(SandboxUnavailable, TimeoutError):
    """Every sandbox stayed busy until the acquire deadline; raise ``max_size`` or wait longer."""


class PoolClosed(SandboxUnavailable):
    """The pool was shut down."""


class SandboxCrashed(SandboxError):
    """The sandbox or its agent died; the pool replaces it. Runs report this as infra_error."""


class ProtocolError(SandboxCrashed):
    """The agent sent something that is not a valid frame; the connection is unusable."""


class ProcessEnded(SandboxError):
    """A spawned program was written to or signalled after it ended."""


class UnsupportedLanguage(SandboxError, ValueError):
    """The requested language has no runtime in this sandbox."""


class UnsafePath(SandboxError, ValueError):
    """A file path is absolute, climbs out with ``..``, or names a link or device."""


class FileTransferError(SandboxError):
    """Files could not be written or read (missing file, too large, not a regular file)."""


class AgentError(SandboxError):
    """The agent refused a request; ``kind`` is the agent's error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class ServiceUnreachable(SandboxUnavailable):
    """No answer from the pool service, after retries (connection refused or lost, no answer
    in time); runs report this as infra_error."""


class ServiceAuthError(BackendNotAvailable):
    """The pool service refused the token (401): a setup to fix, not a run to mask, so tools
    raise it as they raise :class:`BackendNotAvailable`."""


class RemoteUnsupported(SandboxError, ValueError):
    """The pool service's API cannot express this request (a run's ``cwd``, ``stdin`` that is
    not UTF-8); do it another way, e.g. ``cd`` in a shell session."""


class ServiceRequestError(SandboxError, ValueError):
    """The pool service refused a request as malformed or out of bounds (4xx); ``status`` and
    ``kind`` are its answer's, and the message says what to change."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"{status} {kind}: {message}")
        self.status = status
        self.kind = kind


class SnapshotUnsupported(SandboxError):
    """The sandbox holds state a snapshot cannot carry (a run or program still going, a
    background job, an object its kernel cannot pickle, a device file); the message names it,
    and the sandbox is untouched."""


class SnapshotNotFound(SandboxError, KeyError):
    """No snapshot by that id: it expired, was dropped, or belongs to another pool or token."""


class ForkError(SandboxError):
    """A fork could not make every branch (no room in the pool, a branch that failed to
    restore); the branches it made were released, and the parent is untouched."""
