"""``gem-sandbox bench``: the sandbox layer measured against its baselines in one run.

Each benchmark returns table rows; the baselines run in the same process, on the same machine,
right beside what they are compared with:

* ``local``: warm Python calls through a bubblewrap pool vs gem-llm's own ``run_python`` (a fresh
  subprocess per call), calls per second with 8 callers, acquire latency, cold create-to-ready
  vs bubblewrap starting ``python -c pass`` in the same namespaces, idle memory per sandbox, and
  the CPU that a pool of idle sandboxes costs;
* ``docker``: warm calls through a container pool vs one ``docker exec`` per call, 100
  concurrent leases on a pool of 16, cold create-to-ready vs a raw ``docker run``, trivial
  calls per second with 8 callers over 8 containers, and idle sandbox memory;
* ``vector``: env stepping (see :mod:`.vector_envs`);
* ``tools``: 1,000 concurrent tool-using episodes vs gem-llm's own (see :mod:`.tool_throughput`);
* ``service``: ``/run_code`` through the pool service vs a direct pool call (see :mod:`.service`);
* ``e2b``: the e2b SDK against the service's e2b-compatible endpoint vs the pool (see :mod:`.e2b`);
* ``footprint``: PSS per idle and per stateful sandbox (local and Docker) vs a bare sleeping
  ``python3`` in the same sandboxing, how many stateful sandboxes fit at once (2,000 tried), and
  where a local sandbox's start goes (see :mod:`.footprint`);
* ``ray``: calls through the Ray runtime on a cluster of one and two nodes vs the same pool used
  directly (see :mod:`.ray_cluster`);
* ``release``: 400 local and 100 Docker stateful sandboxes released together vs one by one
  (see :mod:`.mass_release`, whose command line takes smaller numbers);
* ``code``: HumanEval's 164 canonical solutions vs GEM-style host-subprocess scoring (see
  :mod:`.humaneval`), stdin/stdout scoring vs a host subprocess per test, and batch scoring vs
  one answer at a time (see :mod:`.code_scoring`), on bubblewrap and on Docker;
* ``forks``: fork(1), fork(8), snapshot and restore of a sandbox holding a 10 MB kernel and
  8 MB of files vs the same state rebuilt in fresh sandboxes (see :mod:`.forks`), on
  bubblewrap and on Docker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import anyio

from gem_sandbox.runtime import Runtime
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


async def warm_calls_ms(pool: SandboxPool | Runtime, calls: int) -> list[float]:
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


async def calls_per_second(pool: SandboxPool | Runtime, concurrency: int, seconds: float = 3.0) -> float:
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


async def cold_start_ms(backend: Backend, runs: int = 10) -> list[float]:
    """Opening a pool of one until its sandbox's agent has said hello."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        async with _pool(backend, min_idle=1, max_size=1) as pool:
            await pool.wait_ready(timeout=60)
            samples.append((time.perf_counter() - start) * 1000)
    return samples


