"""``gem-sandbox bench [NAME...]``: the benchmark suite's table (benchmarks/)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = subparsers.add_parser("bench", help="run the benchmark suite and print its table")
    bench.add_argument("only", nargs="*", help="names of benchmarks to run (default: all)")
    bench.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    from gem_sandbox_benchmarks.suite import main as bench

    return bench(args.only)
