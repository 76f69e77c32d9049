"""The ``gem-sandbox`` command: envs, demo, images, doctor, bench."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _envs(args: argparse.Namespace) -> int:
    from gem_sandbox.registry import print_envs

    print_envs(args.pattern)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gem_sandbox.demo import main as demo

    return demo(episodes=args.episodes, backend=args.backend)


def _images(args: argparse.Namespace) -> int:
    from gem_sandbox import images

    tag = images.build(offline=True if args.offline else None, force=args.force)
    print(tag)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from gem_sandbox.doctor import checks

    for check in checks():
        mark = "ok " if check.ok else "!! "
        print(f"{mark} {check.name:<16} {check.detail}")
        if not check.ok and check.fix:
            print(f"    {'':<16} fix: {check.fix}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from gem_sandbox_benchmarks.suite import main as bench

    return bench(args.only)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gem-sandbox", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    envs = sub.add_parser("envs", help="list registered environments")
    envs.add_argument("pattern", nargs="?", help="glob or substring, e.g. 'game:*' or Wordle")
    envs.set_defaults(func=_envs)

    demo = sub.add_parser("demo", help="play a few episodes with scripted policies and show the transcript")
    demo.add_argument("--episodes", type=int, default=1, help="episodes per env")
    demo.add_argument("--backend", default=None, help="sandbox backend (default: configured or auto)")
    demo.set_defaults(func=_demo)

    images = sub.add_parser("images", help="sandbox images")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    build = images_sub.add_parser("build", help="build the sandbox image (skipped when up to date)")
    build.add_argument("--offline", action="store_true", help="debootstrap from the Debian mirror, no registry")
    build.add_argument("--force", action="store_true", help="rebuild even when the tag exists")
    build.set_defaults(func=_images)

    doctor = sub.add_parser("doctor", help="check Python, Docker, the sandbox image and bubblewrap")
    doctor.set_defaults(func=_doctor)

    from gem_sandbox.search.cli import add_search_commands

    add_search_commands(sub)

    bench = sub.add_parser("bench", help="run the benchmark suite and print its table")
    bench.add_argument("only", nargs="*", help="names of benchmarks to run (default: all)")
    bench.set_defaults(func=_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from gem_sandbox.signals import exit_on_sigterm

    args = parser().parse_args(argv)
    exit_on_sigterm()  # a command owns its process: SIGTERM unwinds it and removes its sandboxes
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
