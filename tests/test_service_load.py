"""The service under load and abuse, over real loopback HTTP with the Docker backend: many
requests and connections at once, slow clients, and bytes that are not HTTP or not JSON.
Every request loop here is bounded in count and time, and talks to 127.0.0.1 only."""

from __future__ import annotations

import re
import socket
import time

import aiohttp
import anyio
import pytest

from gem_sandbox.service import TokenPolicy
from tests.service_fixtures import auth, docker_client, sandbox_image, serving  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.slow]

WIDE = TokenPolicy(name="wide", secret="wide-secret", max_concurrency=2000)


async def test_500_concurrent_runs_all_succeed(sandbox_image: str) -> None:  # noqa: F811
    # 500 runs on 4 sandboxes queue for longer than the default queue_timeout (test_service_overload
    # has the 503 past it): here every request is let wait its turn.
    async with serving("docker", sandbox_image, tokens=(WIDE,), queue_timeout=300.0) as service:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(service.url, headers=auth(WIDE), connector=connector) as session:
            outcomes: list[tuple[int, str]] = []

            async def one(i: int) -> None:
                async with session.post("/v1/run", json={"code": f"print({i} * 2)"}) as response:
                    body = await response.json()
                    outcomes.append((response.status, body.get("stdout")))

            async with anyio.create_task_group() as tg:
                for i in range(500):
                    tg.start_soon(one, i)
    assert sorted(outcomes) == sorted((200, f"{i * 2}\n") for i in range(500))


async def test_1000_concurrent_connections_are_all_served(sandbox_image: str) -> None:  # noqa: F811
    async with serving("docker", sandbox_image, tokens=(WIDE,)) as service:
        statuses: list[int] = []

        async def one() -> None:  # a connection of its own each
            async with aiohttp.ClientSession(service.url, headers=auth(WIDE)) as session:
                async with session.get("/v1/sandboxes") as response:
                    statuses.append(response.status)
                    await anyio.sleep(0.5)  # hold the connection while the others arrive

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(1000):
                    tg.start_soon(one)
    assert statuses == [200] * 1000


async def test_idle_connections_do_not_starve_other_clients(sandbox_image: str) -> None:  # noqa: F811
    async with serving("docker", sandbox_image, tokens=(WIDE,)) as service:
        host, port = service.url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port))) for _ in range(1000)]
        try:
            async with aiohttp.ClientSession(service.url, headers=auth(WIDE)) as session:
                started = time.perf_counter()
                async with session.post("/v1/run", json={"code": "print('still here')"}) as response:
                    assert (await response.json())["stdout"] == "still here\n"
                assert time.perf_counter() - started < 5
        finally:
            for sock in idle:
                sock.close()


async def test_a_client_that_stalls_its_body_gets_408_and_others_go_on(sandbox_image: str) -> None:  # noqa: F811
    async with serving("docker", sandbox_image, tokens=(WIDE,), read_timeout=1.0) as service:
        host, port = service.url.removeprefix("http://").split(":")
        stream = await anyio.connect_tcp(host, int(port))
        async with stream:
            head = (
                "POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {WIDE.secret}\r\nContent-Length: 100\r\n\r\n"
            )
            await stream.send(head.encode() + b'{"code": "pri')
            async with aiohttp.ClientSession(service.url, headers=auth(WIDE)) as session:
                async with session.post("/v1/run", json={"code": "print(2)"}) as response:
                    assert (await response.json())["stdout"] == "2\n"
            with anyio.fail_after(5):
                answer = await stream.receive()
        assert answer.startswith(b"HTTP/1.1 408")


@pytest.mark.parametrize(
    "raw",
    [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/run HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
        b"\x00\xff\xfe" * 1000,
    ],
    ids=["not-http", "negative-length", "huge-header", "binary"],
)
async def test_bytes_that_are_not_http_are_refused_and_the_server_goes_on(
    sandbox_image: str, raw: bytes  # noqa: F811
) -> None:
    async with serving("docker", sandbox_image, tokens=(WIDE,)) as service:
        host, port = service.url.removeprefix("http://").split(":")
        stream = await anyio.connect_tcp(host, int(port))
        async with stream:
            await stream.send(raw)
            with anyio.fail_after(5):
                answer = await stream.receive()
        assert re.match(rb"HTTP/1\.[01] 4\d\d ", answer), answer[:80]
        async with aiohttp.ClientSession(service.url, headers=auth(WIDE)) as session:
            async with session.get("/healthz") as response:
                assert response.status == 200


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000, b'{"code": "\xff\xfe"}', b'{"code": 1}', b"null", b'{"code": "x", "env": {"A": 1}}'],
    ids=["deep", "bad-utf8", "wrong-type", "null", "env-type"],
)
async def test_json_that_is_not_a_request_answers_400(sandbox_image: str, body: bytes) -> None:  # noqa: F811
    async with serving("docker", sandbox_image, tokens=(WIDE,)) as service:
        async with aiohttp.ClientSession(service.url, headers=auth(WIDE)) as session:
            async with session.post("/v1/run", data=body, headers={"Content-Type": "application/json"}) as response:
                assert response.status == 400
                assert (await response.json())["error"]["type"] == "bad_request"
            async with session.post("/v1/run", json={"code": "print(3)"}) as response:
                assert (await response.json())["stdout"] == "3\n"
