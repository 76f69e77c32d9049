"""GEM's ``gem.tools.search_tool``: the search tool."""

from gem_sandbox.tools.search import SearchTool

#: GEM's default timeout of a search request, in seconds (SearchTool's default here too).
TIMEOUT = 5

__all__ = ["TIMEOUT", "SearchTool"]
