"""What this machine can run, and what to do about what it cannot (``gem-sandbox doctor``).

Each check is independent and never raises: a missing optional dependency is a failed check
with a fix, not a crash, so the report is complete however broken the machine is.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

_DOCKER_EXTRA = "pip install 'gem-sandbox[docker]'"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None  # what to run or change when not ok


def checks() -> list[Check]:
    """Run every check, in the order a reader would fix them."""
    return [_guard(name, check) for name, check in _CHECKS]


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
    try:
        import docker
    except ImportError:
        return Check("docker", False, "the docker package is not installed", _DOCKER_EXTRA)
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
            f"no Docker daemon answers: {exc}",
            "start it: `systemctl start docker` (or run `dockerd` as root)",
        )
    return Check("docker", True, f"Docker {version['Version']} (API {version['ApiVersion']})")


def _sandbox_image() -> Check:
    try:
        from gem_sandbox import images
    except ImportError:
        return Check("image", False, "the docker package is not installed", _DOCKER_EXTRA)
    try:
        status = images.image_status()
    except Exception as exc:  # no daemon or no source checkout: say which
        return Check("image", False, f"cannot tell: {exc}", "fix the docker check first")
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


def _guard(name: str, check: Callable[[], Check]) -> Check:
    try:
        return check()
    except Exception as exc:  # a check must report, never abort the others
        return Check(name, False, f"the check itself failed: {exc!r}", None)


_CHECKS: list[tuple[str, Callable[[], Check]]] = [
    ("python", _python),
    ("docker", _docker_daemon),
    ("image", _sandbox_image),
    ("bubblewrap", _bubblewrap),
]
