"""``gem-sandbox images build``: the Docker backend's sandbox images."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    images = subparsers.add_parser("images", help="sandbox images")
    images.set_defaults(help_parser=images)
    commands = images.add_subparsers(title="commands", metavar="COMMAND")
    build = commands.add_parser("build", help="build the sandbox image (skipped when up to date)")
    build.add_argument("--offline", action="store_true", help="debootstrap from the Debian mirror, no registry")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    build.add_argument(
        "--profile",
        choices=("default", "polyglot"),
        default="default",
        help="default: python, bash, g++; polyglot: every language Debian provides (large)",
    )
    build.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    from gem_sandbox.sandbox.backends.docker import images

    tag = images.build(
        offline=True if args.offline else None, force=args.force, profile=args.profile
    )
    print(tag)
    return 0
