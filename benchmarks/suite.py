"""``gem-sandbox bench``: the sandbox layer measured against its baselines in one run.

Each benchmark returns table rows; the baselines run in the same process, on the same machine,
right beside what they are compared with:

* ``local``: warm Python calls through a bubblewrap pool vs gem-llm's own ``run_python`` (a fresh
  subprocess per call), calls per second, and acquire latency;
* ``docker``: warm calls through a container pool vs one ``docker exec`` per call, 100
  concurrent leases on a pool of 16, cold create-to-ready vs a raw ``docker run``, trivial
  calls per second over 8 containers, and idle sandbox memory;
* ``vector``: env stepping (see :mod:`.vector_envs`).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import anyio

from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool

from .report import Row, percentile, print_table

CALLS = 300
GEM = "gem-llm run_python"
TRIVIAL = "print(1)"


def fresh_subprocess_ms(calls: int) -> list[float]:
    """GEM's ``run_python`` itself (gem-llm, called in this process) when it is installed,
    else what it does: a new interpreter per call."""
    try:
        from gem.utils.sandbox import run_python
    except ImportError:
        run_python = None
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        if run_python is None:
            subprocess.run([sys.executable, "-c", TRIVIAL], capture_output=True, check=True)
        else:
            ok, _, _ = run_python(TRIVIAL, "none")
            assert ok
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def warm_calls_ms(pool: SandboxPool, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await pool.run(TRIVIAL)
        assert result.ok, result
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def acquire_ms(pool: SandboxPool, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        sandbox = await pool.acquire()
        samples.append((time.perf_counter() - start) * 1000)
        await pool.release(sandbox)
        await pool.wait_ready()
    return samples


async def calls_per_second(pool: SandboxPool, concurrency: int, seconds: float = 3.0) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            result = await pool.run(TRIVIAL)
            done += result.ok

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return done / (time.perf_counter() - start)


async def burst(pool: SandboxPool, leases: int) -> tuple[float, float]:
    """``leases`` concurrent lease+run on the pool: (p99 ms, success rate)."""
    samples: list[float] = []
    ok = 0

    async def one() -> None:
        nonlocal ok
        start = time.perf_counter()
        async with pool.lease() as sandbox:
            result = await sandbox.run(TRIVIAL)  # awaited before ``ok`` is read: no lost update
            ok += result.ok
        samples.append((time.perf_counter() - start) * 1000)

    async with anyio.create_task_group() as tg:
        for _ in range(leases):
            tg.start_soon(one)
    return percentile(samples, 99), ok / leases


def _pool(backend: Backend, **options) -> SandboxPool:
    return SandboxPool(backend, PoolConfig(**options))


async def bench_local(calls: int = CALLS) -> list[Row]:
    from gem_sandbox.sandbox.backends.local import LocalBackend

    gem_way = fresh_subprocess_ms(calls // 3)
    async with _pool(LocalBackend(), min_idle=2, max_size=8) as pool:
        await pool.wait_ready()
        warm = await warm_calls_ms(pool, calls)
        acquire = await acquire_ms(pool, 100)
    async with _pool(LocalBackend(), min_idle=4, max_size=4) as pool:
        await pool.wait_ready()
        throughput = await calls_per_second(pool, concurrency=8)
    baseline_rate = 1000 / percentile(gem_way, 50)
    return [
        Row("local: warm Python call p50", percentile(warm, 50), percentile(gem_way, 50), "ms", GEM),
        Row("local: warm Python call p99", percentile(warm, 99), percentile(gem_way, 99), "ms", GEM),
        Row("local: trivial calls/s, 4 sandboxes", throughput, baseline_rate, "calls/s", GEM + ", serial",
            higher_is_better=True),
        Row("local: acquire from a warm pool p50", percentile(acquire, 50), None, "ms"),
    ]


def _docker_exec_ms(image: str, calls: int) -> list[float]:
    """One ``docker exec`` per call into a plain long-running container (the naive design)."""
    import docker

    client = docker.from_env()
    container = client.containers.run(image, ["sleep", "infinity"], detach=True, network_mode="none",
                                      labels={"gem-sandbox.bench": "baseline"})
    try:
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            code, _ = container.exec_run(["python3", "-c", TRIVIAL])
            assert code == 0
            samples.append((time.perf_counter() - start) * 1000)
        return samples
    finally:
        container.remove(force=True)


def _docker_run_ms(image: str, runs: int) -> list[float]:
    """A raw ``docker run`` of the same image until the first Python statement has run."""
    import docker

    client = docker.from_env()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        client.containers.run(image, ["python3", "-c", "pass"], remove=True, network_mode="none")
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _idle_memory_mb(container_id: str) -> float:
    import docker

    stats = docker.from_env().containers.get(container_id).stats(stream=False)["memory_stats"]
    inactive = stats.get("stats", {}).get("inactive_file", 0)
    return (stats["usage"] - inactive) / 2**20


async def bench_docker(calls: int = CALLS) -> list[Row]:
    from gem_sandbox.sandbox.backends.docker import DockerBackend

    problem = DockerBackend.check()
    if problem:
        print(f"docker benchmarks skipped: {problem}", file=sys.stderr)
        return []
    from gem_sandbox.images import default_image

    backend = DockerBackend()
    image = default_image()
    rows = []
    async with _pool(backend, min_idle=2, max_size=8) as pool:
        await pool.wait_ready()
        warm = await warm_calls_ms(pool, calls)
        acquire = await acquire_ms(pool, 100)
        async with pool.lease() as sandbox:  # measured after a run, as a pooled sandbox idles
            memory = await anyio.to_thread.run_sync(_idle_memory_mb, sandbox.id)
    exec_way = await anyio.to_thread.run_sync(_docker_exec_ms, image, calls // 3)
    gem_way = fresh_subprocess_ms(calls // 3)
    rows += [
        Row("docker: warm Python call p50", percentile(warm, 50), percentile(exec_way, 50), "ms", "docker exec per call"),
        Row("docker: warm Python call p99", percentile(warm, 99), percentile(exec_way, 99), "ms", "docker exec per call"),
        Row("docker: warm call p50 vs GEM", percentile(warm, 50), percentile(gem_way, 50), "ms", GEM),
        Row("docker: acquire from a warm pool p50", percentile(acquire, 50), None, "ms"),
        Row("docker: idle sandbox memory", memory, None, "MB"),
    ]
    async with _pool(backend, min_idle=16, max_size=16) as pool:
        await pool.wait_ready(timeout=120)
        p99, success = await burst(pool, 100)
    rows += [
        Row("docker: 100 concurrent leases on 16, p99", p99, None, "ms"),
        Row("docker: 100 concurrent leases on 16, success", success * 100, None, "%"),
    ]
    async with _pool(backend, min_idle=8, max_size=8) as pool:
        await pool.wait_ready(timeout=120)
        throughput = await calls_per_second(pool, concurrency=16)
    rows.append(Row("docker: trivial calls/s, 8 containers", throughput, 1000 / percentile(exec_way, 50), "calls/s",
                    "docker exec, serial", higher_is_better=True))
    cold = []
    for _ in range(5):
        start = time.perf_counter()
        async with _pool(backend, min_idle=1, max_size=1) as pool:
            await pool.wait_ready(timeout=60)
            cold.append((time.perf_counter() - start) * 1000)
    raw = await anyio.to_thread.run_sync(_docker_run_ms, image, 5)
    rows.append(Row("docker: cold create-to-ready p50", percentile(cold, 50), percentile(raw, 50), "ms",
                    "raw docker run"))
    return rows


def bench_vector() -> list[Row]:
    from .vector_envs import run

    return run()


BENCHMARKS: dict[str, Callable[[], list[Row]]] = {
    "local": lambda: anyio.run(bench_local),
    "docker": lambda: anyio.run(bench_docker),
    "vector": bench_vector,
}


def main(only: Sequence[str] = ()) -> int:
    unknown = set(only) - set(BENCHMARKS)
    if unknown:
        print(f"unknown benchmarks {sorted(unknown)}; choose from {sorted(BENCHMARKS)}", file=sys.stderr)
        return 2
    rows: list[Row] = []
    for name in only or BENCHMARKS:
        rows += BENCHMARKS[name]()
    print_table("gem-sandbox bench", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
