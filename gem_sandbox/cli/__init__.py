"""The ``gem-sandbox`` command, assembled from :data:`COMMANDS`: one module per subcommand, each
with ``add_parser(subparsers)``, which registers it and sets ``func(args) -> exit status``.

Every error a user can cause is answered with one line on stderr, ``gem-sandbox: error: <what
is wrong>; <how to fix it>``, by :func:`~gem_sandbox.cli.errors.explain`, the one table of them;
``--verbose`` adds the traceback. Exit status: 0 done, 1 failed, 2 bad command line (argparse's
code; also a bare ``gem-sandbox``, which prints the help: no command ran, so scripts must not see
success), 130 interrupted. Anything ``explain`` does not know is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import warnings
from collections.abc import Sequence
from typing import NoReturn

from gem_sandbox import __version__
from gem_sandbox.cli import bench, demo, doctor, envs, eval, images, openenv, ray, search, serve
from gem_sandbox.cli.errors import PROG, explain, report
from gem_sandbox.cli.signals import exit_on_sigterm

__all__ = ["COMMANDS", "explain", "main", "parser", "report"]

# The subcommands, in the order `gem-sandbox --help` lists them. A new one: a module here, a line.
COMMANDS = (
    envs,
    demo,
    images,
    doctor,
    serve,
    openenv,
    eval,
    ray,
    search,
    bench,
)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line too (argparse would print the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}; see `{self.prog} --help`\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description="GEM-compatible environments whose tools run in real, pooled sandboxes.",
        epilog="`gem-sandbox doctor` says what this machine can run and how to fix the rest.",
    )
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="show the traceback of an error")
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="WARNING",
        metavar="LEVEL",
        help=f"log messages from this level on to stderr: {', '.join(LOG_LEVELS)} (default: WARNING)",
    )
    p.set_defaults(func=None, help_parser=p)  # no command: show the help
    subparsers = p.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return p


def _one_line_warning(message: Warning | str, *_: object, **__: object) -> str:
    """Warnings to a user of the command read like its errors, without a source line."""
    return f"{PROG}: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.func is None:
        args.help_parser.print_help()
        return EXIT_USAGE
    # This process is the CLI's own, so it may configure the root logger; the library never does.
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    warnings.formatwarning = _one_line_warning
    exit_on_sigterm()  # a command owns its process: SIGTERM unwinds it and removes its sandboxes
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        return report(exc, args.verbose)
