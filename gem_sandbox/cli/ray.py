"""``gem-sandbox ray up|status|down``: sandbox pools across a Ray cluster (docs/scale-out.md)."""

from __future__ import annotations

import argparse

from gem_sandbox.cli.args import pair
from gem_sandbox.cli.errors import EXIT_FAILURE
from gem_sandbox.sandbox.defaults import BACKEND_CHOICES


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ray = subparsers.add_parser("ray", help="sandbox pools across a Ray cluster: one pool actor per node; see docs/scale-out.md")
    ray.add_argument("action", choices=("up", "status", "down"), help="place the pool actors, show them, or remove them")
    ray.add_argument("--name", default="default", help="the set of pool actors (GEM_SANDBOX_RAY names it to runtimes)")
    ray.add_argument("--address", help="the cluster to join (default: RAY_ADDRESS, else this machine's `ray start`)")
    ray.add_argument("--backend", choices=BACKEND_CHOICES, default="auto", help="up: each node's backend (default: auto)")
    ray.add_argument("--pool", action="append", default=[], metavar="NAME=VALUE", help="up: a pool option, e.g. max_size=16; repeat")
    ray.add_argument("--lease-ttl", type=float, default=120.0, metavar="SECONDS", help="up: a lease's life without a word from its client")
    ray.add_argument("--resource", help="up: only nodes that have this Ray resource (e.g. one given with `ray start --resources`)")
    ray.add_argument("--watch", type=float, default=0.0, metavar="SECONDS", help="up: keep placing on nodes that join, every SECONDS")
    ray.set_defaults(func=_ray)


def _ray(args: argparse.Namespace) -> int:
    """The pool actors of a set on the cluster, one line a node; fails when a node's actor is
    not ready (or, for ``up``, when there is no node)."""
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
        pairs = (pair(text, "--pool") for text in args.pool)
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
