"""What this machine can run, and what to do about what it cannot (``gem-sandbox doctor``).

Each check is independent and never raises: a missing optional dependency is a failed check
with a fix, not a crash, so the report is complete however broken the machine is. The last
check says which backend the configured one (``GEM_SANDBOX_BACKEND``, ``configure()``, else
``auto``) resolves to here and why, because ``auto`` changes with what is installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.errors import SandboxError

DOCKER_EXTRA = "pip install 'gem-sandbox[docker]'"  # the docker backend: docker, tenacity
SERVICE_EXTRA = "pip install 'gem-sandbox[service]'"  # search serve, the search tool's server mode
RAY_EXTRA = "pip install 'gem-sandbox[ray]'"  # pools across a Ray cluster
# Why a backend that passed its check was chosen, as the backend line says it.
_WHY_IT_RUNS = {
    "docker": "the daemon answers and the image is built",
    "local": "bubblewrap runs sandboxes",
    "process": "NOT isolated: sandbox code runs as plain host processes",
}
# The checks without which no sandbox opens; the others only limit what is available.
REQUIRED = ("python", "settings", "backend", "ray")  # ray: fails only when GEM_SANDBOX_RAY is set
_BACKEND_VARIABLE = defaults.ENV_PREFIX + "BACKEND"




def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = subparsers.add_parser("doctor", help="check Docker, the images, bubblewrap and its languages, aiohttp and the settings; name the backend auto picks")
    doctor.set_defaults(func=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    """Print every check, with the fix under each failed one; exit 1 unless :func:`ready`."""
    results = checks()
    for check in results:
        mark = "ok " if check.ok else "!! "
        print(f"{mark} {check.name:<16} {check.detail}")
        if not check.ok and check.fix:
            print(f"    {'':<16} fix: {check.fix}")
    return 0 if ready(results) else 1


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None  # what to run or change when not ok


def checks() -> list[Check]:
    """Run every check, in the order a reader would fix them; the backend's verdict last."""
    return [_guard(name, check) for name, check in _CHECKS]


def ready(results: list[Check]) -> bool:
    """Whether the configured backend can run sandboxes here (the command's exit status)."""
    return all(c.ok for c in results if c.name in REQUIRED)


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info >= (3, 11)
    return Check(
        "python",
        ok,
        f"Python {version} at {sys.executable}",
        None if ok else "use Python 3.11 or newer",
    )


def _docker_daemon() -> Check:
    missing = [name for name in ("docker", "tenacity") if importlib.util.find_spec(name) is None]
    if missing:
        return Check(
            "docker", False, f"the docker backend needs {' and '.join(missing)}", DOCKER_EXTRA
        )
    import docker

    try:
        client = docker.from_env(timeout=5)
        try:
            version = client.version()
        finally:
            client.close()
    except docker.errors.DockerException as exc:
        return Check(
            "docker",
            False,
            f"no Docker daemon answers at {_docker_host()}: {exc}",
            "start it (`systemctl start docker`, or `dockerd` as root), or point DOCKER_HOST at it",
        )
    return Check("docker", True, f"Docker {version['Version']} (API {version['ApiVersion']})")


def _sandbox_image() -> Check:
    if importlib.util.find_spec("docker") is None:
        return Check("image", False, "the docker package is not installed", DOCKER_EXTRA)
    import docker

    from gem_sandbox.sandbox.backends.docker import images

    try:
        tag = images.current_tag()
    except FileNotFoundError as exc:  # the build context did not get installed
        return Check("image", False, str(exc), "reinstall gem-sandbox")
    try:
        status = images.image_status()
    except docker.errors.DockerException:
        return Check(
            "image", False, f"cannot tell whether {tag} is built: no daemon answers",
            "fix the docker check first",
        )
    if status.built:
        return Check("image", True, f"{status.tag} is built")
    if status.newest:
        return Check(
            "image",
            True,
            f"using {status.newest}; the build inputs changed since "
            f"(current: {status.tag}), `gem-sandbox images build` refreshes it",
        )
    return Check(
        "image", False, f"no sandbox image (want {status.tag})", "gem-sandbox images build"
    )


def _polyglot_image() -> Check:
    """The image with every language Debian provides (optional: the default one runs python,
    bash and cpp)."""
    if importlib.util.find_spec("docker") is None:
        return Check("polyglot", False, "the docker package is not installed", DOCKER_EXTRA)
    from gem_sandbox.sandbox.backends.docker import images

    status = images.image_status("polyglot")
    build = "gem-sandbox images build --profile polyglot"
    if status.built:
        return Check("polyglot", True, f"{status.tag} is built: every language Debian provides")
    if status.newest:
        return Check("polyglot", True, f"using {status.newest}; `{build}` refreshes it")
    return Check("polyglot", False, "no polyglot image: Docker sandboxes run python, bash, cpp", build)


def _languages() -> Check:
    """What a bubblewrap sandbox runs here: its agent's hello, which lists the languages whose
    compilers and runtimes it finds in the host's /usr."""
    from gem_sandbox.sandbox.backends.local import LocalBackend

    problem = LocalBackend.check()
    if problem:
        return Check("languages", False, f"no bubblewrap sandbox to ask: {problem}", "fix the bubblewrap check")
    served = anyio.run(_hello_languages, LocalBackend())
    return Check("languages", True, f"bubblewrap sandboxes here run {', '.join(served)}")


