"""The routes that describe the service rather than run code, served without a token:
``/healthz`` (can the pool serve), ``/metrics`` (Prometheus) and ``/openapi.json``."""

from __future__ import annotations

import weakref
from typing import Literal

from aiohttp import web
from pydantic import BaseModel

from gem_sandbox.sandbox.errors import SandboxError
from gem_sandbox.service import openapi
from gem_sandbox.service.metrics import CONTENT_TYPE
from gem_sandbox.service.route import TABLE, Route
from gem_sandbox.service.state import Service

PROBE_TIMEOUT = 5.0  # seconds the document waits for a sandbox to say which languages it runs
#: The languages each service's sandboxes run (one image per pool), once a sandbox said so.
_LANGUAGES: weakref.WeakKeyDictionary[Service, tuple[str, ...]] = weakref.WeakKeyDictionary()


class Health(BaseModel):
    status: Literal["ok", "starting", "draining"]
    backend: str | None
    idle: int
    leased: int
    waiting: int


async def healthz(request: web.Request) -> web.Response:
    service = Service.of(request)
    stats = service.runtime.statistics()
    ready = not service.draining and service.runtime.backend is not None
    body = Health(
        status="ok" if ready else ("draining" if service.draining else "starting"),
        backend=service.runtime.backend,
        idle=stats.idle,
        leased=stats.leased,
        waiting=stats.waiting,
    )
    return web.json_response(body.model_dump(), status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    return web.Response(body=Service.of(request).metrics.render(), headers={"Content-Type": CONTENT_TYPE})


async def openapi_document(request: web.Request) -> web.Response:
    routes: tuple[Route, ...] = request.app[TABLE]
    return web.json_response(openapi.document(routes, await _languages(Service.of(request))))


async def _languages(service: Service) -> tuple[str, ...]:
    """The languages the pool's sandboxes run, asked of one sandbox the first time (every
    sandbox of a pool has the same image); none while no sandbox can be had."""
    if service not in _LANGUAGES and not service.draining:
        try:
            async with service.runtime.lease(PROBE_TIMEOUT) as sandbox:
                _LANGUAGES[service] = tuple(sandbox.hello.get("languages", ()))
        except SandboxError:
            return ()
    return _LANGUAGES.get(service, ())


ROUTES: tuple[Route, ...] = (
    Route("GET", "/healthz", healthz, "Whether the pool can serve", answer=Health, public=True, errors=(503,)),
    Route("GET", "/metrics", metrics, "Prometheus metrics", public=True, media="text/plain"),
    Route("GET", "/openapi.json", openapi_document, "This document", public=True),
)
