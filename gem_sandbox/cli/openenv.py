"""``gem-sandbox openenv``: a catalogue env served to OpenEnv's clients (TRL's among them)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gem_sandbox.cli.args import pair, positive_int
from gem_sandbox.sandbox.defaults import BACKEND_CHOICES

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "openenv",
        help="serve an env as an OpenEnv server (GenericEnvClient, TRL); one env per WebSocket session",
    )
    p.add_argument("env_id", metavar="ENV_ID", help="a catalogue id, e.g. game:GuessTheNumber-v0 (see `gem-sandbox envs`)")
    p.add_argument("--wrappers", default="", help="GEM wrapper names applied in order, e.g. python_tool,concat")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; OpenEnv has no authentication)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0 = any free port)")
    p.add_argument("--max-sessions", type=positive_int, default=8, help="sessions at once; one more is refused (default 8)")
    p.add_argument("--backend", choices=BACKEND_CHOICES, help="the sandbox backend (default: configured or auto)")
    p.add_argument("--max-size", type=positive_int, help="most sandboxes the runtime runs at once")
    p.add_argument("--pool", action="append", default=[], metavar="NAME=VALUE", help="a runtime option, e.g. min_idle=2; repeat")
    p.add_argument(
        "--env-option", action="append", default=[], metavar="NAME=VALUE", help="a keyword for the env (a JSON value or text); repeat"
    )
    p.add_argument(
        "--tool-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an option of the tool wrappers, e.g. json_tool_calls=true; repeat",
    )
    p.add_argument(
        "--stateful", action="store_true", help="python_tool keeps one kernel per episode, on a sandbox leased until it ends"
    )
    p.set_defaults(func=_openenv)


def _openenv(args: argparse.Namespace) -> int:
    import anyio

    from gem_sandbox.integrations import openenv
    from gem_sandbox.sandbox.defaults import parse_option

    options = dict(pair(text, "--pool") for text in args.pool)
    runtime_options: dict[str, Any] = {name: parse_option(name, raw) for name, raw in options.items()}
    if args.max_size is not None:
        runtime_options["max_size"] = args.max_size
    if args.host not in LOOPBACK:
        print(f"gem-sandbox: warning: OpenEnv has no authentication; anyone who reaches {args.host} can run code", file=sys.stderr)

    def announce(url: str) -> None:
        print(f"gem-sandbox openenv: serving {args.env_id} at {url} (sessions on {url}/ws, at most {args.max_sessions})", flush=True)

    anyio.run(
        lambda: openenv.serve(
            args.env_id,
            wrappers=args.wrappers,
            host=args.host,
            port=args.port,
            max_sessions=args.max_sessions,
            backend=args.backend,
            runtime_options=runtime_options,
            env_kwargs=_values(args.env_option, "--env-option"),
            tool_options=_values(args.tool_option, "--tool-option"),
            stateful=args.stateful,
            announce=announce,
        )
    )
    return 0


def _values(texts: list[str], flag: str) -> dict[str, Any]:
    """``NAME=VALUE`` pairs, each value read as JSON (``true``, ``5``, ``[1, 2]``) or else as text."""
    values: dict[str, Any] = {}
    for text in texts:
        name, raw = pair(text, flag)
        try:
            values[name] = json.loads(raw)
        except json.JSONDecodeError:
            values[name] = raw
    return values
