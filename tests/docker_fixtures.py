"""Fixtures for the Docker tests: the real daemon and the real image, built once per session.

Test modules import what they use (``from tests.docker_fixtures import ...``). Without a
daemon or an image the tests skip, saying why (CI turns those skips into failures). When the
session ends no container with the pool label may remain: the daemon fixture's teardown
removes stragglers and fails the session if it found any.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from gem_sandbox.sandbox.backends.base import POOL_LABEL, SandboxSpec

if TYPE_CHECKING:
    import docker

    from gem_sandbox.sandbox.backends.docker import DockerBackend

TEST_POOL = "gem-sandbox-tests"


def docker_sdk() -> ModuleType:
    """The Docker SDK, or a skip saying how to get it (the modules importing these fixtures
    have bubblewrap cases too, which must still run without it)."""
    return pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """The daemon; at session end, proof that every sandbox container was removed."""
    sdk = docker_sdk()
    from gem_sandbox.sandbox.backends.docker import OWNER_LABEL, owner_id

    try:
        client = sdk.from_env(timeout=60)
        client.ping()
    except sdk.errors.DockerException as exc:
        pytest.skip(f"no Docker daemon answers: {exc}")
    yield client
    # Only this session's containers: another process's pool on the same daemon is not ours.
    mine = [POOL_LABEL, f"{OWNER_LABEL}={owner_id()}"]
    leftovers = client.containers.list(all=True, sparse=True, filters={"label": mine})
    for container in leftovers:
        container.remove(force=True)
    client.close()
    assert not leftovers, f"containers outlived the test session: {[c.short_id for c in leftovers]}"


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    """The image for the current tree (a no-op when it is built already, as in CI)."""
    from gem_sandbox.sandbox.backends.docker import images

    started = time.monotonic()
    try:
        tag = images.build(progress=lambda line: print(f"[image] {line}"))
    except Exception as exc:  # any failure to get the image means these tests cannot run
        pytest.skip(f"the sandbox image could not be built: {exc!r}")
    print(f"[image] {tag} ready after {time.monotonic() - started:.1f}s")
    return tag


@pytest.fixture
def spec() -> SandboxSpec:
    """Small limits, so that hitting them is quick and their values are easy to recognise."""
    return SandboxSpec(
        memory_mb=256, cpus=1.5, pids=48, workdir_mb=40, tmp_mb=24, labels={POOL_LABEL: TEST_POOL}
    )


@pytest.fixture
async def backend(sandbox_image: str) -> AsyncIterator[DockerBackend]:
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions

    backend = DockerBackend(DockerOptions(image=sandbox_image))
    yield backend
    await backend.aclose()
