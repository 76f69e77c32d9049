"""Snapshots of leased sandboxes, kept by the pool that took them.

A :class:`Snapshot` is a handle: the state itself (the agent's tar stream of the work and tmp
dirs, kernels and shells; see ``gem_sandbox/agent/snapshots.py``) stays in the
:class:`SnapshotStore` of the pool that took it, until it expires or is dropped. So a
snapshot outlives the lease it was taken from, can be restored any number of times, and
never travels to a caller that could not restore it anyway (a service's client gets the
same handle, its state staying on the service).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from gem_sandbox.sandbox.errors import SnapshotNotFound, SnapshotUnsupported

DEFAULT_TTL = 3600.0  # seconds a snapshot is kept unless told otherwise
DEFAULT_STORE_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class Snapshot:
    """What a snapshot holds and until when; restore it with ``runtime.restore(snapshot)``."""

    id: str
    size: int  # bytes of state kept
    created: float  # unix time
    expires: float  # unix time
    kernels: tuple[str, ...]  # kernel names it carries
    shells: tuple[str, ...]  # shell session names it carries

    @classmethod
    def from_json(cls, data: dict) -> Snapshot:
        return cls(
            id=data["id"],
            size=data["size"],
            created=data["created"],
            expires=data["expires"],
            kernels=tuple(data["kernels"]),
            shells=tuple(data["shells"]),
        )

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "size": self.size,
            "created": self.created,
            "expires": self.expires,
            "kernels": list(self.kernels),
            "shells": list(self.shells),
        }


class SnapshotStore:
    """Snapshots' state by id, in memory, each until its expiry, all within ``max_bytes``."""

    def __init__(self, max_bytes: int = DEFAULT_STORE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: dict[str, tuple[Snapshot, bytes]] = {}

    def __len__(self) -> int:
        self._expire()
        return len(self._kept)

    @property
    def bytes(self) -> int:
        return sum(snapshot.size for snapshot, _ in self._kept.values())

    def keep(self, manifest: dict, data: bytes, ttl: float | None = None) -> Snapshot:
        self._expire()
        if self.bytes + len(data) > self.max_bytes:
            raise SnapshotUnsupported(
                f"keeping {len(data)} more bytes would pass the pool's {self.max_bytes} byte "
                "snapshot store; drop snapshots or give them a shorter ttl"
            )
        now = time.time()
        snapshot = Snapshot(
            id="snap-" + os.urandom(12).hex(),
            size=len(data),
            created=now,
            expires=now + (DEFAULT_TTL if ttl is None else ttl),
            kernels=tuple(manifest.get("kernels", ())),
            shells=tuple(manifest.get("shells", ())),
        )
        self._kept[snapshot.id] = (snapshot, data)
        return snapshot

    def state(self, snapshot: Snapshot | str) -> bytes:
        """The kept state; :class:`SnapshotNotFound` once it expired or was dropped."""
        self._expire()
        key = snapshot if isinstance(snapshot, str) else snapshot.id
        try:
            return self._kept[key][1]
        except KeyError:
            raise SnapshotNotFound(f"no snapshot {key} here: it expired, was dropped or is another pool's") from None

    def get(self, key: str) -> Snapshot:
        self.state(key)
        return self._kept[key][0]

    def drop(self, snapshot: Snapshot | str) -> None:
        """Forget it; dropping one already gone is not an error."""
        self._kept.pop(snapshot if isinstance(snapshot, str) else snapshot.id, None)

    def clear(self) -> None:
        self._kept.clear()

    def _expire(self) -> None:
        now = time.time()
        for key in [k for k, (s, _) in self._kept.items() if s.expires <= now]:
            del self._kept[key]
