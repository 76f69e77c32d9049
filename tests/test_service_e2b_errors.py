"""Errors on the e2b-compatible endpoint come in e2b's shapes, whether the route is served or
not, so the unmodified ``e2b`` SDK raises its own exceptions (never a ``KeyError`` from parsing
another shape): the REST API's ``{code, message}``, Connect errors on envd's RPCs, 405 with
``Allow``. A real service on the local backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import e2b
import pytest

from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, serving

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service() -> AsyncIterator[Service]:
    async with serving("local", e2b_compatible=True) as running:
        yield running


@pytest.fixture
async def sandbox(service: Service) -> AsyncIterator[e2b.AsyncSandbox]:
    created = await e2b.AsyncSandbox.create(api_url=service.url, sandbox_url=service.url, api_key=ALPHA.secret)
    yield created
    await created.kill()


async def test_an_unserved_rest_route_raises_the_sdks_exception_saying_so(sandbox: e2b.AsyncSandbox) -> None:
    config = sandbox.connection_config
    with pytest.raises(e2b.VolumeException, match="501.*not served by gem-sandbox"):
        await e2b.AsyncVolume.create("data", api_url=config.api_url, api_key=ALPHA.secret)


async def test_a_served_routes_error_still_maps_to_the_sdks_exception(sandbox: e2b.AsyncSandbox) -> None:
    with pytest.raises(e2b.FileNotFoundException):
        await sandbox.files.read("/home/user/missing.txt")
    with pytest.raises(e2b.SandboxNotFoundException):
        await e2b.AsyncSandbox.get_info("sb-none", api_url=sandbox.connection_config.api_url, api_key=ALPHA.secret)


async def test_reading_a_directory_is_an_invalid_argument_as_on_envd(sandbox: e2b.AsyncSandbox) -> None:
    await sandbox.files.make_dir("/home/user/d")
    with pytest.raises(e2b.InvalidArgumentException, match="not a regular file"):
        await sandbox.files.read("/home/user/d")


async def raw(service: Service, method: str, path: str, **options: Any) -> tuple[int, dict[str, str], Any]:
    async with aiohttp.ClientSession(service.url) as http, http.request(method, path, **options) as response:
        return response.status, dict(response.headers), await response.json()


@pytest.mark.parametrize("path", ["/v2/templates", "/sandboxes/sb-x/refreshes", "/volumes", "/contexts/x/y"])
async def test_every_unserved_e2b_path_answers_code_and_message(service: Service, path: str) -> None:
    status, _, body = await raw(service, "POST", path, headers={"X-API-KEY": ALPHA.secret})
    assert status == 501
    assert body["code"] == 501 and "not served" in body["message"]


async def test_a_wrong_method_on_an_e2b_path_answers_405_with_allow_in_e2bs_shape(service: Service) -> None:
    status, headers, body = await raw(service, "PUT", "/v2/sandboxes", headers={"X-API-KEY": ALPHA.secret})
    assert (status, body["code"]) == (405, 405)
    assert set(headers["Allow"].split(", ")) == {"GET", "POST"}


async def test_an_unserved_rpc_path_answers_a_connect_error(service: Service) -> None:
    status, _, body = await raw(service, "POST", "/filesystem.Filesystem/ComposeFiles", json={})
    assert (status, body["code"]) == (501, "unimplemented")


async def test_other_paths_keep_the_services_own_shape(service: Service) -> None:
    status, _, body = await raw(service, "GET", "/v1/nothing")
    assert (status, body["error"]["type"]) == (404, "not_found")


async def test_with_the_endpoint_off_its_paths_say_how_to_turn_it_on() -> None:
    async with serving("local") as plain:
        status, _, body = await raw(plain, "POST", "/v2/sandboxes", headers={"X-API-KEY": ALPHA.secret}, json={})
    assert (status, body["code"]) == (404, 404)
    assert "--e2b-compatible" in body["message"]
