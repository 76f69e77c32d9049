"""GEM's ``gem.tools.search_tool``: ``<search>query</search>`` in,
``<information>Doc 1(Title: ...) ...</information>`` out.

Two backends answer it: an embedded BM25 index (no server, for small corpora and tests), or
any Search-R1-compatible retrieval server at ``search_url`` (``$SEARCH_URL`` as in GEM).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, ClassVar

import anyio

from gem_sandbox.runtime import Runtime
from gem_sandbox.search.hits import Hit, SearchError
from gem_sandbox.search.index import SearchIndex
from gem_sandbox.sync import SyncRuntime, resolve_runtime
from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput, one_string_argument
from gem_sandbox.tools.episode import Episode

if TYPE_CHECKING:
    from gem_sandbox.search.client import RetrievalClient

_PATTERN = re.compile(r"<search>(.*?)</search>", re.DOTALL)

#: GEM's default timeout of a search request, in seconds (SearchTool's default here too).
TIMEOUT = 5


def format_passages(hits: list[Hit]) -> str:
    """Passages as GEM shows them: ``Doc i(Title: title) text`` per line."""
    return "".join(f"Doc {i}(Title: {hit.title}) {hit.text}\n" for i, hit in enumerate(hits, 1))


def information(body: str) -> str:
    """GEM's search observation around ``body`` (passages or an error)."""
    return f"\n\n<information>{body}</information>\n\n"


class SearchTool(Tool):
    """Answers from ``index`` (a :class:`SearchIndex` or the path of one) when given, else from
    the retrieval server at ``search_url`` or ``$SEARCH_URL``, read on first search as GEM does.
    ``timeout`` bounds each search in seconds. Server requests use ``runtime``'s HTTP session
    (``None``: the process default's, for sync callers)."""

    name: ClassVar[str] = "search"
    tool_type: ClassVar[str] = "search"
    description: ClassVar[str] = "Search a document collection; returns the best-matching passages with their titles."
    parameters: ClassVar[dict[str, Any]] = one_string_argument("query", "what to search for, e.g. capital of France")

    def __init__(
        self,
        topk: int = 3,
        timeout: float = TIMEOUT,
        search_url: str | None = None,
        index: SearchIndex | str | os.PathLike[str] | None = None,
        *,
        runtime: Runtime | SyncRuntime | None = None,
    ) -> None:
        if search_url is not None and index is not None:
            raise ValueError("give SearchTool a search_url or an index, not both")
        self.topk = topk
        self.timeout = timeout
        self.search_url = search_url
        self.runtime = runtime
        self._index: SearchIndex | None
        if index is None or isinstance(index, SearchIndex):
            self._index, self._owns_index = index, False
        else:
            self._index, self._owns_index = SearchIndex(index), True
        self._client: RetrievalClient | None = None

    def instruction_string(self) -> str:
        return (
            "You have access to a search engine to help answer questions.\n\n"
            "Additional instructions:\n"
            "- If your initial reasoning in <think> shows you lack some knowledge, "
            "explain what you need to find next inside a new <think> block.\n"
            "- Then issue a search query using:\n"
            "  <search> your query here </search>\n"
            "- The search engine will provide results inside:\n"
            "  <information> ... </information>\n"
            "- You may repeat the <think> and <search> steps as many times as needed.\n"
            "- When you are ready, give your final answer in:\n"
            "  <answer> your answer here </answer>"
        )

    def parse(self, action: str) -> ToolCall | None:
        match = _PATTERN.search(action)
        if match is None:
            return None
        return ToolCall(self.name, {"query": match.group(1).strip()}, action[: match.end()], match.end())

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        query = str(call.arguments.get("query", "")).strip()
        if not query:
            return ToolOutput(information("[SearchTool Error: empty query]"), error=True)
        try:
            hits = await self._search(query)
        except SearchError as exc:
            return ToolOutput(information(f"[SearchTool Error: {exc}]"), error=True, details={"query": query})
        return ToolOutput(information(format_passages(hits)), details={"query": query, "ids": [h.id for h in hits]})

    async def _search(self, query: str) -> list[Hit]:
        if self._index is None:
            client = self._retrieval_client()
            runtime = await resolve_runtime(self.runtime)
            return await client.search(await runtime.http_session(), query, self.topk)
        try:
            with anyio.fail_after(self.timeout):  # the abandoned query finishes in its thread
                return await anyio.to_thread.run_sync(self._index.search, query, self.topk, abandon_on_cancel=True)
        except TimeoutError:
            raise SearchError(f"no answer from the index within {self.timeout:g}s") from None

    def _retrieval_client(self) -> RetrievalClient:
        if self._client is None:
            url = self.search_url or os.environ.get("SEARCH_URL")
            if not url:
                raise SearchError("no search backend: give SearchTool a search_url or an index, or set SEARCH_URL")
            from gem_sandbox.search.client import RetrievalClient  # aiohttp is optional: only for servers

            self._client = RetrievalClient(url, self.timeout)
        return self._client

    async def aclose(self) -> None:
        """Close the index if this tool opened it from a path (the runtime owns the HTTP session)."""
        if self._owns_index and self._index is not None:
            self._index.close()
