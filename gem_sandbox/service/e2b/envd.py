"""What every envd-style request shares: which sandbox it is for and whether it may use it,
and how e2b's paths name files in it.

With ``E2B_SANDBOX_URL`` set, the SDK sends every sandbox's envd and Jupyter requests to one
base URL, naming the sandbox in the ``E2b-Sandbox-Id`` header and proving it may use it with
the sandbox's access token (``X-Access-Token``, or ``E2B-Traffic-Access-Token`` on the code
interpreter's routes). A sandbox that is not there (never was, killed, timed out) answers 502
"The sandbox <id> was not found", which the SDK reads as "not running".

e2b's sandboxes keep files under ``/home/user``; ours under the agent's work dir, which
``/home/user`` links to in every sandbox. Both name the same dir here (:func:`local_path`,
:func:`e2b_path`), whose files the agent moves; a path elsewhere (``/tmp``, say) is reached by
a run as the sandbox's user, so it can touch only what the sandbox's code could.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from aiohttp import web

from gem_sandbox.runtime import LeasedSandbox
from gem_sandbox.service.access import Tenant
from gem_sandbox.service.e2b.state import E2bSandbox
from gem_sandbox.service.e2b.wire import Endpoint, Handler, connect_error, plain_error
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.leases import Lease
from gem_sandbox.service.state import Service

HOME = "/home/user"
SANDBOX_HEADER = "E2b-Sandbox-Id"
ACCESS_HEADER = "X-Access-Token"
TRAFFIC_HEADER = "E2B-Traffic-Access-Token"
LEASE = web.RequestKey("e2b_lease", Lease)


def envd_tenant(request: web.Request, service: Service) -> Tenant:
    """The tenant of the sandbox an envd request names, once its access token is checked."""
    return _authorize(request, service, (ACCESS_HEADER,))


def files_tenant(request: web.Request, service: Service) -> Tenant:
    """As :func:`envd_tenant`; or, for a signed URL (the SDK's ``download_url`` and
    ``upload_url``, which a browser fetches with no header), the sandbox whose access token
    made its signature: a SHA-256 of the path, the operation, the user, the token and the
    expiry, e2b's ``v1_`` scheme. Past ``signature_expiration`` it is refused."""
    query = request.query
    if "signature" not in query:
        return envd_tenant(request, service)
    expiry = query.get("signature_expiration", "")
    if expiry and (not expiry.isdigit() or int(expiry) < time.time()):
        raise Problem(401, "unauthenticated", "signature is already expired")  # e2b's words
    operation = "read" if request.method == "GET" else "write"
    signed = f"{query.get('path', '')}:{operation}:{query.get('username', '')}"
    for lease in service.leases.every():
        if lease.e2b is not None:
            raw = f"{signed}:{lease.e2b.access_token}" + (f":{expiry}" if expiry else "")
            expected = "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).rstrip(b"=").decode()
            if secrets.compare_digest(expected.encode(), query["signature"].encode()):
                request[LEASE] = lease
                return lease.tenant
    raise Problem(401, "unauthenticated", "the URL's signature matches no sandbox (wrong path, operation or token)")


def jupyter_tenant(request: web.Request, service: Service) -> Tenant:
    """As :func:`envd_tenant`, for the code interpreter: its context calls send only the
    traffic token (which is the access token here)."""
    return _authorize(request, service, (ACCESS_HEADER, TRAFFIC_HEADER))


def lease_of(request: web.Request) -> Lease:
    """The lease an authenticated envd request is for."""
    return request[LEASE]


def e2b_of(request: web.Request) -> E2bSandbox:
    """What the sandbox an authenticated envd request is for keeps as an e2b sandbox."""
    state = request[LEASE].e2b
    assert state is not None  # _authorize let in only leases that have it
    return state


def sandbox_gone(request: web.Request) -> bool:
    """Whether the request's sandbox ended (killed, timed out) since it was let in."""
    lease = lease_of(request)
    return Service.of(request).leases.get(lease.id) is not lease


@asynccontextmanager
async def sandbox_of(request: web.Request) -> AsyncIterator[LeasedSandbox]:
    """The request's sandbox, held busy while the request uses it."""
    lease, leases = lease_of(request), Service.of(request).leases
    if sandbox_gone(request):
        raise _gone(lease.id)
    async with leases.using(lease.tenant, lease.id) as sandbox:
        yield sandbox


def local_path(path: str, sandbox: LeasedSandbox) -> str:
    """What an e2b path names here: a work-dir-relative path (``.`` for the home dir itself)
    for ``/home/user/...``, the sandbox's own work dir and relative paths, else the absolute
    path, normalized (:func:`in_home` tells them apart)."""
    absolute = posixpath.normpath(posixpath.join(HOME, path or "."))
    for root in (HOME, *([sandbox.hello["workdir"]] if sandbox.hello.get("workdir") else [])):
        if absolute == root or absolute.startswith(root.rstrip("/") + "/"):
            return absolute[len(root) :].lstrip("/") or "."
    return absolute


def in_home(local: str) -> bool:
    """Whether a :func:`local_path` is in the home dir (the agent's files there) rather than
    elsewhere in the sandbox (reached by runs as the sandbox's user)."""
    return not local.startswith("/")


def e2b_path(local: str) -> str:
    """The absolute path e2b's clients expect for a :func:`local_path`."""
    if not in_home(local):
        return local
    return HOME if local in ("", ".") else f"{HOME}/{local}"


async def health(request: web.Request) -> web.Response:
    """Alive: the lookup that authenticated the request found the sandbox."""
    return web.Response(status=204)


def rpc(service: str, method: str, handler: Handler, *, streamed: bool = False) -> Endpoint:
    """An envd Connect RPC, ``POST /<service>/<method>``: the sandbox's token, Connect errors
    (``streamed``: a client-streaming one)."""
    return Endpoint("POST", f"/{service}/{method}", handler, envd_tenant, connect_error, streamed)


def _authorize(request: web.Request, service: Service, headers: Sequence[str]) -> Tenant:
    sandbox_id = request.headers.get(SANDBOX_HEADER, "")
    lease = service.leases.get(sandbox_id)
    if lease is None or lease.e2b is None:
        raise _gone(sandbox_id)
    tokens = [request.headers[name] for name in headers if name in request.headers]
    expected = lease.e2b.access_token.encode()
    if not any(secrets.compare_digest(token.encode(), expected) for token in tokens):
        raise Problem(401, "unauthenticated", f"the sandbox {sandbox_id} needs its envdAccessToken as {ACCESS_HEADER}")
    request[LEASE] = lease
    return lease.tenant


def _gone(sandbox_id: str) -> Problem:
    return Problem(502, "unavailable", f"The sandbox {sandbox_id} was not found")


ROUTES = (Endpoint("GET", "/health", health, envd_tenant, plain_error),)
