"""``gem-sandbox envs [PATTERN]``: the registered environments."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    envs = subparsers.add_parser("envs", help="list registered environments")
    envs.add_argument("pattern", nargs="?", help="glob or substring, e.g. 'game:*' or Wordle")
    envs.set_defaults(func=_envs)


def _envs(args: argparse.Namespace) -> int:
    from gem_sandbox.registry import print_envs

    print_envs(args.pattern)
    return 0
