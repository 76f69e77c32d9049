"""The process's sandbox settings: which backend, and the pool's limits, for runtimes that
are not told otherwise.

Settings come from ``gem_sandbox.configure(...)`` or, before any call, from ``GEM_SANDBOX_*``
environment variables (``GEM_SANDBOX_BACKEND=docker``, ``GEM_SANDBOX_MAX_SIZE=16``, ...; each
:class:`PoolConfig`, :class:`SandboxSpec` and :class:`RunLimits` field by its upper-case name).
Every field name is unique across the three, so one flat namespace of options names them all;
docs/configuration.md tabulates them. A bad value or an unknown name raises
:class:`ConfigError` where it is set; a ``GEM_SANDBOX_*`` variable that names nothing is warned
about. ``backend="auto"`` takes Docker when a daemon answers and the sandbox image is built,
else the local bubblewrap sandbox. The unisolated ``process`` backend is only ever chosen by name.
``GEM_SANDBOX_URL`` sends runtimes that are given no backend to a pool service instead
(:func:`service_endpoint`, docs/service.md), and ``GEM_SANDBOX_RAY`` to the pool actors of a
Ray cluster (:func:`ray_pools`, docs/scale-out.md).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
import sys
import warnings
from typing import Any

from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.errors import BackendNotAvailable, ConfigError
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sandbox.settings import check_value, declared

BACKENDS = {
    "docker": "gem_sandbox.sandbox.backends.docker:DockerBackend",
    "local": "gem_sandbox.sandbox.backends.local:LocalBackend",
    "process": "gem_sandbox.sandbox.backends.local:ProcessBackend",
    "e2b": "gem_sandbox.sandbox.backends.e2b:E2BBackend",
}
BACKEND_CHOICES = ("auto", *BACKENDS)
AUTO_ORDER = ("docker", "local")
ENV_PREFIX = "GEM_SANDBOX_"
BACKEND_VARIABLE = ENV_PREFIX + "BACKEND"

#: Option name -> the class it is a field of, and the field.
OPTIONS: dict[str, tuple[type, dataclasses.Field[Any]]] = {
    f.name: (cls, f) for cls in (PoolConfig, SandboxSpec, RunLimits) for f in dataclasses.fields(cls)
}
#: Options holding objects, which no environment variable sets.
NESTED = frozenset({"spec", "limits", "labels"})
#: ``GEM_SANDBOX_<NAME>`` -> the option it sets.
VARIABLES = {ENV_PREFIX + name.upper(): name for name in OPTIONS if name not in NESTED}
#: ``GEM_SANDBOX_*`` variables that are not settings, each with why it exists; any other
#: unknown one is warned about as a likely typo.
OTHER_VARIABLES = {
    "GEM_SANDBOX_BOX": "passed to bwrap to name a local sandbox, so /proc scans find it (backends/local/scan.py)",
    "GEM_SANDBOX_TOKEN": "set by the agent in each run's environment to name its tenant (agent/tenants.py)",
    "GEM_SANDBOX_REQUIRE_DOCKER": "tests: 1 turns a skipped Docker test into a failure (tests/conftest.py, .ci/run)",
    "GEM_SANDBOX_REQUIRE_TRAINERS": "tests: 1 turns any skip into a failure, for the trainer adapters' run (tests/conftest.py, .ci/run)",
    "GEM_SANDBOX_TEST_HOST_SECRET": "tests: a host variable that must never reach a sandbox (test_docker_hardening.py)",
    "GEM_SANDBOX_URL": "the pool service that runtimes given no backend use (runtime.py, docs/service.md)",
    "GEM_SANDBOX_SERVICE_TOKEN": "the token sent to GEM_SANDBOX_URL's service (runtime.py, docs/service.md)",
    "GEM_SANDBOX_RAY": "the Ray cluster's pool actors that runtimes given no backend use (runtime.py, docs/scale-out.md)",
}
URL_VARIABLE = ENV_PREFIX + "URL"
SERVICE_TOKEN_VARIABLE = ENV_PREFIX + "SERVICE_TOKEN"
RAY_VARIABLE = ENV_PREFIX + "RAY"

#: The pool service's settings (``gem-sandbox serve``), read by gem_sandbox/service/options.py.
SERVICE_PREFIX = ENV_PREFIX + "SERVE_"

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_backend_name: str | None = None
_pool_config: PoolConfig | None = None
_warned: set[str] = set()  # unknown variables already warned about: once per process each


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise _unknown_backend(name)
    module, _, attr = BACKENDS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        extra = {"docker": "docker", "e2b": "e2b"}.get(name)
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
    or :class:`RunLimits` field) for runtimes opened from now on; returns the pool config.
    Everything is checked first, so a bad call raises and leaves the settings as they were."""
    global _backend_name, _pool_config
    if backend not in (None, "auto"):
        backend_class(backend)  # validates the name
    config = with_options(pool_config(), options)
    if backend is not None:
        _backend_name = backend
    _pool_config = config
    return config


def backend_name() -> str:
    return _backend_name or os.environ.get(BACKEND_VARIABLE, "auto")


