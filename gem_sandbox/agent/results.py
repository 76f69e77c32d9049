"""How a command ended, as a status and the result frame's header and payload."""

import signal

from .pipes import Capture


def status_of(
    exit_code,
    sig,
    timed_out=False,
    flooded=False,
    interrupted=False,
    oom_killed=False,
    truncated=False,
):
    """The result status, from observations only: the wait status (``exit_code``, ``sig``),
    the agent's own decisions (``timed_out``, ``flooded``, ``interrupted``: deadline, output
    ceiling, reset) and the kernel's (``oom_killed``: the cgroup's OOM-kill count rose
    while the command ran). Nothing the command printed is read."""
    if timed_out:
        return "timeout"
    if flooded:
        return "output_limit"
    if interrupted:
        return "killed"
    if sig == signal.SIGKILL and oom_killed:
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


def failed_before_start(message, exit_code=2):
    """A command that could not start for a reason of its own making (bash cannot read a
    NUL byte): an ``error`` with the reason on stderr, as the program would report it."""
    data = (message + "\n").encode("utf-8", "replace")
    err = Capture(len(data))
    err.add(data)
    return result("error", exit_code, None, Capture(0), err, 0.0, 0.0)
