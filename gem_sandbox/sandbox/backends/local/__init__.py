"""Backends on this machine: the agent under bubblewrap ("local") or as a plain process.

:class:`LocalBackend` starts one ``bwrap`` per sandbox: new pid, ipc, net, uts and (where
possible) cgroup namespaces; the host's ``/usr`` read-only and a generated ``/etc/passwd``;
fresh ``/proc`` and ``/dev``; sized tmpfs for ``/work``, ``/tmp`` and ``/dev/shm``; the agent
read-only at :data:`gem_sandbox.agent.MOUNT_POINT`; no network but a loopback of its own.
As root, no user namespace is made, so the agent can give every run a real uid of its own
(each sandbox gets a distinct range, so RLIMIT_NPROC counts per sandbox) and keeps only the
capabilities it needs for that. As another user, bwrap makes a user namespace and the agent
falls back to token mode (see :mod:`gem_sandbox.agent.tenants`). ``--die-with-parent`` ties
each sandbox to the thread that launched it; :meth:`LocalBackend.reap_orphans` removes the
rare one whose owner died while it was still starting.

What bubblewrap does not bound: the sandbox's total memory and CPU (there are no cgroups
here). Each run's address space is capped by RLIMIT_AS (``spec.memory_mb`` is the ceiling),
its CPU time by RLIMIT_CPU, its processes by RLIMIT_NPROC (``spec.pids``) and its files by
the tmpfs sizes and RLIMIT_FSIZE. Use the Docker backend for hard whole-sandbox quotas.

:class:`ProcessBackend` runs the same agent as a plain host subprocess with a temporary work
dir. It is NOT a security boundary (code sees the host's filesystem and network); it exists
for development and for testing the agent where bubblewrap is unavailable.

Modules: :mod:`.bwrap` starts and kills bubblewrap sandboxes, :mod:`.argv` builds what they
see, :mod:`.scan` finds their processes in ``/proc``, :mod:`.spawn` starts a launcher and
watches its exit without a thread per sandbox, :mod:`.process` is the process backend and the
box both share.
"""

from gem_sandbox.sandbox.backends.local.bwrap import BwrapBox, LocalBackend
from gem_sandbox.sandbox.backends.local.process import POLITE_EXIT, ProcessBackend, ProcessBox
from gem_sandbox.sandbox.backends.local.scan import BOX_VAR, BwrapProcess, bwrap_processes

__all__ = [
    "BOX_VAR",
    "POLITE_EXIT",
    "BwrapBox",
    "BwrapProcess",
    "LocalBackend",
    "ProcessBackend",
    "ProcessBox",
    "bwrap_processes",
]
