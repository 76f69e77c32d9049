"""Retrieval for the search tool: an embedded BM25 index, and a client and server for the
Search-R1 retrieval protocol.

Only the stdlib-backed pieces are imported here; ``client`` and ``server`` need aiohttp
(the ``service`` extra), so they are imported from their modules when wanted.
"""

from __future__ import annotations

from gem_sandbox.search.hits import Hit, SearchError
from gem_sandbox.search.index import SearchIndex, build_index, fts_query

__all__ = ["Hit", "SearchError", "SearchIndex", "build_index", "fts_query"]