def service_endpoint() -> tuple[str, str | None] | None:
    """The pool service (URL, token) that a runtime given no backend uses: ``GEM_SANDBOX_URL``
    with ``GEM_SANDBOX_SERVICE_TOKEN`` (or a ``/t/<token>`` ending of the URL), unless
    :func:`configure` named a backend, which is the later layer."""
    url = os.environ.get(URL_VARIABLE)
    if not url or _backend_name is not None:
        return None
    return url, os.environ.get(SERVICE_TOKEN_VARIABLE) or None


def ray_pools() -> str | None:
    """The set of pool actors on the Ray cluster that a runtime given no backend uses:
    ``GEM_SANDBOX_RAY`` (docs/scale-out.md), unless :func:`configure` named a backend."""
    if _backend_name is not None:
        return None
    return os.environ.get(RAY_VARIABLE) or None


def make_backend(name: str | None = None) -> Backend:
    """An instance of the configured (or named) backend, after checking it can run."""
    return backend_class(resolve_backend_name(name or backend_name()))()


def pool_config() -> PoolConfig:
    if _pool_config is not None:
        return _pool_config
    return with_options(PoolConfig(), environment_options())


def with_options(config: PoolConfig, options: dict[str, Any]) -> PoolConfig:
    """``config`` with any PoolConfig, SandboxSpec or RunLimits fields replaced by ``options``."""
    for name in options:
        if name not in OPTIONS:
            raise _unknown_option(name)
    groups: dict[type, dict[str, Any]] = {PoolConfig: {}, SandboxSpec: {}, RunLimits: {}}
    for name, value in options.items():
        groups[OPTIONS[name][0]][name] = value
    config = dataclasses.replace(config, **groups[PoolConfig])
    return dataclasses.replace(
        config,
        spec=dataclasses.replace(config.spec, **groups[SandboxSpec]),
        limits=dataclasses.replace(config.limits, **groups[RunLimits]),
    )


def environment_options() -> dict[str, Any]:
    """The options ``GEM_SANDBOX_*`` variables set, each parsed and checked by its field's
    declaration. A variable that names nothing is warned about (once), not ignored in silence:
    a typo would otherwise leave a limit at its default unnoticed."""
    options: dict[str, Any] = {}
    for variable, raw in os.environ.items():
        if variable in VARIABLES:
            options[VARIABLES[variable]] = _parse(variable, raw)
        elif variable == BACKEND_VARIABLE:
            if raw not in BACKEND_CHOICES:
                raise _unknown_backend(raw, f" in {BACKEND_VARIABLE}")
        elif _is_unknown(variable):
            _warn_unknown_variable(variable)
    return options


def unknown_variables() -> dict[str, str]:
    """Each ``GEM_SANDBOX_*`` variable set here that names no setting, with what to do about
    it (``gem-sandbox doctor`` lists them; reading the settings warns about each once)."""
    return {variable: _unknown_variable_message(variable) for variable in sorted(os.environ) if _is_unknown(variable)}


def _is_unknown(variable: str) -> bool:
    return (
        variable.startswith(ENV_PREFIX)
        and not variable.startswith(SERVICE_PREFIX)
        and variable not in VARIABLES
        and variable != BACKEND_VARIABLE
        and variable not in OTHER_VARIABLES
    )


def parse_option(name: str, raw: str) -> Any:
    """The value of option ``name`` written as text (``--pool max_size=16``), parsed and
    checked as its ``GEM_SANDBOX_*`` variable would be."""
    if name not in OPTIONS or name in NESTED:
        raise _unknown_option(name)
    return _parse(ENV_PREFIX + name.upper(), raw)


def _parse(variable: str, raw: str) -> Any:
    field = OPTIONS[VARIABLES[variable]][1]
    rule = declared(field)
    if rule.optional and raw.strip().lower() in ("", "none"):
        return None
    try:
        value = rule.parse(raw)
    except ValueError:
        raise ConfigError(f"{variable} must be {rule.describe()}, got {raw!r}") from None
    check_value(field, value, variable)
    return value


def _unknown_backend(name: object, where: str = "") -> ConfigError:
    return ConfigError(f"unknown backend {name!r}{where}; choose one of: {', '.join(BACKEND_CHOICES)}")


def _unknown_option(name: str) -> ConfigError:
    valid = sorted([*OPTIONS, "backend"])
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return ConfigError(f"unknown sandbox option {name!r}{hint} Valid options: {', '.join(valid)}")


def _unknown_variable_message(variable: str) -> str:
    names = sorted([*VARIABLES.values(), "backend"])
    close = difflib.get_close_matches(variable.removeprefix(ENV_PREFIX).lower(), names, n=1)
    hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}?" if close else ""
    return f"ignoring {variable}: no gem-sandbox setting has that name{hint} (see docs/configuration.md)"


def _warn_unknown_variable(variable: str) -> None:
    if variable in _warned:
        return
    _warned.add(variable)
    warnings.warn(_unknown_variable_message(variable), UserWarning, stacklevel=_stacklevel_outside_package())


def _stacklevel_outside_package() -> int:
    """The ``stacklevel`` that points a warning at the nearest caller outside gem_sandbox
    (``configure()``, ``Runtime()``, ... reach here by different paths)."""
    frame, level = sys._getframe(1), 1  # level 1 is the function that calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level
