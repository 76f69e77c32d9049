"""Placing a set of pool actors on a Ray cluster, finding them, and taking them down: what
``gem-sandbox ray up|status|down`` does, as functions a driver can call after ``ray.init``.

One actor per node, pinned there (hard node affinity: a node's sandboxes are its Docker's or
its bubblewrap's, and must not move), detached so it outlives the driver that placed it. It
reserves no CPU: its sandboxes run outside Ray's accounting, so size the nodes' ``--num-cpus``
for the trainer's tasks and leave the rest to the sandboxes (docs/scale-out.md). Placing is
idempotent: nodes that have their actor keep it, nodes that joined since get one.
All of these block (they ask Ray's GCS and wait for answers).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from gem_sandbox.sandbox.cluster.node import NAMESPACE, NodePool, NodeSettings, actor_name

MAX_CONCURRENCY = 10_000  # calls one pool actor serves at once (each waits on a sandbox)
SHUTDOWN_TIMEOUT = 60.0  # seconds a pool actor has to kill its sandboxes before it is killed

NodePoolActor = ray.remote(NodePool)


@dataclass(frozen=True)
class Placed:
    """A node's pool actor, and what it said once ready (or why it is not)."""

    node_id: str
    address: str
    actor: Any  # ray.actor.ActorHandle
    described: dict[str, Any] | None = None
    problem: str | None = None

    @property
    def state(self) -> str:
        """``ready``, or why this node's pool is not."""
        return self.problem or (self.described or {}).get("failure") or "ready"


def connect(address: str | None = None) -> None:
    """Join the cluster at ``address`` (``"auto"``: the running one ``RAY_ADDRESS`` or this
    machine's ``ray start`` names), unless this process already has."""
    if not ray.is_initialized():
        ray.init(address=address or "auto", logging_level=logging.WARNING, log_to_driver=False)


def cluster_nodes(resource: str | None = None) -> list[dict[str, Any]]:
    """The cluster's live nodes (those with ``resource``, if named)."""
    return [n for n in ray.nodes() if n["Alive"] and (resource is None or resource in n["Resources"])]


def place(
    pools: str = "default", node_settings: NodeSettings | None = None, *, resource: str | None = None, timeout: float = 120.0
) -> list[Placed]:
    """One pool actor of the set ``pools`` on every live node (with ``resource``, if named)
    that has none, each waited for until its pool is warm (``timeout``). A node's existing
    actor is kept, with the settings it was made with."""
    node_settings = node_settings or NodeSettings()
    placed = []
    for node in cluster_nodes(resource):
        actor = NodePoolActor.options(  # type: ignore[attr-defined]
            name=actor_name(pools, node["NodeID"]),
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_concurrency=MAX_CONCURRENCY,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(pools, node_settings)
        placed.append(Placed(node["NodeID"], node["NodeManagerAddress"], actor))
    return [_answer(p, p.actor.ready.remote(timeout), timeout + 30) for p in placed]


def pool_actor_names(pools: str) -> dict[str, str]:
    """The names of the live pool actors of the set ``pools``, by node id."""
    prefix = actor_name(pools, "")
    return {
        entry["name"][len(prefix) :]: entry["name"]
        for entry in ray.util.list_named_actors(all_namespaces=True)
        if entry["namespace"] == NAMESPACE and entry["name"].startswith(prefix)
    }


def pool_actor(name: str) -> Any:
    """A handle on the pool actor ``name``; ``ValueError`` when there is none (any more)."""
    return ray.get_actor(name, namespace=NAMESPACE)


def pool_actors(pools: str) -> list[tuple[str, Any]]:
    """``(node id, handle)`` of each live pool actor of the set ``pools``."""
    found = []
    for node_id, name in pool_actor_names(pools).items():
        try:
            found.append((node_id, pool_actor(name)))
        except ValueError:  # it died since it was listed
            continue
    return found


def status(pools: str = "default", timeout: float = 10.0) -> list[Placed]:
    """What each pool actor of the set says of itself (:meth:`NodePool.describe`)."""
    return [_answer(Placed(node_id, "?", actor), actor.describe.remote(), timeout) for node_id, actor in pool_actors(pools)]


def remove(pools: str = "default") -> list[Placed]:
    """Shut down every pool actor of the set (each kills its sandboxes), then kill it."""
    removed = []
    for node_id, actor in pool_actors(pools):
        removed.append(_answer(Placed(node_id, "?", actor), actor.shutdown.remote(), SHUTDOWN_TIMEOUT))
        ray.kill(actor)
    return removed


def _answer(placed: Placed, ref: Any, timeout: float) -> Placed:
    """``placed`` with the answer to ``ref`` (a dict from ``describe``/``ready``), or why there
    was none."""
    try:
        answer = ray.get(ref, timeout=timeout)
    except GetTimeoutError:
        return dataclasses.replace(placed, problem=f"no answer within {timeout:.0f}s")
    except RayError as exc:
        cause = getattr(exc, "cause", None) or exc
        return dataclasses.replace(placed, problem=str(cause).strip().splitlines()[-1] if str(cause).strip() else repr(cause))
    if not isinstance(answer, dict):
        return placed
    return dataclasses.replace(placed, described=answer, address=answer.get("address", placed.address))


def table(placed: Sequence[Placed]) -> str:
    """The lines ``gem-sandbox ray`` prints: one per node."""
    lines = [f"{'node':<10} {'address':<16} {'backend':<8} {'size':>4} {'free':>4} {'leases':>6}  state"]
    for p in placed:
        d = p.described or {}
        stats = d.get("statistics", {})
        lines.append(
            f"{p.node_id[:8]:<10} {p.address:<16} {d.get('backend') or '-':<8} {d.get('max_size', 0):>4} "
            f"{d.get('free', 0):>4} {stats.get('leases', 0):>6}  {p.state}"
        )
    return "\n".join(lines)
