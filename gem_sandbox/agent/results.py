"""How a command ended, as a status and the result frame's header and payload."""

import signal

# What an allocation failure under RLIMIT_AS looks like on stderr: Python, C++, glibc/bash.
_MEMORY_MARKERS = (b"MemoryError", b"std::bad_alloc", b"Cannot allocate memory", b"xmalloc")


def status_of(
    exit_code, sig, stderr_tail, timed_out=False, flooded=False, interrupted=False, truncated=False
):
    """The result status. ``timed_out``, ``flooded`` and ``interrupted`` say the agent itself
    ended the command (deadline, output ceiling, reset); a SIGKILL it did not send can only
    be the kernel's (the OOM killer)."""
    if timed_out or sig == signal.SIGXCPU:
        return "timeout"
    if flooded:
        return "output_limit"
    if interrupted:
        return "killed"
    if sig == signal.SIGKILL:
        return "oom"
    if exit_code and any(marker in stderr_tail[-2048:] for marker in _MEMORY_MARKERS):
        return "oom"
    if sig is not None:
        return "killed"
    if truncated:
        return "output_limit"
    return "ok" if exit_code == 0 else "error"


def result(status, exit_code, sig, out, err, duration_ms, cpu_ms):
    """``(header fields, payload)`` of a result: stdout then stderr in one payload."""
    stdout, stderr = out.value(), err.value()
    fields = {
        "status": status,
        "exit_code": exit_code,
        "signal": sig,
        "stdout_bytes": out.total,
        "stderr_bytes": err.total,
        "stdout_len": len(stdout),
        "truncated": out.truncated or err.truncated,
        "duration_ms": round(duration_ms, 3),
        "cpu_ms": round(cpu_ms, 3),
    }
    return fields, stdout + stderr
