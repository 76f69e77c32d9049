"""Finding local sandboxes on the host: their bwrap processes, named by :data:`BOX_VAR`.

A kill needs the sandbox's init (its death takes the pid namespace with it) and reaping
needs inits whose launcher is gone; neither is a child we can ask the kernel about, so both
come from ``/proc``. :func:`bwrap_processes` reads the whole process table: call it from a
worker thread in async code.
"""

from __future__ import annotations

import os
from typing import NamedTuple

BOX_VAR = "GEM_SANDBOX_BOX"  # given to bwrap (--setenv): its argv then names the sandbox


class BwrapProcess(NamedTuple):
    pid: int
    ppid: int
    box: str
    init: bool  # pid 1 of the sandbox's namespace (else: the launcher outside it)


def bwrap_processes() -> list[BwrapProcess]:
    """The host's bwrap processes of local sandboxes: each sandbox has a launcher and, as
    pid 1 of its pid namespace, an init (whose death takes the whole sandbox with it)."""
    found = []
    marker = BOX_VAR.encode()
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if marker not in argv:
                continue
            with open(f"/proc/{name}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            box = argv[argv.index(marker) + 1].decode()
            ppid, nspids = int(fields[b"PPid"]), fields[b"NSpid"].split()
        except (OSError, IndexError, KeyError, ValueError):
            continue
        found.append(BwrapProcess(int(name), ppid, box, init=len(nspids) > 1))
    return found
