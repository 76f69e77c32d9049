"""``gem-sandbox search index|serve``: build an index from a corpus, then serve it.

Errors are not caught here: ``gem_sandbox.cli`` turns the ones users cause (a missing corpus,
a port in use, no aiohttp) into one line with the fix.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio

from gem_sandbox.search.index import build_index

DEFAULT_DB = Path("search_index.sqlite3")


def _index(args: argparse.Namespace) -> int:
    count = build_index(args.corpus, args.db)
    print(f"indexed {count} documents into {args.db}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from gem_sandbox.search.server import serve_forever  # needs aiohttp, so only when serving

    anyio.run(serve_forever, args.db, args.host, args.port)
    return 0


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {text!r}")
    return int(text)


def add_search_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``search index`` and ``search serve`` on the CLI's ``add_subparsers()`` object;
    each sets ``func(args) -> exit code``; ``search`` alone shows its ``help_parser``."""
    search = subparsers.add_parser("search", help="build and serve a BM25 index for the search tool")
    search.set_defaults(help_parser=search)
    commands = search.add_subparsers(title="commands", metavar="COMMAND")

    index = commands.add_parser("index", help="index a Search-R1 JSONL corpus ({'id', 'contents': 'Title\\ntext'})")
    index.add_argument("corpus", type=Path, help="the corpus, one JSON document per line")
    index.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"index file to (re)build (default: {DEFAULT_DB})")
    index.set_defaults(func=_index)

    serve = commands.add_parser(
        "serve", help="serve an index over the Search-R1 retrieval protocol (needs gem-sandbox[service])"
    )
    serve.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"index file (default: {DEFAULT_DB})")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port to bind, 0 for any free one (default: 8000)")
    serve.set_defaults(func=_serve)
