"""The aiohttp application, assembled: each API's routes (:mod:`.ops`, :mod:`.v1`,
:mod:`.fusion`, and :mod:`.e2b` when ``e2b_compatible``), and the middleware every request
passes.

Each request goes through :func:`observe` (metrics, and every error rendered as JSON, so
nothing a client sends ends as a traceback or a dropped connection), then :func:`guard`
(token, quotas, the body within its deadline and size, idempotency), then its handler.
:data:`ROUTES` is the table of routes: the app registers it (each private route also under
``/t/{token}``) and :mod:`.openapi` documents it. e2b's routes pass the same middleware but
authenticate as e2b does and answer errors in e2b's shapes.
"""

from __future__ import annotations

import json
import logging
import re
import time

import anyio
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from gem_sandbox.sandbox.errors import SandboxError
from gem_sandbox.service import e2b, fusion, ops, v1
from gem_sandbox.service.admission import CLAIM, DEADLINE_HEADER, Claim
from gem_sandbox.service.errors import ERROR, Problem, Shape, problem_for
from gem_sandbox.service.replays import KEY_HEADER, Answer
from gem_sandbox.service.route import TABLE, Handler, Route
from gem_sandbox.service.access import Tenant
from gem_sandbox.service.state import SERVICE, TENANT, Service

log = logging.getLogger(__name__)

_MUTATING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
_TOKEN_IN_PATH = re.compile(r"^/t/[^/]+")


#: Every route but e2b's, each API's from its own module.
ROUTES: tuple[Route, ...] = (*ops.ROUTES, *v1.ROUTES, *fusion.ROUTES)
_PUBLIC = frozenset(route.handler for route in ROUTES if route.public)
_FUSION = frozenset(route.handler for route in fusion.ROUTES)  # their clients retry a 504, not a 503
_SHAPES = {route.handler: route.shape for route in ROUTES}
_E2B = {endpoint.handler: endpoint for endpoint in e2b.ROUTES}


# -- middleware ----------------------------------------------------------------------------


