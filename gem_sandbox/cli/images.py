"""``gem-sandbox images build``: the Docker backend's sandbox images."""

from __future__ import annotations

import argparse
import functools
import sys


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
    build.add_argument("--template", metavar="NAME", help="build an e2b template of this name from --dockerfile")
    build.add_argument("--dockerfile", metavar="PATH", help="the template's Dockerfile (its directory is the context)")
    build.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gem_sandbox.sandbox.backends.docker import images, templates
    from gem_sandbox.sandbox.errors import ConfigError

    if bool(args.template) != bool(args.dockerfile):
        raise ConfigError("--template and --dockerfile go together; give both to build a template")
    if args.template:
        progress = functools.partial(print, file=sys.stderr)  # stdout is the tag alone
        print(templates.build_template(args.template, Path(args.dockerfile), progress))
        return 0
    tag = images.build(
        offline=True if args.offline else None, force=args.force, profile=args.profile
    )
    print(tag)
    return 0
