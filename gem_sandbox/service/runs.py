"""The one way the service's APIs run code: :class:`Runs`, over the runtime and the sandboxes
it leases, admits each request to the pool's capacity (:mod:`.admission`: a stateless run takes
one unit, a sandbox for the request a whole sandbox's) and counts every result by its status
(``infra_error`` among them) in the runs metric on its way to the answer, whichever API asked.

The service's own code in a sandbox (e2b's kernel setup) goes to the sandbox directly and is
not counted; spawned commands are streams, answered event by event, not results.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import Counter

from gem_sandbox.runtime import LeasedSandbox, Runtime
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sandbox.result import ExecResult
from gem_sandbox.service.admission import Admission


class Runs:
    def __init__(self, runtime: Runtime, counter: Counter, admission: Admission) -> None:
        self.runtime = runtime
        self.counter = counter
        self.admission = admission

    @property
    def config(self) -> PoolConfig:
        return self.runtime.config

    def count(self, result: ExecResult) -> ExecResult:
        self.counter.labels(result.status.value).inc()
        return result

    async def run(self, code: str, language: str = "python", **options: Any) -> ExecResult:
        """A stateless run on any warm sandbox (:meth:`Runtime.run`); one with files takes a
        sandbox of its own."""
        async with self.admission.seat(self.config.runs_per_sandbox if options.get("files") else 1):
            return self.count(await self.runtime.run(code, language, **options))

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[CountedSandbox]:
        """A sandbox of the pool for one request (:meth:`Runtime.lease`)."""
        async with self.admission.seat(self.config.runs_per_sandbox), self.runtime.lease() as sandbox:
            yield self.on(sandbox)

    def on(self, sandbox: LeasedSandbox) -> CountedSandbox:
        return CountedSandbox(sandbox, self)


class CountedSandbox:
    """A leased sandbox whose ``run``, ``shell`` and ``kernel_exec`` results are counted; the
    rest of it is the sandbox's own."""

    def __init__(self, sandbox: LeasedSandbox, runs: Runs) -> None:
        self.sandbox = sandbox
        self._runs = runs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sandbox, name)

    async def run(self, code: str, language: str = "python", **options: Any) -> ExecResult:
        return self._runs.count(await self.sandbox.run(code, language, **options))

    async def shell(self, command: str, **options: Any) -> ExecResult:
        return self._runs.count(await self.sandbox.shell(command, **options))

    async def kernel_exec(self, code: str, **options: Any) -> ExecResult:
        return self._runs.count(await self.sandbox.kernel_exec(code, **options))
