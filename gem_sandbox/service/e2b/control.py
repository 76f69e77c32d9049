"""e2b's REST control plane: create, list, inspect, time out, connect to and kill sandboxes
(``POST /v2/sandboxes`` and the rest of what ``e2b.Sandbox`` calls), authenticated by
``X-API-KEY`` = one of the service's token secrets.

An e2b sandbox is a lease of the key's token that does not renew: it ends at its absolute
deadline (create's ``timeout``, 300 s by default, capped at ``max_lease_ttl``; ``set_timeout``
moves it to now + t), whatever requests it serves. e2b's template names get the pool's image,
an operator's templates their own (:mod:`.templates`), the key's snapshots their state
(:mod:`.snapshots`), and an unknown name is 404. A paused sandbox holds no lease: it is
listed, inspected and killed from its record, and ``connect`` resumes it.
"""

from __future__ import annotations

import math
import secrets
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from gem_sandbox.service.access import Tenant
from gem_sandbox.service.e2b.kept import Saved, copied, drop, find_snapshot, kept, paused, paused_of, restore, resume
from gem_sandbox.service.e2b.state import E2bSandbox
from gem_sandbox.service.e2b.wire import Endpoint, Handler, plain_error
from gem_sandbox.service.errors import Problem, bad_request, not_found
from gem_sandbox.service.leases import Lease
from gem_sandbox.service.state import TENANT, Service, parse

ENVD_VERSION = "0.6.4"  # at or past 0.5.7: the SDK sends no default user and may upload raw bytes
CLIENT_ID = "gem-sandbox"
DEFAULT_TIMEOUT = 300.0  # e2b's, when create names none
COPY_TIMEOUT = 120.0  # seconds to copy a template's home dir into a new sandbox
PAGE = 100  # sandboxes a list answers when it names no limit
API_KEY_HEADER = "X-API-KEY"


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the SDK sends options we do not act on


class CreateBody(Body):
    template: str = Field("base", alias="templateID")
    timeout: int | None = Field(None, ge=1)
    metadata: dict[str, str] = {}
    env: dict[str, str] = Field({}, alias="envVars")
    auto_pause: bool = Field(False, alias="autoPause")


class TimeoutBody(Body):
    timeout: int = Field(ge=1)


class ConnectBody(Body):
    timeout: int | None = Field(None, ge=1)


def api_tenant(request: web.Request, service: Service) -> Tenant:
    """The token whose secret the request's ``X-API-KEY`` is (any key when the service is open)."""
    key = request.headers.get(API_KEY_HEADER)
    if not key and not service.access.open:
        raise Problem(401, "unauthorized", f"no API key: send {API_KEY_HEADER} (E2B_API_KEY) = one of the service's token secrets")
    return service.access.authenticate(None, key)


async def create(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, CreateBody)
    if body.auto_pause:
        raise bad_request("sandboxes are not paused on timeout here: create without auto_pause, and pause them yourself")
    timeout = body.timeout or DEFAULT_TIMEOUT
    snapshot = find_snapshot(service, request[TENANT], body.template)
    if snapshot is not None:  # e2b's snapshots are templates
        state = copied(snapshot.state)
        state.template, state.metadata, state.env = body.template, body.metadata, {**state.env, **body.env}
        lease = await restore(service, snapshot, timeout, state)
        return web.json_response(sandbox_json(lease), status=201)
    runtime, built = await service.templates.runtime_for(body.template)
    lease = await service.leases.create(request[TENANT], timeout, renews=False, runtime=runtime)
    if built:  # the template's own home dir, into the sandbox's (Docker's, so docker is installed)
        from gem_sandbox.sandbox.backends.docker.templates import COPY_HOME

        copied_home = await lease.sandbox.run(COPY_HOME, "bash", timeout=COPY_TIMEOUT)
        if not copied_home.ok:
            await service.leases.delete(request[TENANT], lease.id)
            raise Problem(503, "unavailable", f"template {body.template}: its home dir could not be copied in: {copied_home.stderr[-300:]}")
    lease.e2b = E2bSandbox(body.template, secrets.token_urlsafe(24), body.metadata, body.env)
    return web.json_response(sandbox_json(lease), status=201)


async def list_sandboxes(request: web.Request) -> web.Response:
    service, query, tenant = Service.of(request), request.query, request[TENANT]
    wanted = _metadata_filter(query.get("metadata", ""))
    states = set(query.get("state", "running").split(","))
    after = _instant(query["startedAfter"]) if "startedAfter" in query else -math.inf
    found = [
        *((lease.started, _e2b(lease), _listed(service, lease)) for lease in _e2b_leases(service, tenant) if "running" in states),
        *((saved.started, saved.state, _listed_paused(service, saved)) for saved in paused_of(service, tenant) if "paused" in states),
    ]
    listed = [
        (started, answer)
        for started, state, answer in found
        if wanted.items() <= state.metadata.items() and query.get("template", state.template) == state.template and started > after
    ]
    listed.sort(key=lambda item: item[0], reverse=query.get("order", "desc") != "asc")  # newest first
    start, limit = count_param(query.get("nextToken", "0"), "nextToken"), count_param(query.get("limit", str(PAGE)), "limit")
    page = [answer for _, answer in listed[start : start + limit]]
    headers = {"x-next-token": str(start + limit)} if start + limit < len(listed) else {}
    return web.json_response(page, headers=headers)


