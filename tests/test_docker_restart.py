"""A Docker daemon restart does not wedge the backend or the pool: launches work again without
any manual step, one started while the daemon is down completes once it is back, and a pool
replaces the sandboxes the restart took down.

This stops and restarts the daemon of this machine (the one in /var/run/docker.pid), so it
runs last among the Docker tests (files run in name order) and needs root.
"""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import anyio.to_thread
import docker
import docker.errors

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions
from gem_sandbox.sandbox.errors import SandboxUnavailable
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from tests.docker_fixtures import docker_client, sandbox_image, spec  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.slow]

PID_FILE = Path("/var/run/docker.pid")


class Daemon:
    """Stops and starts the running dockerd with its own command line."""

    def __init__(self) -> None:
        if os.geteuid() != 0 or not PID_FILE.exists():
            pytest.skip("restarting the daemon needs root and a dockerd with /var/run/docker.pid")
        pid = int(PID_FILE.read_text())
        self.argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        self.pid = pid

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while self.running():
            assert time.monotonic() < deadline, "dockerd did not stop within 60s"
            time.sleep(0.1)

    def running(self) -> bool:
        """Alive and not a zombie (a daemon an earlier test started is this process's child)."""
        try:
            os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child: its parent reaps it
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def start(self) -> None:
        with open("/var/log/dockerd.log", "ab") as log:
            self.pid = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            ).pid
        deadline = time.monotonic() + 60
        while True:
            try:
                docker.from_env(timeout=5).ping()
                return
            except docker.errors.DockerException:
                assert time.monotonic() < deadline, "dockerd did not come back within 60s"
                time.sleep(0.2)


async def hello(backend: DockerBackend, spec: SandboxSpec) -> str:
    """Launch a sandbox, read the agent's hello, kill it; return the hello's op."""
    box = await backend.launch(spec)
    try:
        data = b""
        with anyio.fail_after(20):
            while len(data) < 4 or len(data) < 4 + protocol.frame_length(data[:4]):
                data += await box.stream.receive()
        return protocol.decode_body(data[4:])[0]["op"]
    finally:
        await box.kill()


async def test_launches_work_again_after_a_daemon_restart(
    sandbox_image: str, spec: SandboxSpec
) -> None:
    backend = DockerBackend(DockerOptions(image=sandbox_image, retry_s=60))
    daemon = Daemon()
    assert await hello(backend, spec) == "hello"
    box = await backend.launch(spec)

    await anyio.to_thread.run_sync(daemon.stop)
    ops = []
    try:
        async with anyio.create_task_group() as tg:

            async def launch_while_down() -> None:  # retried until the daemon is back
                ops.append(await hello(backend, spec))

            tg.start_soon(launch_while_down)
            await anyio.sleep(1)
            await anyio.to_thread.run_sync(daemon.start)
    finally:
        if not daemon.running():
            daemon.start()
    assert ops == ["hello"]

    with anyio.fail_after(5), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
        while True:  # the restart took the old sandbox down with it
            await box.stream.receive()
    await box.kill()
    assert await hello(backend, spec) == "hello"
    await backend.aclose()


async def test_a_pool_recovers_from_a_daemon_restart_without_a_manual_step(
    sandbox_image: str, spec: SandboxSpec
) -> None:
    backend = DockerBackend(DockerOptions(image=sandbox_image, retry_s=60))
    daemon = Daemon()
    config = PoolConfig(min_idle=2, max_size=2, health_interval=0.5, spec=spec)
    async with SandboxPool(backend, config) as pool:
        await pool.wait_ready(60)
        assert (await pool.run("print(1)")).stdout == "1\n"
        await anyio.to_thread.run_sync(daemon.stop)
        try:
            with anyio.fail_after(30):  # the stopped daemon took the sandboxes with it
                while any(slot.sandbox.alive for slot in pool._all):
                    await anyio.sleep(0.1)
        finally:
            await anyio.to_thread.run_sync(daemon.start)
        with anyio.fail_after(90):
            while True:  # the supervisor replaces the dead sandboxes once launches work again
                try:
                    result = await pool.run("print(3)")
                except SandboxUnavailable:
                    result = None
                if result is not None and result.ok:
                    break
                await anyio.sleep(0.2)
        assert result.stdout == "3\n" and pool.statistics().replacements >= 1
    await backend.aclose()
