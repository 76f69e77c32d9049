"""Make an installed ``gem-llm`` run its code in gem-sandbox: ``install()``, one call.

GEM executes model code with ``gem.utils.sandbox.run_python(code, sandbox_type, stdin,
timeout) -> (success, stdout, stderr)``: a host subprocess behind a substring blacklist, whose
timeout is never applied. Its Python tool and its CodeEnv test scoring import that function by
name, so :func:`install` replaces it in ``gem.utils.sandbox`` and in every loaded ``gem``
module that holds it (modules imported later pick up the replacement from
``gem.utils.sandbox``). The replacement keeps GEM's contract and its timeout message, runs the
code on a runtime and applies the timeout: the :class:`~gem_sandbox.sync.SyncRuntime` passed
as ``runtime=`` (the caller closes it), else one that :func:`install` opens and
:func:`uninstall` closes. :func:`uninstall` puts GEM's function back.

GEM calls ``run_python`` from sync code (its tools, its threads), so the runtime is a sync
one. GEM's ``sandbox_type`` (``"none"``, ``"bwrap"``) is ignored: every run is isolated, on
the runtime's backend.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from gem_sandbox.sandbox.result import Status
from gem_sandbox.sync import SyncRuntime

RunPython = Callable[..., tuple[bool, str, str]]

_owned: SyncRuntime | None = None  # the runtime install() opened, closed by uninstall()
_original: RunPython | None = None
_replacement: RunPython | None = None


def install(runtime: SyncRuntime | None = None, *, backend: str | None = None, **options: Any) -> None:
    """Route GEM's ``run_python`` through ``runtime``, or through a runtime opened here on
    ``backend`` (default: the configured one) with pool ``options`` (e.g. ``max_size=16``).
    Calling it again reinstalls with the new settings."""
    global _owned, _original, _replacement
    if runtime is not None and (backend is not None or options):
        raise TypeError("give install() a runtime or the settings to open one, not both")
    uninstall()
    gem_sandbox_module = importlib.import_module("gem.utils.sandbox")
    if runtime is None:
        runtime = _owned = SyncRuntime(backend, **options).__enter__()
    default_timeout = gem_sandbox_module.DEFAULT_TIMEOUT

    def run_python(
        code: str, sandbox_type: str = "none", stdin: str | None = None, timeout: float = default_timeout
    ) -> tuple[bool, str, str]:
        """GEM's ``run_python``, in a gem-sandbox sandbox with the timeout applied."""
        result = runtime.run(code, stdin=stdin, timeout=timeout)
        if result.status is Status.TIMEOUT:
            return False, "", f"\nExecution timed out after {timeout} seconds."
        if result.status is Status.INFRA_ERROR:
            return False, "", f"Sandbox failure, not an error in the code: {result.stderr.strip()}"
        return result.exit_code == 0, result.stdout, result.stderr.strip()

    _original, _replacement = gem_sandbox_module.run_python, run_python
    _swap(_original, _replacement)


def uninstall() -> None:
    """Restore GEM's own ``run_python`` everywhere and close the runtime :func:`install`
    opened. Safe when not installed."""
    global _owned, _original, _replacement
    if _original is not None and _replacement is not None:
        _swap(_replacement, _original)
    if _owned is not None:
        _owned.close()
    _owned = _original = _replacement = None


def installed() -> bool:
    return _replacement is not None


def _swap(old: RunPython, new: RunPython) -> None:
    """Rebind ``run_python`` from ``old`` to ``new`` in every loaded ``gem`` module."""
    for name, module in list(sys.modules.items()):
        if (name == "gem" or name.startswith("gem.")) and getattr(module, "run_python", None) is old:
            module.run_python = new
