"""Faults from outside the sandbox: its container killed mid-call, the daemon failing a call."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

import time

import anyio
import anyio.to_thread
import docker
import docker.api.container
import docker.errors
import requests

from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import POOL_LABEL, DockerBackend
from gem_sandbox.sandbox.client import open_sandbox
from gem_sandbox.sandbox.result import ExecResult, Status
from tests.docker_fixtures import TEST_POOL, backend, docker_client, sandbox_image, spec  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_a_container_killed_mid_call_returns_infra_error_within_a_second(
    backend: DockerBackend, spec: SandboxSpec, docker_client: docker.DockerClient
) -> None:
    results: list[ExecResult] = []
    async with open_sandbox(backend, spec) as sandbox:
        async with anyio.create_task_group() as tg:

            async def sleeper() -> None:
                results.append(await sandbox.run("import time; time.sleep(30)", timeout=60))

            tg.start_soon(sleeper)
            await anyio.sleep(0.5)  # the run is in flight
            container = docker_client.containers.get(sandbox.box.id)
            await anyio.to_thread.run_sync(container.kill)
            killed_at = time.monotonic()
        returned_after = time.monotonic() - killed_at
        assert results[0].status is Status.INFRA_ERROR
        assert returned_after < 1.0
        assert await sandbox.box.exit_reason() is not None


async def test_a_launch_retries_a_transient_daemon_error(
    backend: DockerBackend,
    spec: SandboxSpec,
    docker_client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create = docker.api.container.ContainerApiMixin.create_container
    failures = []

    def flaky_create(self, *args, **kwargs):
        if not failures:
            failures.append(1)
            response = requests.Response()
            response.status_code = 503
            raise docker.errors.APIError("daemon busy", response=response)
        return create(self, *args, **kwargs)

    monkeypatch.setattr(docker.api.container.ContainerApiMixin, "create_container", flaky_create)
    async with open_sandbox(backend, spec) as sandbox:
        assert (await sandbox.run("print(6 * 7)")).stdout == "42\n"
    assert failures == [1]
    assert (
        docker_client.containers.list(all=True, sparse=True, filters={"label": f"{POOL_LABEL}={TEST_POOL}"})
        == []
    )
