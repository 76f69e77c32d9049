"""An async client for any Search-R1-compatible retrieval server.

The protocol (Search-R1's ``retrieval_server.py``): ``POST /retrieve`` with
``{"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"contents": "Title\\ntext", ...}, "score": s}, ...], ...]}``,
one list per query.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from gem_sandbox.search.hits import Hit, SearchError


class RetrievalClient:
    """Asks one retrieval server for passages; every failure is a :class:`SearchError`.

    Requests go through a session the caller owns (a runtime's, so connections are reused
    across calls and closed with it); ``timeout`` bounds each request."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout

    async def search(self, session: aiohttp.ClientSession, query: str, topk: int) -> list[Hit]:
        """The server's ``topk`` passages for ``query``, best first."""
        payload = {"queries": [query], "topk": topk, "return_scores": True}
        try:
            async with session.post(self.url, json=payload, timeout=aiohttp.ClientTimeout(total=self.timeout)) as response:
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
