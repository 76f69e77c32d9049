"""Fixtures for the Docker tests: the real daemon and the real image, built once per session.

Test modules import what they use (``from tests.docker_fixtures import ...``). Without a
daemon or an image the tests skip, saying why (CI turns those skips into failures). When the
session ends no container with the pool label may remain: the daemon fixture's teardown
removes stragglers and fails the session if it found any.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import docker
import docker.errors
import pytest

from gem_sandbox import images
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import OWNER_LABEL, POOL_LABEL, DockerBackend, DockerOptions, owner_id

TEST_POOL = "gem-sandbox-tests"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """The daemon; at session end, proof that every sandbox container was removed."""
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"no Docker daemon answers: {exc}")
    yield client
    # Only this session's containers: another process's pool on the same daemon is not ours.
    mine = [POOL_LABEL, f"{OWNER_LABEL}={owner_id()}"]
    leftovers = client.containers.list(all=True, filters={"label": mine})
    for container in leftovers:
        container.remove(force=True)
    client.close()
    assert not leftovers, f"containers outlived the test session: {[c.name for c in leftovers]}"


@pytest.fixture(scope="session")
def sandbox_image(docker_client: docker.DockerClient) -> str:
    """The image for the current tree (a no-op when it is built already, as in CI)."""
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
    backend = DockerBackend(DockerOptions(image=sandbox_image))
    yield backend
    await backend.aclose()
