"""Running the service: :func:`running` (in a caller's event loop, as the tests do) and
:func:`serve` (the ``gem-sandbox serve`` command: until SIGTERM or SIGINT).

A client that disconnects cancels its request (its run, or its wait for capacity), and a
connection must send its headers within ``header_timeout`` (:mod:`.admission` has the rest of
the overload rules).

Shutdown is graceful in this order: health turns 503 and new requests are refused, the
listening socket closes, requests in flight get ``shutdown_timeout`` to finish, leases end,
and leaving the runtime removes every sandbox the pool made.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from aiohttp import web

from gem_sandbox.runtime import Runtime
from gem_sandbox.service.app import AccessLog, make_app
from gem_sandbox.service.options import ServeOptions
from gem_sandbox.service.state import Service

log = logging.getLogger(__name__)

BACKLOG = 4096  # connections the kernel queues before accept: bursts of clients connect at once


@asynccontextmanager
async def running(options: ServeOptions, runtime: Runtime | None = None) -> AsyncIterator[Service]:
    """The service, listening, until the block exits. ``runtime`` (an open one) serves the
    requests; without it one is opened from ``options`` and closed after."""
    async with _runtime(options, runtime) as opened:
        service = Service(options, opened)
        async with service.templates:  # their pools close after the leases
            await opened.pool()  # warm sandboxes start now, not at the first request
            runner = web.AppRunner(
                make_app(service),
                access_log_class=AccessLog,
                access_log=logging.getLogger("gem_sandbox.service.access"),
                shutdown_timeout=options.shutdown_timeout,
                # aiohttp closes a connection that is idle (or still sending its headers)
                # this long after it opened or after its last answer: the bound on slow
                # headers.
                keepalive_timeout=options.header_timeout,
                # A client that disconnects cancels its handler: its wait for capacity ends,
                # or its run is cancelled and the sandbox goes back to the pool (reset kills
                # the run).
                handler_cancellation=True,
            )
            await runner.setup()
            try:
                await web.TCPSite(runner, options.host, options.port, backlog=BACKLOG).start()
                service.url = _url(runner)
                async with anyio.create_task_group() as tg:
                    service.tasks = tg
                    tg.start_soon(service.leases.reap)
                    try:
                        yield service
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                service.draining = True
                with anyio.CancelScope(shield=True):
                    await runner.cleanup()  # stops listening, then waits for requests in flight
                    await service.leases.aclose()


async def serve(options: ServeOptions) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with running(options) as service:
            log.warning("serving %s on %s (%s tokens)", service.runtime.backend, service.url, len(options.tokens) or "no")
            async for signum in signals:
                log.warning("%s: finishing requests in flight, then removing every sandbox", signal.Signals(signum).name)
                break


@asynccontextmanager
async def _runtime(options: ServeOptions, runtime: Runtime | None) -> AsyncIterator[Runtime]:
    if runtime is not None:
        yield runtime
        return
    async with Runtime(options.backend, **options.pool_options()) as opened:
        yield opened


def _url(runner: web.AppRunner) -> str:
    host, port = runner.addresses[0][:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
