"""A Search-R1-compatible retrieval server over an embedded index (``gem-sandbox search serve``).

It lets many trainer processes share one index, and anything that speaks Search-R1's
protocol (GEM's and Search-R1's own search tools, :class:`RetrievalClient`) use it:
``POST /retrieve`` with ``{"queries": [...], "topk": k, "return_scores": bool}``, and
``GET /healthz`` for readiness probes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from aiohttp import web

from gem_sandbox.search.hits import SearchError
from gem_sandbox.search.index import SearchIndex

MAX_REQUEST_BYTES = 1 << 20
MAX_QUERIES = 256
MAX_TOPK = 100


class _BadRequest(ValueError):
    pass


def _parse_request(body: Any, default_topk: int) -> tuple[list[str], int, bool]:
    if not isinstance(body, dict):
        raise _BadRequest("the body must be a JSON object")
    queries = body.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise _BadRequest('"queries" must be a list of strings')
    if len(queries) > MAX_QUERIES:
        raise _BadRequest(f"at most {MAX_QUERIES} queries per request")
    topk = body.get("topk") or default_topk  # Search-R1: a missing or zero topk means the default
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise _BadRequest('"topk" must be a positive integer')
    return queries, min(topk, MAX_TOPK), bool(body.get("return_scores", False))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def create_app(index: SearchIndex, default_topk: int = 3) -> web.Application:
    """The retrieval app; ``default_topk`` answers requests that give none (Search-R1's is 3)."""

    async def retrieve(request: web.Request) -> web.Response:
        try:
            queries, topk, return_scores = _parse_request(await request.json(), default_topk)
        except ValueError as exc:  # also bad JSON and bad UTF-8
            return _error(400, str(exc) if isinstance(exc, _BadRequest) else f"invalid JSON: {exc}")
        try:
            results = await anyio.to_thread.run_sync(lambda: [index.search(q, topk) for q in queries])
        except SearchError as exc:
            return _error(500, str(exc))
        if return_scores:
            result = [[{"document": hit.document(), "score": hit.score} for hit in hits] for hits in results]
        else:
            result = [[hit.document() for hit in hits] for hits in results]
        return web.json_response({"result": result})

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app.router.add_post("/retrieve", retrieve)
    app.router.add_get("/healthz", healthz)
    return app


@asynccontextmanager
async def serving(index: SearchIndex, host: str = "127.0.0.1", port: int = 8000) -> AsyncIterator[str]:
    """Serve ``index`` on the running event loop; yields the base URL (port 0 picks a free one)."""
    runner = web.AppRunner(create_app(index))
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://[{bound_host}]:{bound_port}" if ":" in bound_host else f"http://{bound_host}:{bound_port}"
    finally:
        await runner.cleanup()


async def serve_forever(db: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the index at ``db`` until cancelled."""
    with SearchIndex(db) as index:
        async with serving(index, host, port) as url:
            print(f"Search-R1 retrieval server: POST {url}/retrieve (GET {url}/healthz)", flush=True)
            await anyio.sleep_forever()
