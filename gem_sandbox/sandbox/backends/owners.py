"""Who made a sandbox that outlives its maker (a container, an e2b sandbox): an owner id that
names a process unambiguously, ``hostname:pid:start time`` (the start time tells a dead owner
from a reused pid), and whether that process is gone, so a later process on the same host can
find and remove what no one owns any more."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def owner_id(pid: int | None = None) -> str:
    """``hostname:pid:start time`` of this process (or ``pid``); the start time tells a dead
    owner from a reused pid."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_is_dead(owner: str) -> bool:
    hostname, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if hostname != socket.gethostname() or not pid.isdigit():
        return False  # another machine's (or another pid namespace's) sandbox: not ours to judge
    return _start_time(int(pid)) != started


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]
