"""GEM's ``gem.utils.sandbox``: ``run_python(code, sandbox_type, stdin, timeout) -> (success,
stdout, stderr)``, here in a real sandbox.

GEM runs the code in a host subprocess behind a substring blacklist (``sandbox_type="none"``)
or under bubblewrap on the host's Python (``"bwrap"``), and never applies ``timeout``. Here
every run is a sandbox of ``runtime`` (the process default for sync callers, as GEM's callers
are) with the timeout applied; ``sandbox_type`` is checked to be one of GEM's values and
otherwise ignored: nothing is blocked, the sandbox is the isolation. Around the run it does
what GEM does (:func:`~gem_sandbox.tools.python_code_tool.run_like_gem`): ``...`` is a SyntaxError,
code that fails with ``is not defined`` runs again with GEM's standard imports, a timeout is
GEM's message with no output, and the answer is worded as the Python tool words it
(:func:`~gem_sandbox.tools.python_code_tool.as_gem_answer`: a sandbox failure is said in
``stderr`` as such, never as the code's error). GEM's ``subprocess_run`` and ``check_forbidden_imports`` (the host run and its
blacklist) have no counterpart.
"""

from __future__ import annotations

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.sync import SyncRuntime, resolve_runtime, run_sync
from gem_sandbox.tools.python_code_tool import as_gem_answer, run_like_gem

#: GEM's default timeout of a run, in seconds.
DEFAULT_TIMEOUT = 10
#: GEM's ``sandbox_type`` values.
SANDBOX_TYPES = ("none", "bwrap")


def run_python(
    code: str,
    sandbox_type: str = "none",
    stdin: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    runtime: Runtime | SyncRuntime | None = None,
) -> tuple[bool, str, str]:
    """Run ``code`` as GEM's ``run_python`` does, in a sandbox: ``(exit code 0, stdout, stderr)``.
    Blocking; async code passes its own ``runtime`` (a :class:`SyncRuntime` here) or awaits
    :func:`~gem_sandbox.tools.python_code_tool.run_like_gem` itself."""
    if sandbox_type not in SANDBOX_TYPES:
        raise ValueError(f"sandbox_type is one of {', '.join(SANDBOX_TYPES)}, got {sandbox_type!r}")
    return as_gem_answer(run_sync(_run, runtime, code, stdin, timeout), timeout)


async def _run(runtime: Runtime | SyncRuntime | None, code: str, stdin: str | None, timeout: float) -> ExecResult:
    return await run_like_gem(await resolve_runtime(runtime), code, stdin=stdin, timeout=timeout)


__all__ = ["DEFAULT_TIMEOUT", "SANDBOX_TYPES", "run_python"]
