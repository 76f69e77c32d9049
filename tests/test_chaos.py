"""Chaos through a pool: the in-flight run comes back ``infra_error`` within its deadline and
the pool heals (the dead sandbox is gone, the next run is ok). Faults: the container killed,
the agent killed, the agent wedged (SIGSTOP), and the supervisor process killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import pytest

from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import ExecResult, Status
from tests.docker_fixtures import docker_client, sandbox_image, spec  # noqa: F401
from tests.sandbox_fixtures import SPEC, agent_host_pid

pytestmark = pytest.mark.anyio

GRACE = 1.0  # the pool's grace past a run's timeout before a silent agent is declared dead
SLEEP_30 = "import time; time.sleep(30)"


@dataclass
class Chaos:
    """A pool of one warm sandbox and no spare (the fault hits the sandbox the in-flight run
    is on), and the means to hurt its sandboxes from the host."""

    pool: SandboxPool
    docker: Any = None  # the DockerClient, on the docker backend

    async def kill_container(self, sandbox: Sandbox) -> None:
        await anyio.to_thread.run_sync(lambda: self.docker.containers.get(sandbox.id).kill())

    async def signal_agent(self, sandbox: Sandbox, signum: int) -> None:
        """On local the agent's host pid; in a container through an exec (no networking)."""
        if self.docker is None:
            os.kill(agent_host_pid(sandbox), signum)
            return

        def in_container() -> None:
            container = self.docker.containers.get(sandbox.id)
            listing = container.exec_run(["ps", "-e", "-o", "pid=,ppid=,args="]).output.decode()
            rows = [line.split(None, 2) for line in listing.splitlines()]
            # The agent is the container's process, a child of Docker's init (pid 1); its
            # own child, the zygote, has the same command line.
            (pid,) = [row[0] for row in rows if row[1] == "1" and "gem_agent" in row[2]]
            done = container.exec_run(["kill", f"-{signal.Signals(signum).name[3:]}", pid])
            assert done.exit_code == 0, done.output

        await anyio.to_thread.run_sync(in_container)

    async def is_gone(self, sandbox: Sandbox) -> bool:
        """No trace of the sandbox on the host: no bwrap process, or no container."""
        if self.docker is None:
            return not [p for p in bwrap_processes() if p.box == sandbox.id]
        # The low-level listing: containers.list() inspects each one found, which races the
        # removal it is waiting for (404).
        found = await anyio.to_thread.run_sync(
            lambda: self.docker.api.containers(all=True, filters={"id": sandbox.id})
        )
        return not found


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
async def chaos(request: pytest.FixtureRequest) -> AsyncIterator[Chaos]:
    backend: Backend
    spec, client = SPEC, None
    if request.param == "local":
        if problem := LocalBackend.check():
            pytest.skip(problem)
        backend = LocalBackend()
    else:
        from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions

        backend = DockerBackend(DockerOptions(image=request.getfixturevalue("sandbox_image")))
        spec, client = request.getfixturevalue("spec"), request.getfixturevalue("docker_client")
    config = PoolConfig(min_idle=1, max_size=1, grace=GRACE, spec=spec, health_interval=3600.0)
    try:
        async with SandboxPool(backend, config) as pool:
            await pool.wait_ready()
            yield Chaos(pool, client)
    finally:
        await backend.aclose()


async def in_flight(sandbox: Sandbox, code: str, timeout: float, fault) -> tuple[ExecResult, float]:
    """Start ``code``, apply ``fault`` once it is running; the result and seconds from the
    fault to the result."""
    results: list[ExecResult] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            results.append(await sandbox.run(code, timeout=timeout))

        tg.start_soon(run)
        await anyio.sleep(0.5)  # the run is in flight
        await fault()
        struck = time.monotonic()
    return results[0], time.monotonic() - struck


async def assert_healed(chaos: Chaos, victim: Sandbox) -> None:
    """The victim is removed from the host, replaced once, and the next run is ok."""
    with anyio.fail_after(30):
        while not await chaos.is_gone(victim):
            await anyio.sleep(0.05)
    result = await chaos.pool.run("print('healed')")
    assert result.status is Status.OK and result.stdout == "healed\n"
    assert chaos.pool.statistics().replacements == 1


