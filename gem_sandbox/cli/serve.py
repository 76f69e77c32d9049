"""``gem-sandbox serve``: a sandbox pool over HTTP (docs/service.md)."""

from __future__ import annotations

import argparse

from gem_sandbox.cli.args import pair
from gem_sandbox.sandbox.defaults import BACKEND_CHOICES


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser("serve", help="serve a sandbox pool over HTTP (REST, SandboxFusion routes); see docs/service.md")
    serve.add_argument("--config", metavar="FILE", help="a TOML file of settings (flags and GEM_SANDBOX_SERVE_* win over it)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1; others need --token)")
    serve.add_argument("--port", type=int, help="port to bind (default 8080; 0 = any free port)")
    serve.add_argument("--backend", choices=BACKEND_CHOICES, help="the pool's backend (default: auto)")
    serve.add_argument("--token", action="append", default=[], metavar="NAME=SECRET", help="a client's token; repeat for more")
    serve.add_argument("--pool", action="append", default=[], metavar="NAME=VALUE", help="a pool option, e.g. max_size=16; repeat")
    serve.add_argument(
        "--e2b-compatible", action="store_true", default=None, help="also serve the e2b SDK's API (see docs/service.md)"
    )
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from gem_sandbox import service

    pool = dict(pair(text, "--pool") for text in args.pool)
    overrides = {"host": args.host, "port": args.port, "backend": args.backend, "e2b_compatible": args.e2b_compatible}
    config = service.load(args.config, overrides=overrides, pool_overrides=pool, token_overrides=args.token)
    anyio.run(service.serve, config)
    return 0
