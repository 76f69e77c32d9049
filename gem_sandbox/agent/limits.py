"""A request's ``limits`` (the host's ``RunLimits``) turned into rlimits and output caps."""

import math
import resource

from .protocol import Refused

MIB = 1024 * 1024
DEFAULTS = {
    "memory_mb": 1024,
    "cpu_seconds": None,
    "max_output_bytes": 64 * 1024,
    "file_size_mb": 64,
    "nofile": 256,
}
CEILING_FACTOR = 8  # a stream past this many times its cap gets its run killed


class Limits:
    """What one run, kernel or shell may use.

    ``memory_ceiling_mb`` (the agent's ``--memory-mb``) caps RLIMIT_AS whatever a request
    asks, so one request cannot take the whole sandbox's memory. ``nproc`` (``--nproc``) is
    RLIMIT_NPROC, which the kernel counts per uid and user namespace: the backend gives it
    only where that count is the sandbox's own.
    """

    def __init__(self, wire, timeout, memory_ceiling_mb=None, nproc=None):
        values = dict(DEFAULTS)
        unknown = set(wire or {}) - set(DEFAULTS)
        if unknown:
            raise Refused("bad_request", "unknown limits: %s" % ", ".join(sorted(unknown)))
        values.update(wire or {})
        try:
            memory = int(values["memory_mb"])
            if memory_ceiling_mb and (memory <= 0 or memory > memory_ceiling_mb):
                memory = memory_ceiling_mb
            self.memory_mb = memory
            cpu = values["cpu_seconds"]
            self.cpu_given = cpu is not None  # else the timeout's, and none without one
            self.cpu_seconds = int(cpu) if cpu is not None else int(math.ceil(timeout)) + 1
            self.max_output_bytes = max(0, int(values["max_output_bytes"]))
            self.file_size_mb = int(values["file_size_mb"])
            self.nofile = int(values["nofile"])
        except (TypeError, ValueError) as exc:
            raise Refused("bad_request", "bad limits: %s" % exc) from None
        self.nproc = nproc

    @property
    def output_ceiling(self):
        return max(self.max_output_bytes, 1) * CEILING_FACTOR

    def rlimits(self, cpu=True):
        """``[resource, soft, hard]`` triples. Kernels and shells pass ``cpu=False``: CPU
        time is counted over a process's whole life, and theirs spans many commands."""
        triples = [
            _same(resource.RLIMIT_CORE, 0),
            _same(resource.RLIMIT_NOFILE, self.nofile),
            _same(resource.RLIMIT_FSIZE, self.file_size_mb * MIB if self.file_size_mb > 0 else -1),
        ]
        if self.memory_mb > 0:
            triples.append(_same(resource.RLIMIT_AS, self.memory_mb * MIB))
        if cpu:
            # SIGXCPU at the soft limit, SIGKILL a second later if it is caught or ignored.
            triples.append([resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1])
        if self.nproc:
            triples.append(_same(resource.RLIMIT_NPROC, self.nproc))
        return triples


def _same(which, value):
    """Soft and hard limit alike (a negative value means none)."""
    value = value if value >= 0 else resource.RLIM_INFINITY
    return [which, value, value]
