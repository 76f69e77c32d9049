"""The sandbox's memory cgroup, where there is one: the kernel's count of OOM kills.

``oom`` is the kernel's verdict, never the code's: a run is ``oom`` only when its main process
died of a SIGKILL the agent did not send while this count went up. Without a cgroup (the
local backend) the count stays at zero, so no run is ever called ``oom`` there; a self-sent
SIGKILL is ``killed`` and an allocation refused under RLIMIT_AS is the program's own
``error``.
"""

# cgroup v2's memory.events and v1's memory.oom_control both carry an "oom_kill N" line.
CANDIDATES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


class OomCounter:
    def __init__(self, path):
        """``path``: the cgroup file to read, ``"auto"`` for the first of :data:`CANDIDATES`
        that has the counter, or None for no cgroup."""
        if path == "auto":
            path = next((p for p in CANDIDATES if _read_count(p) is not None), None)
        self.path = path

    def count(self):
        if self.path is None:
            return 0
        value = _read_count(self.path)
        return value if value is not None else 0


def _read_count(path):
    try:
        with open(path, "rb") as f:
            for line in f:
                key, _, value = line.partition(b" ")
                if key == b"oom_kill":
                    return int(value)
    except (OSError, ValueError):
        pass
    return None