@web.middleware
async def observe(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count and time every request, and answer every error as JSON."""
    service = Service.of(request)
    started = time.perf_counter()
    try:
        response = await handler(request)
    except Exception as exc:  # noqa: BLE001 - every failure becomes an answer
        response = _error_answer(request, exc)
    resource = request.match_info.route.resource
    route = _TOKEN_IN_PATH.sub("", resource.canonical) if resource is not None else "unmatched"
    service.metrics.requests.labels(request.method, route, str(response.status)).inc()
    service.metrics.latency.labels(route).observe(time.perf_counter() - started)
    if response.status >= 400 and isinstance(response, web.Response) and response.body:
        service.metrics.rejections.labels(_error_type(response)).inc()
    return response


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Token, quotas, body and idempotency, for every route that is not public."""
    if request.match_info.route.handler in _PUBLIC or request.match_info.http_exception is not None:
        return await handler(request)
    service = Service.of(request)
    if service.draining:
        raise Problem(503, "unavailable", "the service is shutting down; retry on another instance", retry_after=5)
    endpoint = _E2B.get(request.match_info.route.handler)
    if endpoint is not None:
        tenant = endpoint.tenant(request, service)
    else:
        tenant = service.access.authenticate(request.headers.get("Authorization"), request.match_info.get("token"))
    request[TENANT] = tenant
    refusal = 504 if request.match_info.route.handler in _FUSION else 503
    claimed = CLAIM.set(Claim(tenant.name, _patience(request), refusal))
    try:
        return await _admitted(request, handler, service, tenant, streamed=endpoint is not None and endpoint.streamed)
    finally:
        CLAIM.reset(claimed)


async def _admitted(
    request: web.Request, handler: Handler, service: Service, tenant: Tenant, *, streamed: bool = False
) -> web.StreamResponse:
    """The request within its token's quotas, once, as its idempotency key says. A
    ``streamed`` body (a client stream) is left for the handler to read as it comes."""
    with tenant.admitted():
        body = b"" if streamed else await _body(request, service)
        key = request.headers.get(KEY_HEADER)
        if key is None or request.method not in _MUTATING:
            return await handler(request)
        path = _TOKEN_IN_PATH.sub("", request.path)

        async def produce() -> Answer:
            try:
                response = await handler(request)
            except Exception as exc:  # noqa: BLE001 - a kept answer may be an error too
                response = _error_answer(request, exc)
            assert isinstance(response, web.Response)
            headers = tuple((k, v) for k, v in response.headers.items() if k == "Retry-After")
            return Answer(response.status, bytes(response.body or b""), response.content_type, headers)

        answer = await service.replays.once(tenant.name, key, (request.method, path, body), produce)
        return web.Response(
            status=answer.status, body=answer.body or None, content_type=answer.content_type, headers=dict(answer.headers)
        )


async def _body(request: web.Request, service: Service) -> bytes:
    """The whole body, within ``read_timeout`` and ``max_body_bytes``."""
    length = request.content_length
    if length is not None and length > service.options.max_body_bytes:
        raise _too_large(service)
    try:
        with anyio.fail_after(service.options.read_timeout):
            return await request.read()
    except TimeoutError:
        raise Problem(408, "request_timeout", f"the body did not arrive within {service.options.read_timeout:g} s") from None
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(service) from None


def _patience(request: web.Request) -> float | None:
    """The client's ``X-Request-Timeout`` (seconds it will wait), if it sent one."""
    raw = request.headers.get(DEADLINE_HEADER)
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise Problem(400, "bad_request", f"{DEADLINE_HEADER} is a positive number of seconds, got {raw!r}")
    return seconds


def _too_large(service: Service) -> Problem:
    limit = service.options.max_body_bytes
    return Problem(413, "too_large", f"the body is over the service's limit of {limit} bytes; send less per request")


def as_problem(exc: Exception) -> Problem:
    if isinstance(exc, Problem):
        return exc
    if isinstance(exc, SandboxError):
        return problem_for(exc)
    if isinstance(exc, web.HTTPMethodNotAllowed):  # aiohttp's own: the path takes other methods
        allowed = exc.allowed_methods
        message = f"{exc.method} is not served here; this path takes {', '.join(sorted(allowed))} (see /openapi.json)"
        return Problem(405, "method_not_allowed", message, allow=allowed)
    if isinstance(exc, web.HTTPException):  # aiohttp's own: no such route
        kind = "not_found" if exc.status == 404 else "bad_request"
        return Problem(exc.status, kind, f"{exc.reason}; the routes are in /openapi.json")
    log.exception("unexpected error answering a request")
    return Problem(500, "internal", f"the service failed ({type(exc).__name__}); this is a bug, please report it")


def render(problem: Problem, shape: Shape = ERROR) -> web.Response:
    return web.json_response(shape.body(problem), status=problem.status, headers=problem.headers())


def _error_answer(request: web.Request, exc: Exception) -> web.Response:
    """The error answer in the shape of the request's API: e2b's paths, served or not, in
    e2b's shapes (a path of e2b's with no route here is e2b's unserved one), the rest in their
    route's :class:`Shape` (SandboxFusion's ``{"detail"}``, the service's ``{"error"}``)."""
    endpoint = _E2B.get(request.match_info.route.handler)
    if endpoint is not None:
        return endpoint.render(as_problem(exc))
    e2b_render = e2b.render_for(request.path) if request.match_info.http_exception is not None else None
    if e2b_render is None:
        return render(as_problem(exc), _SHAPES.get(request.match_info.route.handler, ERROR))
    if isinstance(exc, web.HTTPNotFound):
        return e2b_render(e2b.unserved(request.path, Service.of(request).options.e2b_compatible))
    return e2b_render(as_problem(exc))


def _error_type(response: web.Response) -> str:
    try:
        return str(json.loads(bytes(response.body or b""))["error"]["type"])
    except (ValueError, KeyError, TypeError):
        return str(response.status)


class AccessLog(AbstractAccessLogger):
    """One JSON line per request; a token in the path is logged as ``/t/***``."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        tenant = request.get(TENANT)
        self.logger.info(
            json.dumps(
                {
                    "remote": request.remote,
                    "method": request.method,
                    "path": _TOKEN_IN_PATH.sub("/t/***", request.path),
                    "status": response.status,
                    "ms": round(time * 1000, 3),
                    "token": tenant.name if tenant is not None else None,
                    "bytes": response.body_length,
                }
            )
        )

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


def make_app(service: Service) -> web.Application:
    app = web.Application(middlewares=[observe, guard], client_max_size=service.options.max_body_bytes)
    app[SERVICE] = service
    app[TABLE] = ROUTES
    for route in ROUTES:
        app.router.add_route(route.method, route.path, route.handler)
        if not route.public:
            app.router.add_route(route.method, "/t/{token}" + route.path, route.handler)
    if service.options.e2b_compatible:
        for endpoint in e2b.ROUTES:
            app.router.add_route(endpoint.method, endpoint.path, endpoint.handler)
    return app

