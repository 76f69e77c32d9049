"""The process's sandbox settings: which backend, and the pool's limits, for runtimes that
are not told otherwise.

Settings come from ``gem_sandbox.configure(...)`` or, before any call, from ``GEM_SANDBOX_*``
environment variables (``GEM_SANDBOX_BACKEND=docker``, ``GEM_SANDBOX_MAX_SIZE=16``, ...; each
:class:`PoolConfig`, :class:`SandboxSpec` and :class:`RunLimits` field by its upper-case name).
``backend="auto"`` takes Docker when a daemon answers and the sandbox image is built, else the
local bubblewrap sandbox. The unisolated ``process`` backend is only ever chosen by name.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any

from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.errors import BackendNotAvailable
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import PoolConfig

BACKENDS = {
    "docker": "gem_sandbox.sandbox.backends.docker:DockerBackend",
    "local": "gem_sandbox.sandbox.backends.local:LocalBackend",
    "process": "gem_sandbox.sandbox.backends.local:ProcessBackend",
}
AUTO_ORDER = ("docker", "local")
ENV_PREFIX = "GEM_SANDBOX_"

_backend_name: str | None = None
_pool_config: PoolConfig | None = None


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of: auto, {', '.join(BACKENDS)}")
    module, _, attr = BACKENDS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        extra = {"docker": "docker"}.get(name)
        hint = f" (pip install 'gem-sandbox[{extra}]')" if extra else ""
        raise BackendNotAvailable(f"the {name} backend cannot be imported: {exc}{hint}") from exc


def resolve_backend_name(name: str = "auto") -> str:
    """The backend that ``name`` means on this machine; raises when none can run."""
    if name != "auto":
        problem = backend_class(name).check()
        if problem:
            raise BackendNotAvailable(f"the {name} backend cannot run here: {problem}")
        return name
    problems = []
    for candidate in AUTO_ORDER:
        try:
            problem = backend_class(candidate).check()
        except BackendNotAvailable as exc:
            problem = str(exc)
        if problem is None:
            return candidate
        problems.append(f"{candidate}: {problem}")
    raise BackendNotAvailable(
        "no isolating sandbox backend can run here ("
        + "; ".join(problems)
        + "). Install bubblewrap or Docker, or choose backend='process' knowingly: it is not isolated."
    )


def configure(backend: str | None = None, **options: Any) -> PoolConfig:
    """Set the default backend and pool options (any :class:`PoolConfig`, :class:`SandboxSpec`
    or :class:`RunLimits` field) for runtimes opened from now on; returns the pool config."""
    global _backend_name, _pool_config
    if backend is not None:
        if backend != "auto":
            backend_class(backend)  # validates the name
        _backend_name = backend
    _pool_config = with_options(pool_config(), options)
    return _pool_config


def backend_name() -> str:
    return _backend_name or os.environ.get(ENV_PREFIX + "BACKEND", "auto")


def make_backend(name: str | None = None) -> Backend:
    """An instance of the configured (or named) backend, after checking it can run."""
    return backend_class(resolve_backend_name(name or backend_name()))()


def pool_config() -> PoolConfig:
    if _pool_config is not None:
        return _pool_config
    options = {}
    for cls in (PoolConfig, SandboxSpec, RunLimits):
        for f in dataclasses.fields(cls):
            raw = os.environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None and f.name not in ("spec", "limits", "labels"):
                options[f.name] = _parse(raw, f.name)
    return with_options(PoolConfig(), options)


def with_options(config: PoolConfig, options: dict[str, Any]) -> PoolConfig:
    """``config`` with any PoolConfig, SandboxSpec or RunLimits fields replaced by ``options``."""
    groups: dict[str, dict[str, Any]] = {"pool": {}, "spec": {}, "limits": {}}
    names = {
        "pool": {f.name for f in dataclasses.fields(PoolConfig)},
        "spec": {f.name for f in dataclasses.fields(SandboxSpec)},
        "limits": {f.name for f in dataclasses.fields(RunLimits)},
    }
    for key, value in options.items():
        group = next((g for g, fields in names.items() if key in fields), None)
        if group is None:
            raise TypeError(f"unknown sandbox option {key!r}")
        groups[group][key] = value
    config = dataclasses.replace(config, **groups["pool"])
    return dataclasses.replace(
        config,
        spec=dataclasses.replace(config.spec, **groups["spec"]),
        limits=dataclasses.replace(config.limits, **groups["limits"]),
    )


def _parse(raw: str, name: str) -> Any:
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    if raw.lower() in ("none", ""):
        return None
    if name == "image":
        return raw
    raise ValueError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a number")
