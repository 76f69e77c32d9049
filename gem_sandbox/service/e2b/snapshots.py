"""e2b's pause, snapshots and fork (``Sandbox.beta_pause``, ``create_snapshot``,
``list_snapshots``, ``delete_snapshot``, ``fork``), on the pool's snapshots and forks
(:mod:`.kept` keeps what they leave).

Pause snapshots the sandbox and ends its lease, keeping it as paused until ``connect`` resumes
it (:mod:`.control`). What a snapshot cannot carry (a running command) is refused with 400, not
lost; a pause's 409 means "already paused" to the SDK. A fork's branches are new e2b sandboxes
of the key's token, all or none (e2b answers one result per branch; here they share one fate).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field

from gem_sandbox.service.e2b.control import DEFAULT_TIMEOUT, PAGE, Body, count_param, e2b_lease, route, sandbox_json
from gem_sandbox.service.e2b.kept import Saved, copied, drop, find_snapshot, kept, paused, snapshot_of, snapshots_of
from gem_sandbox.service.errors import Problem, not_found
from gem_sandbox.service.state import TENANT, Service, parse


class SnapshotBody(Body):
    name: str | None = None


class ForkBody(Body):
    timeout: int | None = Field(None, ge=1)
    count: int = Field(1, ge=1)


async def pause(request: web.Request) -> web.Response:
    service, tenant, sandbox_id = Service.of(request), request[TENANT], request.match_info["id"]
    if paused(service, tenant, sandbox_id) is not None:
        raise Problem(409, "conflict", f"sandbox {sandbox_id} is already paused")
    saved = await _save(request)
    kept(service).paused[saved.sandbox_id] = saved
    await service.leases.delete(tenant, saved.sandbox_id)
    return web.Response(status=204)


async def create_snapshot(request: web.Request) -> web.Response:
    body = await parse(request, SnapshotBody)
    saved = await _save(request)
    saved.names = [body.name] if body.name else []
    kept(Service.of(request)).snapshots[saved.snapshot.id] = saved
    return web.json_response(_snapshot_json(saved), status=201)


async def list_snapshots(request: web.Request) -> web.Response:
    service, query = Service.of(request), request.query
    snapshots = [
        saved
        for saved in snapshots_of(service, request[TENANT])
        if query.get("sandboxID", saved.sandbox_id) == saved.sandbox_id and query.get("name", "") in ("", *saved.names)
    ]
    snapshots.sort(key=lambda saved: saved.snapshot.created, reverse=True)
    start, limit = count_param(query.get("nextToken", "0"), "nextToken"), count_param(query.get("limit", str(PAGE)), "limit")
    headers = {"x-next-token": str(start + limit)} if start + limit < len(snapshots) else {}
    return web.json_response([_snapshot_json(saved) for saved in snapshots[start : start + limit]], headers=headers)


async def delete_snapshot(request: web.Request) -> web.Response:
    """``DELETE /templates/{id}``: the SDK's ``delete_snapshot`` (a snapshot is a template)."""
    service, name = Service.of(request), request.match_info["id"]
    saved = find_snapshot(service, request[TENANT], name)
    if saved is None:
        raise not_found(f"snapshot {name}")
    del kept(service).snapshots[saved.snapshot.id]
    await drop(service, saved)
    return web.Response(status=204)


async def fork(request: web.Request) -> web.Response:
    service, body, tenant = Service.of(request), await parse(request, ForkBody), request[TENANT]
    lease = e2b_lease(request)
    assert lease.e2b is not None  # e2b_lease finds only e2b sandboxes
    if lease.e2b.commands:
        raise Problem(400, "snapshot_unsupported", "the sandbox has running commands, which a fork cannot carry; kill them first")
    timeout = body.timeout or DEFAULT_TIMEOUT
    branches = await service.leases.fork(tenant, lease.id, body.count, ttl=timeout, renews=False)
    for branch in branches:
        branch.e2b = copied(lease.e2b)
    return web.json_response([{"sandbox": sandbox_json(branch)} for branch in branches], status=201)


async def _save(request: web.Request) -> Saved:
    """A snapshot of the request's sandbox, kept as long as a lease may live."""
    service, lease = Service.of(request), e2b_lease(request)
    assert lease.e2b is not None  # e2b_lease finds only e2b sandboxes
    async with service.leases.using(request[TENANT], lease.id):
        snapshot = await snapshot_of(lease, service.leases.max_ttl)
    return Saved(lease.tenant, snapshot, lease.runtime, lease.e2b, lease.id, started=lease.started)


def _snapshot_json(saved: Saved) -> dict[str, Any]:
    """e2b's ``SnapshotInfo``."""
    return {"snapshotID": saved.snapshot.id, "names": saved.names}


ROUTES = (
    route("POST", "/sandboxes/{id}/pause", pause),
    route("POST", "/sandboxes/{id}/snapshots", create_snapshot),
    route("GET", "/snapshots", list_snapshots),
    route("DELETE", "/templates/{id}", delete_snapshot),
    route("POST", "/sandboxes/{id}/fork", fork),
)