async def get_info(request: web.Request) -> web.Response:
    service = Service.of(request)
    saved = paused(service, request[TENANT], request.match_info["id"])
    if saved is not None:
        return web.json_response(dict(_listed_paused(service, saved), envdAccessToken=saved.state.access_token, domain=None))
    lease = e2b_lease(request)
    return web.json_response(dict(_listed(service, lease), envdAccessToken=_e2b(lease).access_token, domain=None))


async def kill(request: web.Request) -> web.Response:
    service = Service.of(request)
    saved = paused(service, request[TENANT], request.match_info["id"])
    if saved is not None:
        del kept(service).paused[saved.sandbox_id]
        await drop(service, saved)
        return web.Response(status=204)
    await service.leases.delete(request[TENANT], e2b_lease(request).id)
    return web.Response(status=204)


async def set_timeout(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, TimeoutBody)
    e2b_lease(request).expire_in(service.leases.capped(body.timeout))
    return web.Response(status=204)


async def connect(request: web.Request) -> web.Response:
    """A paused sandbox resumes (a new lease, under its id); a running one only has its
    timeout extended, and only when the new one ends later."""
    service, body = Service.of(request), await parse(request, ConnectBody)
    saved = paused(service, request[TENANT], request.match_info["id"])
    if saved is not None:
        lease = await resume(service, saved, service.leases.capped(body.timeout or DEFAULT_TIMEOUT))
        return web.json_response(sandbox_json(lease), status=201)
    lease = e2b_lease(request)
    if body.timeout is not None:
        seconds = service.leases.capped(body.timeout)
        if time.monotonic() + seconds > lease.deadline:
            lease.expire_in(seconds)
    return web.json_response(sandbox_json(lease))


def _e2b_leases(service: Service, tenant: Tenant) -> list[Lease]:
    """The token's e2b sandboxes (its /v1 leases have no access token: envd cannot reach them)."""
    return [lease for lease in service.leases.owned_by(tenant) if lease.e2b is not None]


def e2b_lease(request: web.Request) -> Lease:
    """The e2b sandbox a control-plane request names, if the key's token holds it."""
    lease = Service.of(request).leases.find(request[TENANT], request.match_info["id"])
    if lease.e2b is None:
        raise not_found(f"sandbox {lease.id}")
    return lease


def _e2b(lease: Lease) -> E2bSandbox:
    assert lease.e2b is not None  # only e2b's leases are found or listed here
    return lease.e2b


def sandbox_json(lease: Lease) -> dict[str, Any]:
    """e2b's ``Sandbox``: what create and connect answer."""
    state = _e2b(lease)
    return {
        "templateID": state.template,
        "alias": state.template,
        "sandboxID": lease.id,
        "clientID": CLIENT_ID,
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": state.access_token,
        "trafficAccessToken": state.access_token,  # the code interpreter's context calls send only this
        "domain": None,
    }


def _listed(service: Service, lease: Lease) -> dict[str, Any]:
    """e2b's ``ListedSandbox``."""
    ends = time.time() + max(0.0, lease.deadline - time.monotonic())
    return _listed_as(service, lease.id, _e2b(lease), lease.started, ends, "running")


def _listed_paused(service: Service, saved: Saved) -> dict[str, Any]:
    """A paused sandbox's ``ListedSandbox``: it ends when its snapshot expires."""
    return _listed_as(service, saved.sandbox_id, saved.state, saved.started, saved.snapshot.expires, "paused")


def _listed_as(service: Service, sandbox_id: str, state: E2bSandbox, started: float, ends: float, status: str) -> dict[str, Any]:
    spec = service.runtime.config.spec
    return {
        "templateID": state.template,
        "alias": state.template,
        "sandboxID": sandbox_id,
        "clientID": CLIENT_ID,
        "startedAt": _timestamp(started),
        "endAt": _timestamp(ends),
        "cpuCount": max(1, math.ceil(spec.cpus)),
        "memoryMB": spec.memory_mb,
        "diskSizeMB": spec.workdir_mb,
        "state": status,
        "envdVersion": ENVD_VERSION,
        "metadata": state.metadata,
    }


def _metadata_filter(raw: str) -> dict[str, str]:
    """The SDK's ``metadata`` query: ``urlencode`` of quoted keys and values, in a query."""
    return {unquote(key): unquote(value) for key, value in parse_qsl(raw)}


def count_param(raw: str, name: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0 or (name == "limit" and value == 0):
        raise bad_request(f"{name} must be a {'positive' if name == 'limit' else 'non-negative'} integer, got {raw!r}")
    return value


def _instant(raw: str) -> float:
    """A query's ISO 8601 time (the SDK's ``datetime.isoformat()``; naive ones are UTC)."""
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise bad_request(f"startedAfter must be an ISO 8601 time, got {raw!r}") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def route(method: str, path: str, handler: Handler) -> Endpoint:
    return Endpoint(method, path, handler, api_tenant, plain_error)


ROUTES = (
    route("POST", "/v2/sandboxes", create),
    route("GET", "/v2/sandboxes", list_sandboxes),
    route("GET", "/sandboxes/{id}", get_info),
    route("DELETE", "/sandboxes/{id}", kill),
    route("POST", "/sandboxes/{id}/timeout", set_timeout),
    route("POST", "/v2/sandboxes/{id}/connect", connect),
)
