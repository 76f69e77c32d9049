"""The pool service over real HTTP on loopback, with the Docker backend: the REST API, access,
quotas, limits, leases and their TTL, idempotency, operations (docs/service.md)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator

import aiohttp
import anyio
import pytest

from gem_sandbox.service import TokenPolicy
from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, BETA, auth, docker_client, sandbox_image, service, serving  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
async def http(service: Service) -> AsyncIterator[aiohttp.ClientSession]:  # noqa: F811
    async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session:
        yield session


async def lease(http: aiohttp.ClientSession, **body: object) -> str:
    async with http.post("/v1/sandboxes", json=body) as response:
        assert response.status == 201, await response.text()
        return (await response.json())["id"]


async def error_of(response: aiohttp.ClientResponse) -> dict[str, str]:
    return (await response.json())["error"]


# -- runs --------------------------------------------------------------------------------


async def test_a_one_shot_run_answers_its_exec_result(http: aiohttp.ClientSession) -> None:
    async with http.post("/v1/run", json={"code": "print('hi')"}) as response:
        result = await response.json()
    assert response.status == 200
    assert (result["status"], result["exit_code"], result["stdout"]) == ("ok", 0, "hi\n")
    assert set(result) >= {"stderr", "stdout_bytes", "truncated", "duration_ms", "cpu_ms", "signal"}


async def test_failing_and_hanging_code_are_results_not_errors(http: aiohttp.ClientSession) -> None:
    async with http.post("/v1/run", json={"code": "exit 3", "language": "bash"}) as response:
        failed = await response.json()
    async with http.post("/v1/run", json={"code": "import time; time.sleep(30)", "timeout": 1}) as response:
        hung = await response.json()
    assert (failed["status"], failed["exit_code"]) == ("error", 3)
    assert hung["status"] == "timeout"


async def test_a_one_shot_run_reads_the_files_it_was_sent(http: aiohttp.ClientSession) -> None:
    files = {"data/in.txt": base64.b64encode(b"41").decode()}
    body = {"code": "print(int(open('data/in.txt').read()) + 1)", "files": files}
    async with http.post("/v1/run", json=body) as response:
        assert (await response.json())["stdout"] == "42\n"


async def test_a_lease_keeps_shell_kernel_and_file_state(http: aiohttp.ClientSession) -> None:
    sandbox = await lease(http)
    base = f"/v1/sandboxes/{sandbox}"
    async with http.post(f"{base}/shell", json={"command": "mkdir d && cd d && export X=7"}) as response:
        assert (await response.json())["status"] == "ok"
    async with http.post(f"{base}/shell", json={"command": "echo $X $(basename $PWD)"}) as response:
        assert (await response.json())["stdout"] == "7 d\n"
    async with http.post(f"{base}/kernel", json={"code": "n = 20"}) as response:
        assert response.status == 200
    async with http.post(f"{base}/kernel", json={"code": "print(n + 1)"}) as response:
        assert (await response.json())["stdout"] == "21\n"
    blob = bytes(range(256))
    async with http.put(f"{base}/files", json={"files": {"b.bin": base64.b64encode(blob).decode()}}) as response:
        assert response.status == 204
    async with http.post(f"{base}/run", json={"code": "import os; print(os.path.getsize('b.bin'))"}) as response:
        assert (await response.json())["stdout"] == "256\n"
    async with http.get(f"{base}/files", params=[("path", "b.bin")]) as response:
        assert base64.b64decode((await response.json())["files"]["b.bin"]) == blob
    async with http.delete(base) as response:
        assert response.status == 204
    async with http.post(f"{base}/run", json={"code": "print(1)"}) as response:
        assert response.status == 404


async def test_reset_empties_a_lease_and_keeps_it(http: aiohttp.ClientSession) -> None:
    sandbox = await lease(http)
    base = f"/v1/sandboxes/{sandbox}"
    async with http.post(f"{base}/shell", json={"command": "echo x > left.txt"}):
        pass
    async with http.post(f"{base}/reset") as response:
        assert response.status == 204
    async with http.post(f"{base}/run", json={"code": "ls", "language": "bash"}) as response:
        assert (await response.json())["stdout"] == ""


# -- access ------------------------------------------------------------------------------


async def test_no_token_and_a_wrong_token_answer_401(service: Service) -> None:  # noqa: F811
    async with aiohttp.ClientSession(service.url) as anonymous:
        async with anonymous.post("/v1/run", json={"code": "print(1)"}) as response:
            assert response.status == 401
            assert (await error_of(response))["type"] == "unauthorized"
        async with anonymous.post("/v1/run", json={"code": "print(1)"}, headers={"Authorization": "Bearer nope"}) as response:
            assert response.status == 401
        async with anonymous.post("/t/nope/run_code", json={"code": "print(1)", "language": "python"}) as response:
            assert response.status == 401


async def test_a_token_in_the_path_authenticates(service: Service) -> None:  # noqa: F811
    async with aiohttp.ClientSession(service.url) as session:
        async with session.post(f"/t/{ALPHA.secret}/v1/run", json={"code": "print(5)"}) as response:
            assert (await response.json())["stdout"] == "5\n"


async def test_another_tokens_sandbox_is_not_found(service: Service, http: aiohttp.ClientSession) -> None:  # noqa: F811
    mine = await lease(http)
    async with aiohttp.ClientSession(service.url, headers=auth(BETA)) as other:
        for method, path in (("GET", ""), ("POST", "/run"), ("DELETE", ""), ("GET", "/files?path=a")):
            async with other.request(method, f"/v1/sandboxes/{mine}{path}", json={"code": "print(1)"}) as response:
                assert response.status == 404, (method, path)
                assert (await error_of(response))["type"] == "not_found"
        async with other.get("/v1/sandboxes") as response:
            assert (await response.json())["sandboxes"] == []
    async with http.get("/v1/sandboxes") as response:
        assert [s["id"] for s in (await response.json())["sandboxes"]] == [mine]


# -- quotas and limits -------------------------------------------------------------------


async def test_leases_past_the_tokens_limit_answer_429(http: aiohttp.ClientSession) -> None:
    for _ in range(ALPHA.max_leases):
        await lease(http)
    async with http.post("/v1/sandboxes", json={}) as response:
        assert response.status == 429
        assert (await error_of(response))["type"] == "too_many_leases"
        assert int(response.headers["Retry-After"]) >= 1


async def test_requests_past_the_rate_answer_429_with_retry_after(sandbox_image: str) -> None:  # noqa: F811
    slow = TokenPolicy(name="slow", secret="slow-secret", rate=0.5, burst=2)
    async with serving("docker", sandbox_image, tokens=(slow,)) as running:
        async with aiohttp.ClientSession(running.url, headers=auth(slow)) as session:
            statuses = []
            for _ in range(3):
                async with session.get("/v1/sandboxes") as response:
                    statuses.append(response.status)
                    retry_after = response.headers.get("Retry-After")
            assert statuses == [200, 200, 429]
            assert retry_after is not None and 1 <= int(retry_after) <= 2


async def test_requests_past_the_concurrency_limit_answer_429(sandbox_image: str) -> None:  # noqa: F811
    narrow = TokenPolicy(name="narrow", secret="narrow-secret", max_concurrency=2)
    async with serving("docker", sandbox_image, tokens=(narrow,)) as running:
        async with aiohttp.ClientSession(running.url, headers=auth(narrow)) as session:
            statuses: list[int] = []

            async def sleeper() -> None:
                async with session.post("/v1/run", json={"code": "import time; time.sleep(1.5)"}) as response:
                    statuses.append(response.status)

            async with anyio.create_task_group() as tg:
                tg.start_soon(sleeper)
                tg.start_soon(sleeper)
                await anyio.sleep(0.5)
                async with session.post("/v1/run", json={"code": "print(1)"}) as response:
                    assert response.status == 429
                    assert (await error_of(response))["type"] == "too_many_requests"
            assert statuses == [200, 200]


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "the body"),
        (json.dumps({"language": "python"}).encode(), "code"),
        (json.dumps({"code": "1", "timeout": -1}).encode(), "timeout"),
        (json.dumps({"code": "1", "timout": 3}).encode(), "timout"),
        (json.dumps({"code": "1", "files": {"a": "%%%"}}).encode(), "files.a: not valid base64"),
        (json.dumps({"code": "1", "files": {"../a": ""}}).encode(), "unsafe path"),
        (json.dumps({"code": "1", "env": {"A=B": "1"}}).encode(), "env.A=B"),
        (json.dumps({"code": "1", "timeout": True}).encode(), "timeout"),
        (json.dumps({"code": "1", "limits": {"nofile": "lots"}}).encode(), "limits.nofile"),
    ],
)
async def test_bad_bodies_answer_400_naming_the_problem(http: aiohttp.ClientSession, body: bytes, names: str) -> None:
    async with http.post("/v1/run", data=body, headers={"Content-Type": "application/json"}) as response:
        error = await error_of(response)
    assert response.status == 400
    assert error["type"] == "bad_request" and names in error["message"]


async def test_reading_a_directory_answers_409_file_conflict(http: aiohttp.ClientSession) -> None:
    sandbox = await lease(http)
    async with http.put(f"/v1/sandboxes/{sandbox}/files", json={"files": {}, "directories": ["d"]}) as response:
        assert response.status == 204
    async with http.get(f"/v1/sandboxes/{sandbox}/files", params={"path": "d"}) as response:
        assert response.status == 409
        assert (await error_of(response))["type"] == "file_conflict"


async def test_a_wrong_method_answers_405_naming_the_allowed_ones(http: aiohttp.ClientSession) -> None:
    async with http.delete("/v1/run") as response:
        assert response.status == 405
        assert response.headers["Allow"] == "POST"
        assert (await error_of(response))["type"] == "method_not_allowed"


async def test_an_unknown_language_answers_400(http: aiohttp.ClientSession) -> None:
    async with http.post("/v1/run", json={"code": "1", "language": "cobol"}) as response:
        assert response.status == 400
        assert (await error_of(response))["type"] == "unsupported_language"


async def test_a_body_over_the_limit_answers_413(sandbox_image: str) -> None:  # noqa: F811
    async with serving("docker", sandbox_image, max_body_bytes=4096) as running:
        async with aiohttp.ClientSession(running.url, headers=auth(ALPHA)) as session:
            async with session.post("/v1/run", json={"code": "#" * 10_000}) as response:
                assert response.status == 413
                assert (await error_of(response))["type"] == "too_large"
            async with session.post("/v1/run", json={"code": "print(1)"}) as response:
                assert response.status == 200


async def test_timeouts_are_capped_at_the_services(sandbox_image: str) -> None:  # noqa: F811
    async with serving("docker", sandbox_image, max_run_timeout=1.0) as running:
        async with aiohttp.ClientSession(running.url, headers=auth(ALPHA)) as session:
            code = "import time; time.sleep(5)"
            async with session.post("/v1/run", json={"code": code, "timeout": 100}) as response:
                result = await response.json()
    assert result["status"] == "timeout" and result["duration_ms"] < 3000


async def test_asked_limits_are_capped_at_the_pools(sandbox_image: str) -> None:  # noqa: F811
    grab = "b = bytearray(400 * 1024 * 1024); print('allocated')"
    async with serving("docker", sandbox_image, pool_options={"run_memory_mb": 256}) as running:
        async with aiohttp.ClientSession(running.url, headers=auth(ALPHA)) as session:
            for asked in (0, 100_000):
                async with session.post("/v1/run", json={"code": grab, "limits": {"run_memory_mb": asked}}) as response:
                    result = await response.json()
                assert (result["status"], "MemoryError" in result["stderr"]) == ("error", True), asked
            async with session.post("/v1/run", json={"code": grab, "limits": {"run_memory_mb": 200}}) as response:
                assert (await response.json())["status"] == "error"  # a lower limit is kept as asked


# -- leases ------------------------------------------------------------------------------


async def test_a_lease_past_its_ttl_is_reclaimed(service: Service, http: aiohttp.ClientSession) -> None:  # noqa: F811
    sandbox = await lease(http, ttl=1)
    async with http.get(f"/v1/sandboxes/{sandbox}") as response:
        assert (await response.json())["ttl"] == 1
    await anyio.sleep(2.5)
    async with http.get(f"/v1/sandboxes/{sandbox}") as response:
        assert response.status == 404
    assert service.runtime.statistics().leased == 0
    assert service.leases.expired == 1


async def test_each_request_renews_a_lease(http: aiohttp.ClientSession) -> None:
    sandbox = await lease(http, ttl=1.5)
    for _ in range(4):
        await anyio.sleep(0.8)
        async with http.post(f"/v1/sandboxes/{sandbox}/run", json={"code": "print(1)"}) as response:
            assert response.status == 200


async def test_a_retried_request_with_its_idempotency_key_runs_once(http: aiohttp.ClientSession) -> None:
    sandbox = await lease(http)
    append = {"command": "echo x >> log.txt; wc -l < log.txt"}
    answers = []
    for _ in range(3):
        async with http.post(f"/v1/sandboxes/{sandbox}/shell", json=append, headers={"Idempotency-Key": "k1"}) as response:
            answers.append(await response.json())
    assert [a["stdout"] for a in answers] == ["1\n"] * 3
    async with http.post(f"/v1/sandboxes/{sandbox}/shell", json=append, headers={"Idempotency-Key": "k2"}) as response:
        assert (await response.json())["stdout"] == "2\n"
    async with http.post(f"/v1/sandboxes/{sandbox}/shell", json={"command": "true"}, headers={"Idempotency-Key": "k1"}) as response:
        assert response.status == 422
        assert (await error_of(response))["type"] == "idempotency_conflict"


async def test_a_retried_lease_with_its_key_is_the_same_lease(http: aiohttp.ClientSession) -> None:
    ids = set()
    for _ in range(2):
        async with http.post("/v1/sandboxes", json={}, headers={"Idempotency-Key": "lease-1"}) as response:
            ids.add((await response.json())["id"])
    async with http.get("/v1/sandboxes") as response:
        assert len((await response.json())["sandboxes"]) == len(ids) == 1


# -- operations --------------------------------------------------------------------------


async def test_health_metrics_and_openapi_are_served_without_a_token(service: Service) -> None:  # noqa: F811
    async with aiohttp.ClientSession(service.url) as session:
        async with session.get("/healthz") as response:
            assert response.status == 200
            assert (await response.json())["status"] == "ok"
        async with session.get("/openapi.json") as response:
            document = await response.json()
        async with session.get("/metrics") as response:
            metrics = await response.text()
    assert set(document["paths"]) >= {"/v1/run", "/v1/sandboxes/{id}/shell", "/run_code", "/run_jupyter"}
    assert "gem_sandbox_pool_sandboxes" in metrics and "gem_sandbox_requests_total" in metrics


async def test_metrics_count_requests_runs_and_rejections(service: Service, http: aiohttp.ClientSession) -> None:  # noqa: F811
    async with http.post("/v1/run", json={"code": "import time; time.sleep(5)", "timeout": 0.5}):
        pass
    async with aiohttp.ClientSession(service.url) as anonymous:
        async with anonymous.get("/v1/sandboxes"):
            pass
        async with anonymous.get("/metrics") as response:
            metrics = await response.text()
    assert 'gem_sandbox_runs_total{status="timeout"} 1.0' in metrics
    assert 'gem_sandbox_rejections_total{reason="unauthorized"} 1.0' in metrics
    assert 'gem_sandbox_requests_total{method="POST",route="/v1/run",status="200"} 1.0' in metrics


async def test_a_run_code_run_shows_in_the_runs_metric(service: Service, http: aiohttp.ClientSession) -> None:  # noqa: F811
    async with http.post("/run_code", json={"code": "import sys; sys.exit(3)", "language": "python"}) as response:
        assert (await response.json())["status"] == "Failed"
    async with http.get("/metrics") as response:
        metrics = await response.text()
    assert 'gem_sandbox_runs_total{status="error"} 1.0' in metrics


async def test_the_openapi_document_names_each_operation_as_its_api_does(service: Service) -> None:  # noqa: F811
    async with aiohttp.ClientSession(service.url) as session:
        async with session.get("/openapi.json") as response:
            paths = (await response.json())["paths"]
    assert paths["/run_code"]["post"]["operationId"] == "run_code"
    assert paths["/v1/run"]["post"]["operationId"] == "one_shot"


async def test_the_access_log_names_the_token_never_its_secret(
    service: Service, caplog: pytest.LogCaptureFixture  # noqa: F811
) -> None:
    with caplog.at_level(logging.INFO, logger="gem_sandbox.service.access"):
        async with aiohttp.ClientSession(service.url) as session:
            async with session.get(f"/t/{ALPHA.secret}/v1/sandboxes") as response:
                assert response.status == 200
        await anyio.sleep(0.1)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gem_sandbox.service.access"]
    assert lines and lines[-1]["token"] == "alpha" and lines[-1]["path"] == "/t/***/v1/sandboxes"
    assert ALPHA.secret not in caplog.text


async def test_shutdown_finishes_requests_in_flight_and_removes_every_container(
    sandbox_image: str, docker_client  # noqa: F811
) -> None:
    from gem_sandbox.sandbox.backends.base import POOL_LABEL

    result: dict[str, object] = {}

    async def slow_run(session: aiohttp.ClientSession, url: str) -> None:
        code = {"code": "import time; time.sleep(1); print('done')"}
        async with session.post(f"{url}/v1/run", json=code, headers=auth(ALPHA)) as response:
            result.update(await response.json())

    async with aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
        async with serving("docker", sandbox_image) as running:
            pool = f"{POOL_LABEL}={(await running.runtime.pool()).name}"
            tg.start_soon(slow_run, session, running.url)
            await anyio.sleep(0.4)  # in flight when the service is told to stop
        left = docker_client.containers.list(all=True, filters={"label": pool})
    assert result["stdout"] == "done\n"
    assert not left