async def _hello_languages(backend: Backend) -> list[str]:
    from gem_sandbox.sandbox.client import open_sandbox

    async with open_sandbox(backend, SandboxSpec()) as sandbox:
        return list(sandbox.hello["languages"])


def _bubblewrap() -> Check:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Check("bubblewrap", False, "bwrap is not on PATH", "apt-get install bubblewrap")
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
    trial = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if trial.returncode != 0:
        return Check(
            "bubblewrap",
            False,
            f"{bwrap} cannot start a sandbox: {trial.stderr.strip()}",
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1;"
            " on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0)",
        )
    return Check("bubblewrap", True, f"{version.stdout.strip()} runs sandboxes")


def _service() -> Check:
    if importlib.util.find_spec("aiohttp") is None:
        return Check(
            "service",
            False,
            "aiohttp is not installed: `search serve` and the search tool's server mode need it",
            SERVICE_EXTRA,
        )
    version = importlib.metadata.version("aiohttp")
    return Check("service", True, f"aiohttp {version}: `search serve` and search over HTTP work")


def _ray() -> Check:
    """With ``GEM_SANDBOX_RAY`` set, runtimes lease from that set of pool actors: each must
    answer. Without it, only whether Ray is there to scale out with."""
    pools = defaults.ray_pools()
    installed = importlib.util.find_spec("ray") is not None
    if pools is None:
        detail = f"ray {importlib.metadata.version('ray')}" if installed else "ray is not installed"
        return Check("ray", True, f"{detail}; {defaults.RAY_VARIABLE} is not set, so no runtime uses a Ray cluster")
    if not installed:
        return Check("ray", False, f"{defaults.RAY_VARIABLE}={pools} needs ray", RAY_EXTRA)
    from gem_sandbox.sandbox.cluster import placement

    try:
        placement.connect()
    except ConnectionError as exc:
        return Check("ray", False, f"no Ray cluster to join: {exc}", "start one (`ray start --head`) or set RAY_ADDRESS")
    placed = placement.status(pools)
    up = [p for p in placed if p.state == "ready"]
    states = "; ".join(f"{p.address}: {p.state}" for p in placed) or "none placed"
    if not up:
        return Check("ray", False, f"no pool actor of {pools!r} answers ({states})", f"gem-sandbox ray up --name {pools}")
    return Check("ray", True, f"{len(up)} of {len(placed)} pool actors of {pools!r} answer: {states}")


def _settings() -> Check:
    try:
        defaults.pool_config()  # parses and checks every GEM_SANDBOX_* variable
    except ValueError as exc:  # ConfigError
        return Check("settings", False, str(exc), "fix or unset the variable")
    shown = ", ".join(f"{v}={x}" for v, x in sorted(os.environ.items()) if v.startswith(defaults.ENV_PREFIX))
    return Check("settings", True, shown or f"defaults (no {defaults.ENV_PREFIX}* variable is set)")


def _variables() -> Check:
    """A misspelt variable leaves its setting at the default: worth a warning, not a failure."""
    unknown = defaults.unknown_variables()
    if unknown:
        return Check("variables", False, "; ".join(unknown.values()), "rename or unset it")
    return Check("variables", True, f"every {defaults.ENV_PREFIX}* variable names a setting")


def _backend() -> Check:
    name = defaults.backend_name()
    try:
        resolved = defaults.resolve_backend_name(name)
    except (SandboxError, ValueError) as exc:  # nothing can run, or an unknown name (ConfigError)
        return Check("backend", False, f"{name} -> {exc}", _backend_fix(name))
    passed_over = defaults.AUTO_ORDER[: defaults.AUTO_ORDER.index(resolved)] if name == "auto" else ()
    why = "; ".join(f"{c}: {_problem(c)}" for c in passed_over) or _WHY_IT_RUNS[resolved]
    return Check("backend", True, f"{name} -> {resolved} ({why})")


def _problem(backend: str) -> str | None:
    """Why ``backend`` cannot run here (``None``: it can)."""
    try:
        return defaults.backend_class(backend).check()
    except SandboxError as exc:  # its module cannot be imported: a missing extra
        return str(exc)


def _backend_fix(name: str) -> str:
    choices = ", ".join(["auto", *defaults.BACKENDS])
    if name == "auto":
        return "fix the docker or the bubblewrap check above"
    if name not in defaults.BACKENDS:
        return f"set {_BACKEND_VARIABLE} to one of: {choices}"
    return f"fix the checks above, or choose another backend ({_BACKEND_VARIABLE}: {choices})"


def _docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "the default socket (DOCKER_HOST is not set)"


def _guard(name: str, check: Callable[[], Check]) -> Check:
    try:
        return check()
    except Exception as exc:  # a check must report, never abort the others
        return Check(name, False, f"the check itself failed: {exc!r}", None)


_CHECKS: list[tuple[str, Callable[[], Check]]] = [
    ("python", _python),
    ("docker", _docker_daemon),
    ("image", _sandbox_image),
    ("polyglot", _polyglot_image),
    ("bubblewrap", _bubblewrap),
    ("languages", _languages),
    ("service", _service),
    ("ray", _ray),
    ("settings", _settings),
    ("variables", _variables),
    ("backend", _backend),
]
