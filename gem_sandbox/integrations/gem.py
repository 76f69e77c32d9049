"""Make an installed ``gem-llm`` run its code in gem-sandbox: ``install()``, one call.

GEM executes model code with ``gem.utils.sandbox.run_python(code, sandbox_type, stdin,
timeout) -> (success, stdout, stderr)``: a host subprocess behind a substring blacklist, whose
timeout is never applied (it always waits 10 s). Its Python tool and its CodeEnv test scoring
import that function by name, so :func:`install` replaces it in ``gem.utils.sandbox`` and in
every loaded ``gem`` module that holds it (modules imported later pick up the replacement from
``gem.utils.sandbox``). :func:`uninstall` puts GEM's function back.

The replacement keeps GEM's contract and what GEM does around the run
(:func:`~gem_sandbox.tools.python_code_tool.run_like_gem`): ``...`` is a ``SyntaxError``, code that
fails with ``is not defined`` runs again with GEM's standard imports prepended (in the sandbox
too), a timeout is GEM's message with no output. It runs the code on a runtime and applies
the timeout: the :class:`~gem_sandbox.sync.SyncRuntime` passed as ``runtime=`` (the caller
closes it), else one that :func:`install` opens and :func:`uninstall` closes. No blacklist:
the sandbox is the isolation.

Scoring must not fail a correct solution for a limit GEM does not have, so every run gets
:data:`SCORING_LIMITS` (output kept up to 30 MiB per stream, 4 GiB of address space) and a
runtime that :func:`install` opens gets sandboxes of :data:`SCORING_MEMORY_MB`; pass
``run_memory_mb=``, ``max_output_bytes=`` (either way) or ``memory_mb=`` (an opened runtime
only) to change them. A runtime you pass keeps its own sandbox size, which bounds every run.

GEM calls ``run_python`` from sync code (its tools, its threads), so the runtime is a sync
one. GEM's ``sandbox_type`` (``"none"``, ``"bwrap"``) is ignored: every run is isolated, on
the runtime's backend.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable
from typing import Any

from gem_sandbox.bridge import run_sync
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools.python_code_tool import as_gem_answer, run_like_gem

RunPython = Callable[..., tuple[bool, str, str]]

MIB = 1024 * 1024
#: Each scoring run's limits: enough that no correct solution fails for them (16 MiB of output
#: and 2 GiB of memory are measured in the tests). The agent's 64 MiB answer frame carries a
#: run's stdout and stderr, which bounds ``max_output_bytes`` at :data:`MAX_OUTPUT_BYTES`.
SCORING_LIMITS: dict[str, int] = {"run_memory_mb": 4096, "max_output_bytes": 30 * MIB}
#: The memory of each sandbox of a runtime that :func:`install` opens (Docker: its cgroup;
#: local: each run's RLIMIT_AS ceiling).
SCORING_MEMORY_MB = 4096
MAX_OUTPUT_BYTES = 31 * MIB

_RUN_LIMITS = frozenset(field.name for field in dataclasses.fields(RunLimits))

_owned: SyncRuntime | None = None  # the runtime install() opened, closed by uninstall()
_original: RunPython | None = None
_replacement: RunPython | None = None


def install(runtime: SyncRuntime | None = None, *, backend: str | None = None, **options: Any) -> None:
    """Route GEM's ``run_python`` through ``runtime``, or through a runtime opened here on
    ``backend`` (default: the configured one) with pool ``options`` (e.g. ``max_size=16``).
    ``RunLimits`` options (``run_memory_mb``, ``max_output_bytes``, ...) apply to each run
    either way, over :data:`SCORING_LIMITS`. Calling it again reinstalls with the new settings."""
    global _owned, _original, _replacement
    run_options = {name: options.pop(name) for name in list(options) if name in _RUN_LIMITS}
    if runtime is not None and (backend is not None or options):
        raise TypeError(
            "give install() a runtime or the settings to open one, not both "
            "(per-run limits such as run_memory_mb= go with either)"
        )
    run_options = {**SCORING_LIMITS, **run_options}
    if run_options["max_output_bytes"] > MAX_OUTPUT_BYTES:
        raise ValueError(
            f"max_output_bytes={run_options['max_output_bytes']} exceeds {MAX_OUTPUT_BYTES}: a run's stdout "
            "and stderr travel in one answer of at most 64 MiB"
        )
    uninstall()
    gem_sandbox_module = importlib.import_module("gem.utils.sandbox")
    if runtime is None:
        runtime = _owned = SyncRuntime(backend, **{"memory_mb": SCORING_MEMORY_MB, **options}).__enter__()
    limits = dataclasses.replace(runtime.runtime.config.limits, **run_options)
    default_timeout = gem_sandbox_module.DEFAULT_TIMEOUT
    target = runtime

    def run_python(
        code: str, sandbox_type: str = "none", stdin: str | None = None, timeout: float = default_timeout
    ) -> tuple[bool, str, str]:
        """GEM's ``run_python``, in gem-sandbox sandboxes with the timeout applied."""
        result = run_sync(run_like_gem, target.runtime, code, stdin=stdin, timeout=timeout, limits=limits)
        return as_gem_answer(result, timeout)

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
