"""Linux process controls the ``os`` module lacks, called through libc with ctypes.

Each is defence in depth on top of uids and rlimits, so each degrades to a no-op returning
False where ctypes or the call is missing (a minimal image's Python may lack ctypes).
"""

import os
import struct

PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
M_ARENA_MAX = -8
_CAPABILITY_VERSION_3 = 0x20080522

# Syscalls an unprivileged process may make that reach kernel state outliving it or shared
# beyond the sandbox, denied to runs (Docker's default profile denies them too): keyrings
# (per uid, not per sandbox), new namespaces, userfaultfd, perf events, eBPF and io_uring.
# ``clone`` is denied only with namespace flags; ``clone3`` (whose flags a filter cannot
# read) answers ENOSYS, and glibc then falls back to ``clone``.
_DENIED = (
    "add_key",
    "request_key",
    "keyctl",
    "unshare",
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "io_uring_setup",
)
_SYSCALLS = {  # audit arch, syscall numbers
    "x86_64": (
        0xC000003E,
        dict(add_key=248, request_key=249, keyctl=250, unshare=272, userfaultfd=323,
             perf_event_open=298, bpf=321, io_uring_setup=425, clone=56, clone3=435),
    ),
    "aarch64": (
        0xC00000B7,
        dict(add_key=217, request_key=218, keyctl=219, unshare=97, userfaultfd=282,
             perf_event_open=241, bpf=280, io_uring_setup=425, clone=220, clone3=435),
    ),
}
_CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
_X32_BIT = 0x40000000

try:
    import ctypes

    _libc = ctypes.CDLL(None, use_errno=True)

    class _CapHeader(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _CapData(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]

    class _Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

except (ImportError, OSError) as exc:
    from . import log  # only here: the zygote, which imports this module, stays without it

    log.warning(
        "no ctypes/libc (%s): running without subreaper and no_new_privs", exc
    )
    _libc = None


def _prctl(option, value):
    return _libc is not None and _libc.prctl(option, value, 0, 0, 0) == 0


def set_child_subreaper():
    """Orphans of runs are re-parented to the agent, so they stay findable as its
    descendants (and are reaped by it) even after a double fork."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_not_dumpable():
    """Processes of the same uid can no longer open this one's ``/proc/<pid>/fd``, ``mem``
    or ``environ``, nor ptrace it: in the rootless backend runs share the agent's uid, and
    this is what keeps its protocol pipes and memory out of their reach. Forked children
    inherit it (exec clears it)."""
    return _prctl(PR_SET_DUMPABLE, 0)


def deny_shared_kernel_state():
    """Install the seccomp filter of :data:`_DENIED` (needs ``no_new_privs`` first). False
    where the architecture is unknown or seccomp is missing."""
    program = seccomp_program()
    if _libc is None or program is None:
        return False
    fprog = _Program(len(program) // 8, ctypes.cast(ctypes.c_char_p(program), ctypes.c_void_p))
    return _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


_FILTER = []  # the assembled filter, once: every child forked later inherits it


def seccomp_program():
    """The filter as raw BPF (None where the architecture is unknown), assembled once per
    process: a run's child only loads it."""
    if not _FILTER:
        _FILTER.append(_build_filter())
    return _FILTER[0]


def _build_filter():
    machine = os.uname().machine
    known = _SYSCALLS.get(machine)
    if known is None:
        return None
    arch, numbers = known
    # (code, k, label to jump to when true, label when false); None: the next instruction.
    program = [(_LD, 4, None, None), (_JEQ, arch, None, "deny")]  # another ABI (i386): deny
    program.append((_LD, 0, None, None))
    if machine == "x86_64":
        program.append((_JGE, _X32_BIT, "deny", None))  # the x32 ABI: deny it whole
    program += [(_JEQ, numbers[name], "deny", None) for name in _DENIED]
    program += [
        (_JEQ, numbers["clone3"], "enosys", None),
        (_JEQ, numbers["clone"], None, "allow"),
        (_LD, 16, None, None),  # args[0], low half: clone's flags
        (_JSET, _CLONE_NEW_FLAGS, "deny", "allow"),
    ]
    labels = {"allow": _RET_ALLOW, "enosys": _RET_ENOSYS, "deny": _RET_EPERM}
    return b"".join(struct.pack("=HBBI", *insn) for insn in _assemble(program, labels))


_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|..|K
_RET_ALLOW, _RET_ENOSYS, _RET_EPERM = 0x7FFF0000, 0x00050026, 0x00050001


def _assemble(program, labels):
    """Classic BPF from ``program`` followed by one ``ret`` per label; jumps are relative."""
    ends = dict((name, len(program) + i) for i, name in enumerate(labels))

    def offset(here, label):
        return 0 if label is None else ends[label] - here - 1

    code = [(op, offset(i, t), offset(i, f), k) for i, (op, k, t, f) in enumerate(program)]
    return code + [(_RET, 0, 0, value) for value in labels.values()]


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


def release_free_memory():
    """Hand the heap's free pages back to the kernel (``malloc_trim``): after a tenant's
    large outputs and files the agent returns to its idle size instead of keeping its peak."""
    return _libc is not None and _libc.malloc_trim(0) == 1


def limit_malloc_arenas(count):
    """glibc reserves 64 MiB of address space per malloc arena (up to 8 per core); under an
    RLIMIT_AS cap a few threads would exhaust it. Forked Python runs inherit this setting."""
    return _libc is not None and _libc.mallopt(M_ARENA_MAX, count) == 1
