"""The service past its capacity, over real loopback HTTP on bubblewrap sandboxes: clients that
leave, clients with deadlines, a token's flood beside another token, slow headers, and the
load verl's SandboxFusion reward code puts on ``/run_code`` (its concurrency test's shape:
32 threads, runs that sleep, a client timeout of compile + run + 10 s).

Every wait here is bounded by ``anyio.fail_after``; the bounds are what a client would give up
after, not speed measurements."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import pytest

from gem_sandbox.service import ServeOptions, TokenPolicy, running
from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, BETA, auth, serving

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ONE_SEAT = {"max_size": 1, "min_idle": 1, "runs_per_sandbox": 1}
#: The sandbox's processes whose program is ``sleep``, counted from /proc in bash alone.
COUNT_SLEEPS = (
    "n=0; for f in /proc/[0-9]*/cmdline; do read -r -d '' program < \"$f\" 2>/dev/null; "
    '[ "$program" = sleep ] && n=$((n + 1)); done; echo $n'
)


async def until(condition: Any, within: float = 30.0) -> None:
    with anyio.fail_after(within):
        while not condition():
            await anyio.sleep(0.05)


@asynccontextmanager
async def holding(service: Service, token: TokenPolicy = ALPHA) -> AsyncIterator[None]:
    """A long run holding the one seat for the block; abandoned at its end."""
    async with aiohttp.ClientSession(service.url, headers=auth(token)) as session, anyio.create_task_group() as tg:

        async def hold() -> None:
            await session.post("/v1/run", json={"code": "exec sleep 120", "language": "bash", "timeout": 200})

        tg.start_soon(hold)
        await until(lambda: service.admission.free == 0)
        yield
        tg.cancel_scope.cancel()


async def test_a_client_that_disconnects_frees_its_seat_and_its_run_is_killed() -> None:
    async with serving("local", pool_options=ONE_SEAT) as service:
        async with holding(service):
            pass  # the client leaves while its two-minute run goes on
        async with aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
            with anyio.fail_after(30):  # far less than the abandoned run's 120 s
                response = await session.post("/v1/run", json={"code": COUNT_SLEEPS, "language": "bash"})
                result = await response.json()
        assert (response.status, result["status"], result["stdout"]) == (200, "ok", "0\n")
        assert service.admission.free == service.admission.capacity


async def test_on_a_shared_sandbox_a_client_that_disconnects_frees_its_seat_for_the_next_run() -> None:
    shared = {"max_size": 1, "min_idle": 1, "runs_per_sandbox": 2}
    async with serving("local", pool_options=shared, queue_timeout=300.0) as service:
        async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session, anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(session.post, "/v1/run", json={"code": "exec sleep 120", "language": "bash"}))
            async with holding(service):  # takes the second seat, then leaves
                assert service.admission.free == 0
            await until(lambda: service.admission.free == 1)
            with anyio.fail_after(30):
                response = await session.post("/v1/run", json={"code": "print('seated')"})
            assert (await response.json())["stdout"] == "seated\n"
            tg.cancel_scope.cancel()


async def test_a_request_that_waits_past_queue_timeout_gets_503_with_retry_after() -> None:
    async with serving("local", pool_options=ONE_SEAT, queue_timeout=1.0) as service:
        async with holding(service), aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
            with anyio.fail_after(30):
                response = await session.post("/v1/run", json={"code": "print(1)"})
            body = await response.json()
    assert response.status == 503
    assert body["error"]["type"] == "overloaded"
    assert int(response.headers["Retry-After"]) >= 1


async def test_the_clients_request_timeout_header_bounds_its_wait() -> None:
    async with serving("local", pool_options=ONE_SEAT, queue_timeout=300.0) as service:
        async with holding(service), aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
            with anyio.fail_after(30):
                response = await session.post("/v1/run", json={"code": "print(1)"}, headers={"X-Request-Timeout": "1"})
            assert (response.status, (await response.json())["error"]["type"]) == (503, "overloaded")
            assert service.admission.waiting == 0


async def test_on_sandboxfusions_routes_no_capacity_in_time_is_the_504_its_clients_retry() -> None:
    async with serving("local", pool_options=ONE_SEAT, queue_timeout=1.0) as service:
        async with holding(service), aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
            with anyio.fail_after(30):
                response = await session.post("/run_code", json={"code": "print(1)", "language": "python"})
            assert (response.status, (await response.json())["error"]["type"]) == (504, "overloaded")
            assert "Retry-After" in response.headers


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
async def test_a_request_timeout_header_that_is_not_a_positive_number_answers_400(value: str) -> None:
    async with serving("local", pool_options=ONE_SEAT) as service:
        async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session:
            response = await session.post("/v1/run", json={"code": "print(1)"}, headers={"X-Request-Timeout": value})
            body = await response.json()
    assert (response.status, body["error"]["type"]) == (400, "bad_request")
    assert "X-Request-Timeout" in body["error"]["message"]


async def test_past_max_queue_a_request_is_refused_at_once() -> None:
    async with serving("local", pool_options=ONE_SEAT, queue_timeout=300.0, max_queue=0) as service:
        async with holding(service), aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
            with anyio.fail_after(10):
                response = await session.post("/v1/sandboxes", json={})
            assert (response.status, (await response.json())["error"]["type"]) == (503, "overloaded")
            assert "Retry-After" in response.headers
        assert len(service.leases) == 0 and BETA.name not in service.admission.used


async def test_a_waiting_request_whose_client_leaves_gives_up_its_place() -> None:
    async with serving("local", pool_options=ONE_SEAT, queue_timeout=300.0) as service:
        async with holding(service):
            async with aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(functools.partial(session.post, "/v1/run", json={"code": "print(1)"}))
                    await until(lambda: service.admission.waiting == 1)
                    tg.cancel_scope.cancel()
            await until(lambda: service.admission.waiting == 0)
            assert BETA.name not in service.admission.used


async def test_one_tokens_flood_does_not_starve_another_token() -> None:
    flooder = TokenPolicy(name="flood", secret="flood-secret", max_concurrency=100)
    async with serving("local", tokens=(flooder, BETA), pool_options=ONE_SEAT, queue_timeout=300.0) as service:
        finished: list[str] = []

        async def run(session: aiohttp.ClientSession, who: str) -> None:
            response = await session.post("/v1/run", json={"code": "import time; time.sleep(0.3)"})
            assert (await response.json())["status"] == "ok"
            finished.append(who)

        async with (
            aiohttp.ClientSession(service.url, headers=auth(flooder)) as flood,
            aiohttp.ClientSession(service.url, headers=auth(BETA)) as other,
        ):
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    for _ in range(10):
                        tg.start_soon(run, flood, "flood")
                    await until(lambda: service.admission.waiting == 9)
                    tg.start_soon(run, other, "beta")
    # One flood run held the seat when beta came; beta's run is the next one served.
    assert finished.index("beta") <= 1
    assert finished.count("flood") == 10


async def test_a_connection_that_dribbles_its_headers_is_closed_after_header_timeout() -> None:
    async with serving("local", pool_options=ONE_SEAT, header_timeout=1.0) as service:
        host, port = service.url.removeprefix("http://").split(":")
        stream = await anyio.connect_tcp(host, int(port))
        async with stream:
            await stream.send(b"GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
            with anyio.fail_after(20):
                while True:
                    await stream.send(b"X-Slow: 1\r\n")  # a header line now and then, never the end
                    try:
                        with anyio.move_on_after(0.5):
                            await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                        break
                    except OSError:
                        break
        async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session:
            assert (await session.get("/v1/sandboxes")).status == 200


# -- verl's SandboxFusion reward code's load ------------------------------------------------------------

FUSION_CODE = """
import sys, time
data = sys.stdin.read()
if data.startswith('slow_'):
    time.sleep(30)
