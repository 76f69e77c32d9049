"""Make an installed ``gem-llm`` run its code in gem-sandbox: ``install()``, one call.

GEM executes model code with ``gem.utils.sandbox.run_python(code, sandbox_type, stdin,
timeout) -> (success, stdout, stderr)``: a host subprocess behind a substring blacklist, whose
timeout is never applied. Its Python tool and its CodeEnv test scoring import that function by
name, so :func:`install` replaces it in ``gem.utils.sandbox`` and in every loaded ``gem``
module that holds it (modules imported later pick up the replacement from
``gem.utils.sandbox``). The replacement keeps GEM's contract and its timeout message, runs the
code in a pool that :func:`install` opens, and applies the timeout. :func:`uninstall` puts
GEM's function back and closes the pool.

GEM's ``sandbox_type`` (``"none"``, ``"bwrap"``) is ignored: every run goes to the installed
pool, whose backend :func:`install` chose.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from gem_sandbox.sandbox.result import Status
from gem_sandbox.sandbox.sync import SyncSandboxPool

RunPython = Callable[..., tuple[bool, str, str]]

_pool: SyncSandboxPool | None = None
_original: RunPython | None = None
_replacement: RunPython | None = None


def install(backend: str | None = None, **options: Any) -> None:
    """Route GEM's ``run_python`` through a gem-sandbox pool on ``backend`` (default: the
    configured one) with pool ``options`` (e.g. ``max_size=16``). Calling it again reinstalls
    with the new settings."""
    global _pool, _original, _replacement
    uninstall()
    gem_sandbox_module = importlib.import_module("gem.utils.sandbox")
    pool = SyncSandboxPool(backend, **options)
    pool.__enter__()
    default_timeout = gem_sandbox_module.DEFAULT_TIMEOUT

    def run_python(
        code: str, sandbox_type: str = "none", stdin: str | None = None, timeout: float = default_timeout
    ) -> tuple[bool, str, str]:
        """GEM's ``run_python``, in a gem-sandbox sandbox with the timeout applied."""
        result = pool.run(code, stdin=stdin, timeout=timeout)
        if result.status is Status.TIMEOUT:
            return False, "", f"\nExecution timed out after {timeout} seconds."
        if result.status is Status.INFRA_ERROR:
            return False, "", f"Sandbox failure, not an error in the code: {result.stderr.strip()}"
        return result.exit_code == 0, result.stdout, result.stderr.strip()

    _pool, _original, _replacement = pool, gem_sandbox_module.run_python, run_python
    _swap(_original, _replacement)


def uninstall() -> None:
    """Restore GEM's own ``run_python`` everywhere and close the pool. Safe when not installed."""
    global _pool, _original, _replacement
    if _original is not None and _replacement is not None:
        _swap(_replacement, _original)
    if _pool is not None:
        _pool.close()
    _pool = _original = _replacement = None


def installed() -> bool:
    return _replacement is not None


def _swap(old: RunPython, new: RunPython) -> None:
    """Rebind ``run_python`` from ``old`` to ``new`` in every loaded ``gem`` module."""
    for name, module in list(sys.modules.items()):
        if (name == "gem" or name.startswith("gem.")) and getattr(module, "run_python", None) is old:
            module.run_python = new
