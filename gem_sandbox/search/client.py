"""An async client for any Search-R1-compatible retrieval server.

The protocol (Search-R1's ``retrieval_server.py``): ``POST /retrieve`` with
``{"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"contents": "Title\\ntext", ...}, "score": s}, ...], ...]}``,
one list per query.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from gem_sandbox.search.hits import Hit, SearchError


class RetrievalClient:
    """Asks one retrieval server for passages; every failure is a :class:`SearchError`.

    One aiohttp session serves all calls, made on first use. A session belongs to the event
    loop it was made on, so a client used from another loop (a tool shared by the sync API's
    loop and an async trainer) closes the old session and makes a fresh one there."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _current_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            await self._release_session()
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
            self._loop = loop
        return self._session

    async def _release_session(self) -> None:
        """Close the session on the loop it was made on, which may be running in another thread."""
        session, loop, self._session = self._session, self._loop, None
        if session is None or loop is None:
            return
        if loop is asyncio.get_running_loop() or loop.is_closed():
            # A closed loop can no longer close its sockets (close the client before its loop
            # ends); this only marks the session closed.
            await session.close()
        else:
            asyncio.run_coroutine_threadsafe(session.close(), loop)

    async def search(self, query: str, topk: int) -> list[Hit]:
        """The server's ``topk`` passages for ``query``, best first."""
        payload = {"queries": [query], "topk": topk, "return_scores": True}
        try:
            async with (await self._current_session()).post(self.url, json=payload) as response:
                response.raise_for_status()
                body = await response.json(content_type=None)
        except TimeoutError:
            raise SearchError(f"no answer from {self.url} within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise SearchError(f"{self.url}: {exc}") from None
        except ValueError as exc:
            raise SearchError(f"{self.url} did not answer JSON: {exc}") from None
        return self._hits(body)

    def _hits(self, body: Any) -> list[Hit]:
        """The passages of the first (only) query in a response."""
        try:
            return [
                Hit.from_contents(
                    item["document"]["contents"],
                    str(item["document"].get("id", "")),
                    None if item.get("score") is None else float(item["score"]),
                )
                for item in body["result"][0]
            ]
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise SearchError(f"{self.url} did not answer the Search-R1 protocol: {exc!r}") from None

    async def aclose(self) -> None:
        await self._release_session()
