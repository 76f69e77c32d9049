"""Lazy re-exports of the catalogue's env classes under GEM's module paths.

The library (``gem_sandbox``) must not import the catalogue (``gem_sandbox_envs``) when it is
imported: the catalogue is a separate package of envs that registers through an entry point,
its modules pull in datasets, word lists and optional dependencies (``reasoning_gym``,
``math_verify``), and a library that imported it eagerly would make every ``import
gem_sandbox`` pay for all of it (and fail where an extra is missing). So each GEM path
(``gem_sandbox.envs.math_env``) is a module whose names resolve on first access, through a
module ``__getattr__`` (PEP 562), to the catalogue's class.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(module: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` resolving each name of ``exports`` to its
    ``"package.module:attr"`` on first access (then cached in the module)."""

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        module_name, _, attr = target.partition(":")
        value = getattr(importlib.import_module(module_name), attr)
        setattr(importlib.import_module(module), name, value)  # the next access is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(module)), *exports})

    return __getattr__, __dir__
