"""Who made a container, and finding the ones whose maker died (orphans) to remove them.

Containers outlive the process that made them: a crashed owner leaves its containers
running, holding memory and uids. Every container is therefore labelled with its pool and
an owner id that names its process unambiguously, ``hostname:pid:start time`` (the start
time tells a dead owner from a reused pid), so any later process on the same host can tell
which ones no one owns any more.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import docker

from gem_sandbox.sandbox.backends.base import POOL_LABEL, SandboxSpec

OWNER_LABEL = "gem-sandbox.owner"
CREATED_LABEL = "gem-sandbox.created"


def labels(spec: SandboxSpec) -> dict[str, str]:
    """A new container's labels: the spec's, which may name the pool (else "default") but
    not the owner or the creation time."""
    return {
        POOL_LABEL: "default",
        **spec.labels,
        OWNER_LABEL: owner_id(),
        CREATED_LABEL: str(int(time.time())),
    }


def orphans(api: docker.APIClient, pool_label: str | None) -> list[str]:
    """The ids of containers (of ``pool_label``, or of any pool) whose owner is dead."""
    wanted = [OWNER_LABEL] + ([f"{POOL_LABEL}={pool_label}"] if pool_label else [])
    found = api.containers(all=True, filters={"label": wanted})
    return [c["Id"] for c in found if _owner_is_dead(c["Labels"][OWNER_LABEL])]


def owner_id(pid: int | None = None) -> str:
    """``hostname:pid:start time`` of this process (or ``pid``); the start time tells a dead
    owner from a reused pid."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def _owner_is_dead(owner: str) -> bool:
    hostname, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if hostname != socket.gethostname() or not pid.isdigit():
        return False  # another machine's (or another pid namespace's) container: not ours to judge
    return _start_time(int(pid)) != started


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]