async def idle_cpu_percent(pool: SandboxPool, sandbox_pids: Callable[[], list[int]], seconds: float = 10.0):
    """Percent of one core that this process (the pool and its supervisor) and the sandboxes'
    processes use while the pool sits idle."""
    pids = sandbox_pids()
    host, boxes, wall = time.process_time(), _cpu_s(pids), time.perf_counter()
    await anyio.sleep(seconds)
    wall = time.perf_counter() - wall
    return 100 * (time.process_time() - host) / wall, 100 * (_cpu_s(pids) - boxes) / wall


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _process_tree(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _local_sandbox_pids(box_ids: list[str]) -> list[int]:
    """Every process of these local sandboxes: each one's bwrap init and what runs under it."""
    from gem_sandbox.sandbox.backends.local import bwrap_processes

    return _process_tree([p.pid for p in bwrap_processes() if p.box in box_ids and p.init])


def _private_mb(pids: list[int]) -> float:
    """The memory only these processes hold (private pages: what one more sandbox costs)."""
    total_kb = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total_kb += sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean", "Private_Dirty")))
        except OSError:
            continue
    return total_kb / 1024


def _bwrap_python_ms(python: str, runs: int) -> list[float]:
    """bubblewrap starting ``python -c pass`` with the local backend's namespaces and binds."""
    from gem_sandbox.sandbox.backends.local.argv import namespace_options, system_binds

    argv = ["bwrap", *namespace_options(rootless=False), *system_binds(), "--", python, "-s", "-E", "-c", "pass"]
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def bench_local(calls: int = CALLS) -> list[Row]:
    from gem_sandbox.sandbox.backends.local import LocalBackend

    backend = LocalBackend()
    gem_way = fresh_subprocess_ms(calls // 3)
    async with _pool(backend, min_idle=2, max_size=8) as pool:
        await pool.wait_ready()
        warm = await warm_calls_ms(pool, calls)
        acquire = await acquire_ms(pool, 100)
    async with _pool(backend, min_idle=4, max_size=4) as pool:
        await pool.wait_ready()
        throughput = await calls_per_second(pool, concurrency=8)
    async with _pool(backend, min_idle=2, max_size=2, runs_per_sandbox=4) as pool:
        await pool.wait_ready()
        shared = await calls_per_second(pool, concurrency=8)
    async with _pool(backend, min_idle=8, max_size=8) as pool:
        await pool.wait_ready()
        boxes = [await pool.acquire() for _ in range(8)]
        for sandbox in boxes:  # each has run once, as a pooled sandbox idles
            await sandbox.run(TRIVIAL)
            await pool.release(sandbox)
        ids = [sandbox.id for sandbox in boxes]
        await pool.wait_ready()
        await anyio.sleep(1)
        memory = _private_mb(_local_sandbox_pids(ids)) / len(ids)
        supervisor_cpu, sandboxes_cpu = await idle_cpu_percent(pool, lambda: _local_sandbox_pids(ids))
    cold = await cold_start_ms(backend)
    bare = await anyio.to_thread.run_sync(_bwrap_python_ms, backend.python, 10)
    baseline_rate = 1000 / percentile(gem_way, 50)
    return [
        Row("local: warm Python call p50", percentile(warm, 50), percentile(gem_way, 50), "ms", GEM),
        Row("local: warm Python call p99", percentile(warm, 99), percentile(gem_way, 99), "ms", GEM),
        Row("local: trivial calls/s, 8 callers, 4 sandboxes", throughput, baseline_rate, "calls/s", GEM + ", serial",
            higher_is_better=True),
        Row("local: trivial calls/s, 8 callers, 2 sandboxes x 4 runs", shared, baseline_rate, "calls/s",
            GEM + ", serial", higher_is_better=True),
        Row("local: acquire from a warm pool p50", percentile(acquire, 50), None, "ms"),
        Row("local: cold create-to-ready p50", percentile(cold, 50), percentile(bare, 50), "ms",
            "bwrap running python -c pass"),
        Row("local: idle sandbox memory (private)", memory, None, "MB"),
        Row("local: pool of 8 idle sandboxes, supervisor CPU", supervisor_cpu, None, "% of a core"),
        Row("local: pool of 8 idle sandboxes, their agents' CPU", sandboxes_cpu, None, "% of a core"),
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
    from gem_sandbox.sandbox.backends.docker.images import default_image

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
        throughput = await calls_per_second(pool, concurrency=8)
    async with _pool(backend, min_idle=2, max_size=2, runs_per_sandbox=4) as pool:
        await pool.wait_ready(timeout=120)
        shared = await calls_per_second(pool, concurrency=8)
    exec_rate = 1000 / percentile(exec_way, 50)
    rows += [
        Row("docker: trivial calls/s, 8 callers, 8 containers", throughput, exec_rate, "calls/s",
            "docker exec, serial", higher_is_better=True),
        Row("docker: trivial calls/s, 8 callers, 2 containers x 4 runs", shared, exec_rate, "calls/s",
            "docker exec, serial", higher_is_better=True),
    ]
    cold = await cold_start_ms(backend, 5)
    raw = await anyio.to_thread.run_sync(_docker_run_ms, image, 5)
    rows.append(Row("docker: cold create-to-ready p50", percentile(cold, 50), percentile(raw, 50), "ms",
                    "raw docker run"))
    return rows


def bench_vector() -> list[Row]:
    from .vector_envs import run

    return run()


def bench_tools() -> list[Row]:
    from .tool_throughput import run

    return run()


def bench_service() -> list[Row]:
    from .service import run

    return run()


def bench_e2b() -> list[Row]:
    from .e2b import run

    return run()


def bench_footprint() -> list[Row]:
    from .footprint import run

    return run()


def bench_ray() -> list[Row]:
    from .ray_cluster import run

    return run()


def bench_release() -> list[Row]:
    from .mass_release import run

    return run()


def bench_code() -> list[Row]:
    from . import code_scoring, humaneval

    return [row for backend in ("local", "docker") for row in humaneval.run(backend) + code_scoring.run(backend)]


def bench_forks() -> list[Row]:
    from .forks import run

    return run()


BENCHMARKS: dict[str, Callable[[], list[Row]]] = {
    "local": lambda: anyio.run(bench_local),
    "docker": lambda: anyio.run(bench_docker),
    "vector": bench_vector,
    "tools": bench_tools,
    "service": bench_service,
    "e2b": bench_e2b,
    "footprint": bench_footprint,
    "ray": bench_ray,
    "release": bench_release,
    "code": bench_code,
    "forks": bench_forks,
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
