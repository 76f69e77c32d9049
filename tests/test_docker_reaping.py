"""Containers whose owner died are removed by ``reap_orphans``; no one else's are."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

import os
import signal
import subprocess
import sys
import textwrap

import docker

from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import OWNER_LABEL, POOL_LABEL, DockerBackend
from tests.docker_fixtures import TEST_POOL, backend, docker_client, sandbox_image, spec  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

OWNER_SCRIPT = textwrap.dedent(
    """
    import sys, anyio
    from gem_sandbox.sandbox.backends.base import SandboxSpec
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions

    async def main():
        backend = DockerBackend(DockerOptions(image=sys.argv[1]))
        box = await backend.launch(SandboxSpec(labels={"gem-sandbox.pool": sys.argv[2]}))
        print(box.id, flush=True)
        await anyio.sleep(3600)

    anyio.run(main)
    """
)


def pool_containers(client: docker.DockerClient, pool: str) -> list:
    return client.containers.list(all=True, sparse=True, filters={"label": f"{POOL_LABEL}={pool}"})


async def test_containers_of_a_killed_owner_are_reaped(
    backend: DockerBackend, sandbox_image: str, docker_client: docker.DockerClient
) -> None:
    pool = f"{TEST_POOL}-orphans"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, sandbox_image, pool], stdout=subprocess.PIPE, text=True
    )
    try:
        container_id = owner.stdout.readline().strip()
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
    assert [c.id for c in pool_containers(docker_client, pool)] == [container_id]

    assert await backend.reap_orphans(pool) == 1
    assert pool_containers(docker_client, pool) == []


async def test_containers_of_a_live_owner_are_kept(
    backend: DockerBackend, spec: SandboxSpec, docker_client: docker.DockerClient
) -> None:
    box = await backend.launch(spec)
    try:
        assert await backend.reap_orphans(TEST_POOL) == 0
        assert [c.id for c in pool_containers(docker_client, TEST_POOL)] == [box.id]
    finally:
        await box.kill()


async def test_containers_of_another_host_are_kept(
    backend: DockerBackend, sandbox_image: str, docker_client: docker.DockerClient
) -> None:
    other = docker_client.containers.create(
        sandbox_image,
        ["sleep", "infinity"],
        labels={POOL_LABEL: TEST_POOL, OWNER_LABEL: "some-other-host:1:1"},
        network_mode="none",
    )
    try:
        assert await backend.reap_orphans() == 0
        assert [c.id for c in pool_containers(docker_client, TEST_POOL)] == [other.id]
    finally:
        other.remove(force=True)


POOL_OWNER_SCRIPT = """
import anyio
from gem_sandbox.sandbox.backends.docker import DockerBackend
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.cli.signals import exit_on_sigterm

exit_on_sigterm()  # the application's choice: the library never takes SIGTERM itself

async def main():
    async with SandboxPool(DockerBackend(), PoolConfig(min_idle=2, max_size=2), name={pool!r}) as pool:
        await pool.wait_ready(60)
        print("ready", flush=True)
        await anyio.sleep(120)

anyio.run(main)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_owner_stopped_by_a_signal_removes_its_containers(
    docker_client: docker.DockerClient, sandbox_image: str, signum: int
) -> None:
    pool = f"{TEST_POOL}-signal-{signum}"
    owner = subprocess.Popen(
        [sys.executable, "-c", POOL_OWNER_SCRIPT.format(pool=pool)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout.readline().strip() == "ready"
        assert len(pool_containers(docker_client, pool)) == 2
        owner.send_signal(signum)
        owner.wait(timeout=30)
    finally:
        owner.kill()
    assert pool_containers(docker_client, pool) == []
