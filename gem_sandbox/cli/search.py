"""``gem-sandbox search index|serve``: registered by the search package, beside the index it builds."""

from gem_sandbox.search.cli import add_search_commands as add_parser

__all__ = ["add_parser"]
