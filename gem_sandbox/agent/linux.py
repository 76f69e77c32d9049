"""Linux process controls the ``os`` module lacks, called through libc with ctypes.

Each is defence in depth on top of uids and rlimits, so each degrades to a no-op returning
False where ctypes or the call is missing (a minimal image's Python may lack ctypes).
"""

import logging

log = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
M_ARENA_MAX = -8
_CAPABILITY_VERSION_3 = 0x20080522

try:
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)

    class _CapHeader(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _CapData(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]

except (ImportError, OSError) as exc:
    log.warning("no ctypes/libc (%s): running without subreaper and no_new_privs", exc)
    _libc = None


def _prctl(option, value):
    return _libc is not None and _libc.prctl(option, value, 0, 0, 0) == 0


def set_child_subreaper():
    """Orphans of runs are re-parented to the agent, so they stay findable as its
    descendants (and are reaped by it) even after a double fork."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_no_new_privs():
    """setuid binaries and file capabilities can no longer raise this process's privileges."""
    return _prctl(PR_SET_NO_NEW_PRIVS, 1)


def clear_capabilities():
    """Empty the effective, permitted and inheritable sets (setuid to a non-root uid already
    clears the first two; this also clears inheritable)."""
    if _libc is None:
        return False
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    return _libc.capset(ctypes.byref(header), (_CapData * 2)()) == 0


def limit_malloc_arenas(count):
    """glibc reserves 64 MiB of address space per malloc arena (up to 8 per core); under an
    RLIMIT_AS cap a few threads would exhaust it. Forked Python runs inherit this setting."""
    return _libc is not None and _libc.mallopt(M_ARENA_MAX, count) == 1
