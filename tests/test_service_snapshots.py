"""Snapshots and forks through the pool service's /v1 routes, over real HTTP on Docker: a
fork's branches are leases of the caller's, snapshots restore as new leases, and another
token sees none of them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, BETA, auth, docker_client, sandbox_image, service  # noqa: F401 - fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
async def alpha(service: Service) -> AsyncIterator[aiohttp.ClientSession]:  # noqa: F811
    async with aiohttp.ClientSession(service.url, headers=auth(ALPHA)) as session:
        yield session


@pytest.fixture
async def beta(service: Service) -> AsyncIterator[aiohttp.ClientSession]:  # noqa: F811
    async with aiohttp.ClientSession(service.url, headers=auth(BETA)) as session:
        yield session


async def _post(http: aiohttp.ClientSession, path: str, body: dict, status: int = 200) -> dict:
    async with http.post(path, json=body) as response:
        assert response.status == status, await response.text()
        return await response.json()


async def _kernel(http: aiohttp.ClientSession, lease: str, code: str) -> str:
    return (await _post(http, f"/v1/sandboxes/{lease}/kernel", {"code": code}))["stdout"]


async def test_a_fork_gives_the_caller_leases_that_diverge(alpha: aiohttp.ClientSession) -> None:
    parent = (await _post(alpha, "/v1/sandboxes", {}, 201))["id"]
    await _kernel(alpha, parent, "path = ['root']")
    await _post(alpha, f"/v1/sandboxes/{parent}/shell", {"command": "echo kept > kept.txt && export MODE=fork"})
    forked = await _post(alpha, f"/v1/sandboxes/{parent}/fork", {"n": 2}, 201)
    branches = [lease["id"] for lease in forked["sandboxes"]]
    assert len(set(branches) | {parent}) == 3
    for index, branch in enumerate(branches):
        assert await _kernel(alpha, branch, f"path.append({index}); print(path)") == f"['root', {index}]\n"
        shell = await _post(alpha, f"/v1/sandboxes/{branch}/shell", {"command": "echo $MODE $(cat kept.txt)"})
        assert shell["stdout"] == "fork kept\n"
    assert await _kernel(alpha, parent, "print(path)") == "['root']\n"
    async with alpha.get("/v1/sandboxes") as response:
        assert {lease["id"] for lease in (await response.json())["sandboxes"]} >= set(branches)
    refused = await _post(alpha, f"/v1/sandboxes/{parent}/fork", {"n": 4}, 409)  # 3 held of 4
    assert refused["error"]["type"] == "fork_failed"
    for lease in [parent, *branches]:
        async with alpha.delete(f"/v1/sandboxes/{lease}") as response:
            assert response.status == 204


async def test_a_snapshot_restores_for_its_token_only(alpha: aiohttp.ClientSession, beta: aiohttp.ClientSession) -> None:
    parent = (await _post(alpha, "/v1/sandboxes", {}, 201))["id"]
    await _kernel(alpha, parent, "answer = 41")
    snapshot = await _post(alpha, f"/v1/sandboxes/{parent}/snapshot", {"ttl": 600}, 201)
    assert snapshot["kernels"] == ["default"] and snapshot["size"] > 0
    async with alpha.delete(f"/v1/sandboxes/{parent}") as response:
        assert response.status == 204
    restored = (await _post(alpha, "/v1/sandboxes", {"snapshot": snapshot["id"]}, 201))["id"]
    assert await _kernel(alpha, restored, "print(answer + 1)") == "42\n"
    missing = await _post(beta, "/v1/sandboxes", {"snapshot": snapshot["id"]}, 404)
    assert missing["error"]["type"] == "not_found"
    async with beta.get("/v1/snapshots") as response:
        assert (await response.json())["snapshots"] == []
    async with beta.delete(f"/v1/snapshots/{snapshot['id']}") as response:
        assert response.status == 404
    async with alpha.get("/v1/snapshots") as response:
        assert [s["id"] for s in (await response.json())["snapshots"]] == [snapshot["id"]]
    async with alpha.delete(f"/v1/snapshots/{snapshot['id']}") as response:
        assert response.status == 204
    await _post(alpha, "/v1/sandboxes", {"snapshot": snapshot["id"]}, 404)
    async with alpha.delete(f"/v1/sandboxes/{restored}") as response:
        assert response.status == 204


async def test_a_snapshot_of_a_busy_sandbox_is_a_409_and_the_lease_lives(alpha: aiohttp.ClientSession) -> None:
    lease = (await _post(alpha, "/v1/sandboxes", {}, 201))["id"]
    await _post(alpha, f"/v1/sandboxes/{lease}/shell", {"command": "sleep 300 &"})
    refused = await _post(alpha, f"/v1/sandboxes/{lease}/snapshot", {}, 409)
    assert refused["error"]["type"] == "snapshot_unsupported" and "process" in refused["error"]["message"]
    assert await _kernel(alpha, lease, "print('alive')") == "alive\n"
    async with alpha.delete(f"/v1/sandboxes/{lease}") as response:
        assert response.status == 204
