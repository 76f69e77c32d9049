"""System V IPC objects (shared memory, message queues, semaphore sets) that runs leave.

They belong to no process: a segment stays resident after its creator exits, beyond any
limit of that run, and the next tenant of the sandbox could attach it. The sandbox has an
IPC namespace of its own, so what is listed here is what its runs made. Only an object's
creator (or CAP_SYS_ADMIN, which the agent lacks) may remove it, so in uid mode the removal
runs in a helper that has become the creator's uid (see :mod:`.tenants`).
"""

from . import log

IPC_RMID = 0
_KINDS = (("shm", "shmid"), ("msg", "msqid"), ("sem", "semid"))

try:
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)
except (ImportError, OSError):
    _libc = None


def objects():
    """``[(kind, id, creator uid)]`` of every object in the sandbox's IPC namespace."""
    found = []
    for kind, id_column in _KINDS:
        try:
            with open("/proc/sysvipc/%s" % kind, "rb") as f:
                header, *rows = f.read().decode("ascii", "replace").splitlines()
        except (OSError, ValueError):
            continue
        names = header.split()
        at_id, at_cuid = names.index(id_column), names.index("cuid")
        for row in rows:
            fields = row.split()
            found.append((kind, int(fields[at_id]), int(fields[at_cuid])))
    return found


def creators():
    """The uids that created an object still there."""
    return set(cuid for _, _, cuid in objects())


def remove_own(uid):
    """Remove every object ``uid`` created (call as that uid, or as the agent in token
    mode); returns how many could not be removed."""
    if _libc is None:
        log.warning("no ctypes: System V IPC objects cannot be removed")
        return len(objects())
    calls = {
        "shm": lambda ident: _libc.shmctl(ident, IPC_RMID, None),
        "msg": lambda ident: _libc.msgctl(ident, IPC_RMID, None),
        "sem": lambda ident: _libc.semctl(ident, 0, IPC_RMID),
    }
    failed = 0
    for kind, ident, cuid in objects():
        if cuid == uid and calls[kind](ident) != 0:
            failed += 1
    return failed
