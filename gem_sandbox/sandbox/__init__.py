"""Sandboxes: the shapes every pool and leased sandbox has, the client of one local sandbox,
the local pool, their settings and errors.

Most code reaches sandboxes through :class:`gem_sandbox.Runtime`; these are the parts it is
made of, for code that drives a pool directly or inspects results.
"""

from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.client import Sandbox, SandboxState
from gem_sandbox.sandbox.errors import (
    AcquireTimeout,
    BackendNotAvailable,
    ConfigError,
    FileTransferError,
    ForkError,
    PoolClosed,
    SandboxCrashed,
    SandboxError,
    SandboxUnavailable,
    SnapshotNotFound,
    SnapshotUnsupported,
    UnsafePath,
)
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import PoolConfig, PoolStatistics, SandboxPool
from gem_sandbox.sandbox.protocols import LeasedSandbox, Pool
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sandbox.snapshots import Snapshot

__all__ = [
    "AcquireTimeout",
    "Backend",
    "BackendNotAvailable",
    "ConfigError",
    "ExecResult",
    "FileTransferError",
    "ForkError",
    "LeasedSandbox",
    "Pool",
    "PoolClosed",
    "PoolConfig",
    "PoolStatistics",
    "RunLimits",
    "Sandbox",
    "SandboxCrashed",
    "SandboxError",
    "SandboxPool",
    "SandboxSpec",
    "SandboxState",
    "SandboxUnavailable",
    "Snapshot",
    "SnapshotNotFound",
    "SnapshotUnsupported",
    "Status",
    "UnsafePath",
]
