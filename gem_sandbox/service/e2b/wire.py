"""How e2b's routes differ from ``/v1`` before their handlers run: who a request speaks for
(:attr:`Endpoint.tenant`, in place of the bearer token) and how its errors look
(:attr:`Endpoint.render`). The app's middleware asks the endpoint for both, so quotas,
body limits, draining and metrics stay the same for every route.

The SDK parses error bodies strictly: its REST, ``/files`` and Jupyter clients need
``{"code": <int>, "message": <str>}`` (any other shape crashes it with a ``KeyError``), its
Connect RPCs ``{"code": "<connect code>", "message": ...}`` (:func:`connect_error`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from gem_sandbox.service.access import Tenant
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.state import Service

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticate = Callable[[web.Request, Service], Tenant]
Render = Callable[[Problem], web.Response]

#: Connect's error codes, and the one each HTTP status stands for (as connectrpc maps them).
CONNECT_CODES = frozenset(
    {
        "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
        "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
        "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated",
    }
)  # fmt: skip
_CONNECT_BY_STATUS = {
    400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "not_found",
    408: "deadline_exceeded", 409: "already_exists", 413: "resource_exhausted", 429: "resource_exhausted",
    499: "canceled", 500: "internal", 501: "unimplemented", 502: "unavailable", 503: "unavailable",
    504: "deadline_exceeded",
}  # fmt: skip
_RETRYABLE = frozenset({429, 503})  # the SDK would also replay 502 and 504: not worth it here
#: The first segment of every path of e2b's REST API (the SDK's generated client, and the
#: CLI's), envd's HTTP routes and the code interpreter's; and the path of a Connect RPC.
_E2B_ROOTS = frozenset(
    {
        "sandboxes", "v2", "v3", "templates", "default-templates", "snapshots", "volumes", "secrets",
        "teams", "api-keys", "access-tokens", "nodes", "files", "health", "envs", "init", "execute", "contexts",
    }
)  # fmt: skip
_CONNECT_PATH = re.compile(r"^/\w+(?:\.\w+)+/\w+$")


@dataclass(frozen=True)
class Endpoint:
    """One e2b route: where it is, who may call it, how its errors look."""

    method: str
    path: str
    handler: Handler
    tenant: Authenticate
    render: Render
    streamed: bool = False  # its body is a client stream, read by the handler as it comes


def plain_error(problem: Problem) -> web.Response:
    """``{"code": <status>, "message": ...}``: e2b's REST API, envd's ``/files`` and ``/health``,
    and the code interpreter's routes."""
    problem = _as_envd(problem)
    return web.json_response(
        {"code": problem.status, "message": problem.message}, status=problem.status, headers=_headers(problem)
    )


def connect_error(problem: Problem) -> web.Response:
    """A Connect error: its code names the problem (``not_found``, ``already_exists``...)."""
    problem = _as_envd(problem)
    body = {"code": connect_code(problem), "message": problem.message}
    return web.json_response(body, status=problem.status, headers=_headers(problem))


def connect_code(problem: Problem) -> str:
    """The problem's own kind where it is a Connect code, else the one its status stands for."""
    return problem.kind if problem.kind in CONNECT_CODES else _CONNECT_BY_STATUS.get(problem.status, "unknown")


def _as_envd(problem: Problem) -> Problem:
    """The problem as envd would answer it: a path its files do not allow (a directory named
    as a file, a link in the way) is envd's 400, the SDK's ``InvalidArgumentException``."""
    if problem.kind != "file_conflict":
        return problem
    return Problem(400, "invalid_argument", problem.message, retry_after=problem.retry_after, allow=problem.allow)


def _headers(problem: Problem) -> dict[str, str]:
    """Problem's own, and ``Should-Retry: false`` where the SDK's retries would only wait."""
    headers = problem.headers()
    if problem.status not in _RETRYABLE:
        headers["Should-Retry"] = "false"
    return headers


def render_for(path: str) -> Render | None:
    """How e2b's SDK reads errors on ``path``, a route of one of e2b's APIs whether this
    service serves it or not (so the SDK raises its own exception, never a ``KeyError``);
    None for a path that is none of e2b's."""
    if _CONNECT_PATH.match(path):
        return connect_error
    return plain_error if path.split("/", 2)[1] in _E2B_ROOTS else None


def unserved(path: str, enabled: bool) -> Problem:
    """The answer for a path of e2b's APIs that has no route here: 501 for what the
    e2b-compatible endpoint does not serve (template builds, volumes, secrets...), 404
    while the endpoint is off."""
    if not enabled:
        return Problem(404, "not_found", f"{path}: the e2b-compatible endpoint is off; start the service with --e2b-compatible")
    return Problem(501, "unimplemented", f"{path} is not served by gem-sandbox's e2b-compatible endpoint (docs/service.md)")
