"""Chaos on the request path: faults that strike while a request is in flight through the
pool service, where ``tests/test_chaos.py`` strikes a pool directly. The sandbox's container
killed, the service itself SIGKILLed and started again under a remote runtime, and the Docker
daemon restarted: each request is answered (``infra_error``, SandboxFusion's ``SandboxError``)
within its deadline, or the client reconnects and gets its answer; nothing is left behind.

The daemon restart disrupts every Docker test on the machine: it is this file's last test, and
like ``tests/test_docker_restart.py`` it needs root.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anyio
import anyio.to_thread
import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.backends.docker.reaping import OWNER_LABEL
from gem_sandbox.sandbox.backends.owners import owner_id
from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.result import Status
from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, auth, docker_client, sandbox_image, serving  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ONE = {"max_size": 1, "min_idle": 1, "health_interval": 3600.0}
LONG_RUN = {"code": "import time; time.sleep(60); print('too late')", "language": "python", "timeout": 90}


async def struck(
    service: Service, route: str, body: dict[str, Any], fault: Callable[[], Awaitable[None]]
) -> tuple[int, dict[str, Any], float]:
    """Post ``body`` to ``route``, apply ``fault`` once the run holds the pool; the status,
    the answer and the seconds from the fault to the answer."""
    answers: list[tuple[int, dict[str, Any]]] = []
    async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session, anyio.create_task_group() as tg:

        async def request() -> None:
            async with session.post(route, json=body) as response:
                answers.append((response.status, await response.json()))

        tg.start_soon(request)
        with anyio.fail_after(30):
            while service.runtime.statistics().leased == 0:
                await anyio.sleep(0.05)
        await anyio.sleep(0.5)  # the run is under way in the sandbox
        await fault()
        started = time.monotonic()
    return *answers[0], time.monotonic() - started


async def heals(service: Service) -> None:
    """The next request is served by a new sandbox and answers ok."""
    async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session:
        with anyio.fail_after(120):
            async with session.post("/v1/run", json={"code": "print('healed')"}) as response:
                assert (await response.json())["stdout"] == "healed\n"
    assert service.admission.free == service.admission.capacity


def my_containers(client: Any) -> list[str]:
    return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{OWNER_LABEL}={owner_id()}"})]


# -- the sandbox's container killed ------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.parametrize(
    ("route", "body", "verdict"),
    [
        ("/v1/run", LONG_RUN, lambda answer: answer["status"] == Status.INFRA_ERROR.value),
        ("/run_code", {**LONG_RUN, "run_timeout": 90}, lambda answer: answer["status"] == "SandboxError"),
    ],
    ids=["v1", "fusion"],
)
async def test_a_container_killed_mid_request_is_answered_as_the_infrastructures_failure_and_the_pool_heals(
    sandbox_image: str, docker_client: Any, route: str, body: dict[str, Any], verdict: Any  # noqa: F811
) -> None:
    async with serving("docker", sandbox_image, pool_options=ONE) as service:
        (victim,) = my_containers(docker_client)

        async def kill() -> None:
            await anyio.to_thread.run_sync(lambda: docker_client.api.kill(victim))

        status, answer, seconds = await struck(service, route, body, kill)
        assert status == 200 and verdict(answer), answer
        assert seconds < 60  # before the run itself would have ended
        await heals(service)
    with anyio.fail_after(60):
        while my_containers(docker_client):
            await anyio.sleep(0.2)


# -- the service SIGKILLed and started again --------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_service(port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gem_sandbox.cli", "serve", "--backend", "local", "--port", str(port)]
    command += ["--pool", "max_size=2", "--pool", "min_idle=1"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def boxes_of(pid: int) -> set[str]:
    return {p.box for p in bwrap_processes() if p.ppid == pid}


async def test_the_service_sigkilled_mid_request_and_started_again_a_remote_runtime_gets_its_answer() -> None:
    if problem := LocalBackend.check():
        pytest.skip(problem)
    port = free_port()
    first = start_service(port)
    second: subprocess.Popen[bytes] | None = None
    try:
        async with Runtime(url=f"http://127.0.0.1:{port}") as runtime:
            await runtime.wait_ready(timeout=60)
            boxes = await anyio.to_thread.run_sync(boxes_of, first.pid)
            assert boxes
            results = []
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    results.append(await runtime.run("import time; time.sleep(2); print('answered')", timeout=30))

                tg.start_soon(run)
                await anyio.sleep(1.0)  # the run is in flight on the first service
                os.kill(first.pid, signal.SIGKILL)
                first.wait()
                second = start_service(port)
            assert (results[0].status, results[0].stdout) == (Status.OK, "answered\n")
            assert (await runtime.run("print('and on')")).stdout == "and on\n"
        with anyio.fail_after(30):  # the killed service's sandboxes die with it
            while {p.box for p in await anyio.to_thread.run_sync(bwrap_processes)} & boxes:
                await anyio.sleep(0.2)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)


# -- the Docker daemon restarted ----------------------------------------------------------------------


@pytest.mark.docker
async def test_a_daemon_restart_mid_request_is_answered_in_time_and_the_service_serves_again(
    sandbox_image: str, docker_client: Any  # noqa: F811
) -> None:
    from tests.test_docker_restart import Daemon

    daemon = Daemon()
    async with serving("docker", sandbox_image, pool_options=ONE) as service:

        async def restart() -> None:
            await anyio.to_thread.run_sync(daemon.stop)
            await anyio.to_thread.run_sync(daemon.start)

        status, answer, seconds = await struck(service, "/v1/run", LONG_RUN, restart)
        assert (status, answer["status"]) == (200, Status.INFRA_ERROR.value), answer
        assert seconds < 60
        await heals(service)
