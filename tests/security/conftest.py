"""The adversarial suite's fixtures: a backend per parameter and the harness over it.

Backends: ``docker`` (hardened containers), ``local`` (bubblewrap started as root: each run
its own uid) and ``rootless`` (bubblewrap started as ``nobody``: a user namespace, runs share
the agent's uid and are told apart by token).
"""

from __future__ import annotations

import os

import pytest

from tests.docker_fixtures import docker_client, sandbox_image  # noqa: F401  (fixtures)
from tests.sandbox_fixtures import make_backend
from tests.security.harness import SECRET, SECRET_VAR, Harness

BACKEND_NAMES = [pytest.param("docker", marks=pytest.mark.docker), "local", "rootless"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "security: the adversarial security suite (tests/security): hostile payloads on every backend"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.security)


@pytest.fixture(params=BACKEND_NAMES)
async def harness(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    # A host secret in the environment every sandbox is launched from: it must not leak in.
    monkeypatch.setenv(SECRET_VAR, SECRET)
    name = request.param
    client = None
    if name == "docker":
        from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions

        client = request.getfixturevalue("docker_client")
        backend = DockerBackend(DockerOptions(image=request.getfixturevalue("sandbox_image")))
    elif name == "local":
        backend = make_backend("local")
    else:
        make_backend("local")  # skips, saying why, where bubblewrap cannot run at all
        from gem_sandbox.sandbox.backends.local import LocalBackend

        backend = LocalBackend(user=65534)
    try:
        yield Harness(name, backend, client)
    finally:
        await backend.aclose()
