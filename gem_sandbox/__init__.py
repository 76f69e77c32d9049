"""gem-sandbox: GEM-compatible environments whose tools run in real, pooled sandboxes.

``import gem_sandbox as gem`` gives GEM's public surface (``make``, ``make_vec``,
``register``, ``print_envs``, ``Env``, ``EnvWrapper``), and every module path of GEM's that
trainers import exists here with the same names (``gem_sandbox.wrappers.wrapper_factory``,
``gem_sandbox.utils.parsing``, ``gem_sandbox.vector.sync_vector_env``...), so training code
switches by replacing ``gem`` with ``gem_sandbox`` in its imports. Sandboxes come from a
:class:`Runtime` the caller opens and passes as ``runtime=`` (async code), a
:class:`SyncRuntime` (blocking code), or, for sync code that passes none, the process default
that :func:`configure` sets up.

The sandbox names (``Runtime``, ``SyncRuntime``, ``configure``) load on first use, so that
playing an env without tools loads no sandbox code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gem_sandbox.__about__ import __version__
from gem_sandbox.core import Env, EnvWrapper, InvalidAction, ResetNeeded
from gem_sandbox.registry import EnvSpec, make, make_vec, print_envs, register

if TYPE_CHECKING:
    from gem_sandbox.runtime import Runtime
    from gem_sandbox.sandbox.pool import PoolConfig
    from gem_sandbox.sync import SyncRuntime

__all__ = [
    "Env",
    "EnvSpec",
    "EnvWrapper",
    "InvalidAction",
    "ResetNeeded",
    "Runtime",
    "SyncRuntime",
    "__version__",
    "configure",
    "make",
    "make_vec",
    "print_envs",
    "register",
]

# Name -> the module that defines it, imported on first access (PEP 562).
_LAZY = {"Runtime": "gem_sandbox.runtime", "SyncRuntime": "gem_sandbox.sync"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gem_sandbox' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def configure(backend: str | None = None, **options: Any) -> PoolConfig:
    """Choose the sandbox backend (``auto``, ``local``, ``docker``, ``process``) and pool
    options for runtimes opened from now on; the process default, if open, is closed and
    reopens with them at its next use. See :mod:`gem_sandbox.sandbox.defaults`."""
    from gem_sandbox.sandbox import defaults
    from gem_sandbox.sync import close_default_runtime

    config = defaults.configure(backend, **options)
    close_default_runtime()
    return config
