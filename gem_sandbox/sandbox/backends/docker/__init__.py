"""Docker backend: one hardened container per sandbox, its agent driven over one attach.

The agent is each container's process (under Docker's init, which also reaps orphans),
attached before it starts with its stdin, stdout and stderr; that hijacked API connection is
the sandbox's byte stream for its whole life, so a run costs a frame on an open socket instead
of a ``docker exec`` (~50 ms). When the connection closes (the host ended, however) the
agent reads EOF and exits, and the container is removed. The host never uses the container's
network (there is none): the Docker API socket is the only channel.

Hardening (design §4) is on by default and every knob is a :class:`DockerOptions` field:
no network, read-only root, sized tmpfs for ``/tmp`` and ``/work``, all capabilities dropped
but the agent's six, ``no-new-privileges``, Docker's default seccomp profile, pids, memory
(swap included) and CPU quotas, ulimits, private IPC, a sized ``/dev/shm``, capped logs, a
minimal environment, reaping labels, and one read-only host mount: the agent package.

Deviation from the design's "unprivileged ``user``": the agent runs as root *inside* the
container, holding only SETUID, SETGID, KILL, DAC_OVERRIDE, FOWNER and CHOWN. It needs
them to give every run its own unprivileged uid (which drops all capabilities, so CapEff of
sandbox code is 0), to kill a timed-out run by uid (catching ``setsid`` escapes a group kill
misses), and to empty the work dir between tenants whatever modes the code left. Sandbox code
thus never runs as root and cannot signal the agent, which an agent sharing the code's uid
could not prevent. ``no-new-privileges`` stops any way back up through setuid binaries.

Modules: :mod:`.backend` launches, kills and diagnoses containers, :mod:`.container` says
what they are made with, :mod:`.attach` is the agent's stream, :mod:`.daemon` the SDK client
and its retries, :mod:`.reaping` the labels and the orphans of dead owners.
"""

from gem_sandbox.sandbox.backends.docker.backend import DockerBackend, DockerBox
from gem_sandbox.sandbox.backends.docker.container import THREAD_VARS, DockerOptions
from gem_sandbox.sandbox.backends.docker.reaping import (
    CREATED_LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    owner_id,
)

__all__ = [
    "CREATED_LABEL",
    "OWNER_LABEL",
    "POOL_LABEL",
    "THREAD_VARS",
    "DockerBackend",
    "DockerBox",
    "DockerOptions",
    "owner_id",
]