# --- (a) the container killed mid-call --------------------------------------------------


@pytest.mark.parametrize("chaos", [pytest.param("docker", marks=pytest.mark.docker)], indirect=True)
async def test_a_container_killed_mid_call_fails_the_run_and_the_pool_heals(chaos: Chaos) -> None:
    async with chaos.pool.lease() as sb:
        result, after = await in_flight(sb, SLEEP_30, 60, lambda: chaos.kill_container(sb))
    assert result.status is Status.INFRA_ERROR and after < 2.0
    await assert_healed(chaos, sb)


# --- (b) the agent killed inside the sandbox --------------------------------------------


async def test_the_agent_killed_mid_call_fails_the_run_and_the_pool_heals(chaos: Chaos) -> None:
    async with chaos.pool.lease() as sb:
        result, after = await in_flight(sb, SLEEP_30, 60, lambda: chaos.signal_agent(sb, signal.SIGKILL))
    assert result.status is Status.INFRA_ERROR and after < 2.0
    await assert_healed(chaos, sb)


# --- (c) the agent wedged -----------------------------------------------------------------


async def test_a_wedged_agent_fails_the_run_within_timeout_plus_grace_and_is_replaced(chaos: Chaos) -> None:
    timeout = 2.0
    async with chaos.pool.lease() as sb:
        started = time.monotonic()
        stop = lambda: chaos.signal_agent(sb, signal.SIGSTOP)  # noqa: E731
        result, _ = await in_flight(sb, "while True: pass", timeout, stop)
        took = time.monotonic() - started
    assert result.status is Status.INFRA_ERROR
    assert timeout + GRACE - 0.2 < took < timeout + GRACE + 1.0
    await assert_healed(chaos, sb)


# --- (d) the supervisor killed with -9 ----------------------------------------------------

SUPERVISOR = textwrap.dedent(
    """
    import sys, anyio
    from gem_sandbox.sandbox.backends.base import SandboxSpec
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions
    from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool

    async def main():
        image, name = sys.argv[1], sys.argv[2]
        config = PoolConfig(min_idle=3, max_size=3, spec=SandboxSpec(memory_mb=256, pids=48))
        async with SandboxPool(DockerBackend(DockerOptions(image=image)), config, name=name) as pool:
            await pool.wait_ready(120)
            async with anyio.create_task_group() as tg:
                for _ in range(2):  # runs in flight when the supervisor dies
                    tg.start_soon(pool.run, "import time; time.sleep(600)")
                await anyio.sleep(0.5)
                print("ready", flush=True)

    anyio.run(main)
    """
)


@pytest.mark.docker
async def test_a_supervisor_killed_with_sigkill_leaves_no_container_after_a_new_pool_starts(
    sandbox_image: str, docker_client, spec: SandboxSpec
) -> None:
    from gem_sandbox.sandbox.backends.docker import POOL_LABEL, DockerBackend, DockerOptions

    name = f"gem-sandbox-tests-chaos-{os.getpid()}"

    def containers() -> list:
        return docker_client.containers.list(all=True, sparse=True, filters={"label": f"{POOL_LABEL}={name}"})

    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, sandbox_image, name], stdout=subprocess.PIPE, text=True
    )
    try:
        assert supervisor.stdout is not None and supervisor.stdout.readline().strip() == "ready"
        assert len(containers()) == 3
    finally:
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait()  # reaped: a zombie's /proc entry would still look like a live owner
    backend = DockerBackend(DockerOptions(image=sandbox_image))
    try:
        async with SandboxPool(backend, PoolConfig(min_idle=1, max_size=1, spec=spec)) as pool:
            # Reaped at the pool's start, or already removing themselves (their agents saw the
            # stream close): gone within moments either way.
            with anyio.fail_after(10):
                while containers():
                    await anyio.sleep(0.1)
            result = await pool.run("print('new owner')")
            assert result.status is Status.OK and result.stdout == "new owner\n"
    finally:
        await backend.aclose()
