"""``gem-sandbox bench ray``: trivial calls through the Ray runtime against the same pool used
directly, with one node and with two.

The cluster is real and on this machine (:class:`~gem_sandbox.sandbox.cluster.loopback.LoopbackCluster`:
a ``ray start`` per node, each on its own loopback address); this process is its driver on the
head node. The direct baseline is a pool of the same backend and size in this process, measured
in the same run. One node serves all :data:`SANDBOXES`; two nodes serve half each, so the
callers' runs spread over both (the second node's calls cross from one raylet to another, as
they would between machines, though here both share the same two cores).
"""

from __future__ import annotations

import os

import anyio

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox import defaults

from .report import Row, percentile
from .suite import calls_per_second, warm_calls_ms

SANDBOXES = 8
CALLERS = 8
SERIAL = 300
SECONDS = 5.0
BASELINE = "the same pool, directly"


async def _measure(runtime: Runtime) -> tuple[list[float], float]:
    await runtime.wait_ready(timeout=180)
    await warm_calls_ms(runtime, 20)  # every node's first calls pay for connections
    return await warm_calls_ms(runtime, SERIAL), await calls_per_second(runtime, CALLERS, SECONDS)


async def _direct(backend: str) -> tuple[list[float], float]:
    async with Runtime(backend, min_idle=SANDBOXES, max_size=SANDBOXES) as runtime:
        return await _measure(runtime)


async def _through_ray(pools: str) -> tuple[list[float], float]:
    async with Runtime(ray=pools) as runtime:
        return await _measure(runtime)


def run() -> list[Row]:
    import ray

    from gem_sandbox.sandbox.cluster import NodeSettings, placement
    from gem_sandbox.sandbox.cluster.loopback import LoopbackCluster

    backend = defaults.resolve_backend_name("auto")
    direct, direct_rate = anyio.run(_direct, backend)
    measured = {}
    with LoopbackCluster() as cluster:
        cluster.join()
        try:
            for nodes in (1, 2):
                if nodes == 2:
                    cluster.add_node()
                pools = f"bench{os.getpid()}-{nodes}"
                size = SANDBOXES // nodes
                placed = placement.place(pools, NodeSettings(backend, {"min_idle": size, "max_size": size}))
                assert [p.state for p in placed] == ["ready"] * nodes, placement.table(placed)
                measured[nodes] = anyio.run(_through_ray, pools)
                placement.remove(pools)
        finally:
            ray.shutdown()
    rows = []
    for nodes, (samples, rate) in measured.items():
        what = f"ray ({backend}): trivial call, {nodes} node{'s' * (nodes > 1)} x {SANDBOXES // nodes} sandboxes"
        rows += [
            Row(f"{what}, p50", percentile(samples, 50), percentile(direct, 50), "ms", BASELINE),
            Row(f"{what}, p99", percentile(samples, 99), percentile(direct, 99), "ms", BASELINE),
            Row(f"{what}, {CALLERS} callers", rate, direct_rate, "calls/s", f"{BASELINE}, {CALLERS} callers",
                higher_is_better=True),
        ]
    return rows
