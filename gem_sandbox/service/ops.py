"""The routes that describe the service rather than run code, served without a token:
``/healthz`` (can the pool serve), ``/metrics`` (Prometheus) and ``/openapi.json``."""

from __future__ import annotations

from aiohttp import web

from gem_sandbox.service import openapi
from gem_sandbox.service.metrics import CONTENT_TYPE
from gem_sandbox.service.route import TABLE, Route
from gem_sandbox.service.state import Service


async def healthz(request: web.Request) -> web.Response:
    service = Service.of(request)
    stats = service.runtime.statistics()
    ready = not service.draining and service.runtime.backend is not None
    body = {
        "status": "ok" if ready else ("draining" if service.draining else "starting"),
        "backend": service.runtime.backend,
        "idle": stats.idle,
        "leased": stats.leased,
        "waiting": stats.waiting,
    }
    return web.json_response(body, status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    return web.Response(body=Service.of(request).metrics.render(), headers={"Content-Type": CONTENT_TYPE})


async def openapi_document(request: web.Request) -> web.Response:
    routes: tuple[Route, ...] = request.app[TABLE]
    return web.json_response(openapi.document(routes))


ROUTES: tuple[Route, ...] = (
    Route("GET", "/healthz", healthz, "Whether the pool can serve", public=True),
    Route("GET", "/metrics", metrics, "Prometheus metrics", public=True),
    Route("GET", "/openapi.json", openapi_document, "This document", public=True),
)
