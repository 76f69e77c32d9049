"""The sandbox's network namespace, and what a tenant's sockets leave in it.

Loopback is the sandbox's own (Docker's ``network_mode="none"``, bubblewrap's
``--unshare-net``), so what one tenant leaves there the next one meets. A listener or a
connection dies with its process, which reset kills; but a connection closed first on its
side stays in TIME_WAIT for a minute, and while it does its port cannot be bound again
(without ``SO_REUSEADDR``; ``tcp_tw_reuse`` only helps connecting). So the agent turns
TIME_WAIT off in its namespace (``net.ipv4.tcp_max_tw_buckets = 0``: a closed connection is
freed at once; on a loopback nothing else shares, no late segment of an old connection can
reach a new one) where it may (bubblewrap; Docker's ``/proc/sys`` is read-only, so the Docker
backend sets it when it creates the container), and a reset checks that the namespace holds
no socket at all, retiring the sandbox otherwise.

Only in a namespace that is the sandbox's own: in the host's (the process backend, which is
no security boundary) every socket is someone else's, and no setting is the agent's to change.
"""

import os

TW_BUCKETS = "/proc/sys/net/ipv4/tcp_max_tw_buckets"
SOCKSTAT = ("/proc/net/sockstat", "/proc/net/sockstat6")


def own_namespace():
    """Whether the network namespace is the sandbox's: loopback is its only interface, and
    the agent is the init of its pid namespace or that init's child, which a process on
    the host never is."""
    if os.getpid() != 1 and os.getppid() != 1:
        return False
    try:
        with open("/proc/net/dev", "rb") as f:
            rows = f.read().splitlines()[2:]
    except OSError:
        return False
    return [row.split(b":")[0].strip() for row in rows] == [b"lo"]


def disable_time_wait():
    """Free closed connections at once; False where the namespace's settings are read-only
    (there the backend sets it, or a reset that finds TIME_WAIT retires the sandbox)."""
    try:
        with open(TW_BUCKETS, "w") as f:
            f.write("0")
    except OSError:
        return False
    return True


def sockets():
    """How many TCP, UDP and raw sockets the namespace holds, in any state (TIME_WAIT too).
    From the namespace's counters (``sockstat``): the tables in ``/proc/net/tcp`` list every
    socket of the host's hash to show this namespace's, 4 ms a table here, and a reset
    that read all four spent most of its time there."""
    count = 0
    for path in SOCKSTAT:
        try:
            with open(path, "rb") as f:
                rows = f.read().split(b"\n")
        except OSError:
            continue  # no IPv6
        for row in rows:
            fields = row.split()
            if fields[:1] in ([b"FRAG:"], [b"FRAG6:"]):
                continue  # fragment queues, not sockets
            for name in (b"inuse", b"tw"):
                if name in fields[:-1]:
                    count += int(fields[fields.index(name) + 1])
    return count
