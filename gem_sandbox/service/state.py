"""What every handler reaches: the :class:`Service` (runtime, tenants, leases, replays,
metrics) and the request's tenant and body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from gem_sandbox.runtime import LeasedSandbox, Runtime
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.service.access import Access, Tenant
from gem_sandbox.service.config import ServiceConfig
from gem_sandbox.service.errors import bad_request
from gem_sandbox.service.leases import Leases
from gem_sandbox.service.metrics import Metrics
from gem_sandbox.service.replays import Replays

TENANT = web.RequestKey("tenant", Tenant)

Model = TypeVar("Model", bound=BaseModel)


class Service:
    """The service's state, on one event loop with its runtime."""

    def __init__(self, config: ServiceConfig, runtime: Runtime) -> None:
        self.config = config
        self.runtime = runtime
        self.access = Access(config.tokens)
        self.leases = Leases(runtime, config.lease_ttl, config.max_lease_ttl)
        self.replays = Replays(config.idempotency_ttl, config.idempotency_bytes)
        self.metrics = Metrics(self)
        self.draining = False  # shutting down: health says so and new requests are refused
        self.url = ""  # where it listens, once it does

    @staticmethod
    def of(request: web.Request) -> Service:
        return request.app[SERVICE]

    def timeout(self, asked: float | None) -> float | None:
        """A request's timeout, capped at ``max_run_timeout`` (None: the pool's default)."""
        return None if asked is None else min(asked, self.config.max_run_timeout)

    def result(self, result: ExecResult) -> web.Response:
        self.metrics.runs.labels(result.status.value).inc()
        return web.json_response(result.to_json())

    @asynccontextmanager
    async def sandbox(self, request: web.Request) -> AsyncIterator[LeasedSandbox]:
        """The sandbox of the lease the path names, if the request's tenant holds it."""
        async with self.leases.using(tenant_of(request), request.match_info["id"]) as sandbox:
            yield sandbox


SERVICE = web.AppKey("service", Service)


def tenant_of(request: web.Request) -> Tenant:
    return request[TENANT]


async def parse(request: web.Request, model: type[Model]) -> Model:
    """The request's JSON body as ``model`` (an empty body is ``{}``); 400 naming what is wrong."""
    raw = await request.read()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise bad_request(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """A validation error in one line: each problem as ``field: what is wrong``."""
    problems = []
    for error in exc.errors(include_url=False):
        if error["type"] == "json_invalid":
            problems.append(f"the body is not valid JSON ({error.get('ctx', {}).get('error', error['msg'])})")
            continue
        where = ".".join(str(part) for part in error["loc"]) or "the body"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)