elif data.startswith('nap_'):
    time.sleep(10)
print('out_' + data.split('_')[-1])
"""


async def fusion_load(service: Service, inputs: list[str], run_timeout: int) -> dict[str, dict[str, Any]]:
    """Each input as a ``/run_code`` request, from 32 clients at once, each giving up after
    compile + run + 10 seconds as verl's ``call_sandbox_api`` does; the answers by input
    (an ``error`` entry for a client that gave up or got no answer)."""
    answers: dict[str, dict[str, Any]] = {}
    queue = list(inputs)
    client_timeout = aiohttp.ClientTimeout(total=run_timeout * 2 + 10)

    async def client() -> None:
        async with aiohttp.ClientSession(service.url, timeout=client_timeout) as session:
            while queue:
                stdin = queue.pop()
                body = {"code": FUSION_CODE, "stdin": stdin, "language": "python", "run_timeout": run_timeout}
                body["compile_timeout"] = run_timeout
                try:
                    async with session.post("/run_code", json=body) as response:
                        answers[stdin] = await response.json() if response.status == 200 else {"error": response.status}
                except (TimeoutError, aiohttp.ClientError) as exc:
                    answers[stdin] = {"error": repr(exc)}

    async with anyio.create_task_group() as tg:
        for _ in range(32):
            tg.start_soon(client)
    return answers


@asynccontextmanager
async def fusion_service() -> AsyncIterator[Service]:
    """The service as ``gem-sandbox serve`` makes it (its default runs per sandbox), on a pool of 8."""
    options = ServeOptions(host="127.0.0.1", port=0, backend="local", pool={"max_size": 8, "min_idle": 8})
    async with running(options) as service:
        await service.runtime.wait_ready()
        yield service


async def test_32_clients_of_mostly_sleeping_runs_on_a_pool_of_8_all_get_answers_in_time() -> None:
    inputs = [f"nap_{i}" for i in range(64)]
    async with fusion_service() as service:
        answers = await fusion_load(service, inputs, run_timeout=15)
    assert {stdin: answer.get("status") for stdin, answer in answers.items()} == dict.fromkeys(inputs, "Success")
    assert all(answers[i]["run_result"]["stdout"] == f"out_{i.split('_')[1]}\n" for i in inputs)


async def test_verls_mixed_concurrency_load_gets_every_verdict_right() -> None:
    slow, wrong = {5, 30, 60, 90}, {10, 25, 50}
    inputs = [f"slow_{i}" if i in slow else f"in_{i}" for i in range(100)]
    async with fusion_service() as service:
        answers = await fusion_load(service, inputs, run_timeout=15)
    verdicts = {stdin: (a.get("status"), (a.get("run_result") or {}).get("status")) for stdin, a in answers.items()}
    assert {verdicts[f"slow_{i}"] for i in slow} == {("Failed", "TimeLimitExceeded")}
    assert {verdicts[f"in_{i}"] for i in range(100) if i not in slow} == {("Success", "Finished")}
    outputs = {i: answers[f"in_{i}"]["run_result"]["stdout"] for i in wrong}
    assert outputs == {i: f"out_{i}\n" for i in wrong}  # what verl compares with its (wrong) expectation

