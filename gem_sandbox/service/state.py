"""What every handler reaches: the :class:`Service` (runtime, admission, runs, tenants,
leases, replays, metrics) and the request's tenant and body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from aiohttp import web
from anyio.abc import TaskGroup
from pydantic import BaseModel, ValidationError

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.service import caps
from gem_sandbox.service.access import Access, Tenant
from gem_sandbox.service.admission import Admission
from gem_sandbox.service.e2b.templates import Templates
from gem_sandbox.service.errors import bad_request
from gem_sandbox.service.leases import Leases
from gem_sandbox.service.metrics import Metrics
from gem_sandbox.service.options import ServeOptions
from gem_sandbox.service.replays import Replays
from gem_sandbox.service.runs import CountedSandbox, Runs

TENANT = web.RequestKey("tenant", Tenant)

Model = TypeVar("Model", bound=BaseModel)


class Service:
    """The service's state, on one event loop with its runtime."""

    def __init__(self, options: ServeOptions, runtime: Runtime) -> None:
        self.options = options
        self.runtime = runtime
        self.access = Access(options.tokens)
        config = runtime.config
        self.admission = Admission(config.max_size * config.runs_per_sandbox, options.queue_timeout, options.max_queue)
        self.leases = Leases(runtime, options.lease_ttl, options.max_lease_ttl, self.admission)
        self.replays = Replays(options.idempotency_ttl, options.idempotency_bytes)
        self.metrics = Metrics(self)
        self.runs = Runs(runtime, self.metrics.runs, self.admission)
        self.templates = Templates(options, runtime)  # e2b's template names
        self.draining = False  # shutting down: health says so and new requests are refused
        self.tasks: TaskGroup  # for work that outlives its request (e2b commands), once serving
        self.url = ""  # where it listens, once it does

    @staticmethod
    def of(request: web.Request) -> Service:
        return request.app[SERVICE]

    def timeout(self, asked: float | None) -> float | None:
        """A request's timeout, capped at ``max_run_timeout`` (None: the pool's default)."""
        return caps.timeout(asked, self.options.max_run_timeout)

    def limits(self, asked: caps.Limits | None) -> RunLimits | None:
        """A request's limits, each capped at the pool's (None: the pool's as they are)."""
        return caps.run_limits(self.runtime.config.limits, asked, self.options.max_run_timeout)

    @asynccontextmanager
    async def sandbox(self, request: web.Request) -> AsyncIterator[CountedSandbox]:
        """The sandbox of the lease the path names, if the request's tenant holds it."""
        async with self.leases.using(tenant_of(request), request.match_info["id"]) as sandbox:
            yield self.runs.on(sandbox)


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
