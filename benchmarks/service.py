"""``gem-sandbox bench service``: a trivial SandboxFusion ``/run_code`` request through the
pool service against the same run as a direct pool call, on one pool of 8 containers.

The service runs in this process, as ``gem-sandbox serve`` would; the HTTP load comes from a
separate process (``spawn``), so the client's own CPU is not charged to the server's event loop
twice, though both share the machine's two cores, as a trainer beside its service would.
"""

from __future__ import annotations

import multiprocessing
import sys
import time

import anyio
import anyio.to_thread

from gem_sandbox.runtime import Runtime

from .report import Row, percentile
from .suite import TRIVIAL, calls_per_second, warm_calls_ms

CONTAINERS = 8
CALLERS = 16
SECONDS = 5.0
SERIAL = 300
BASELINE = "direct pool call"


def _load(url: str, path: str, serial: int, callers: int, seconds: float) -> tuple[list[float], float]:
    """In a child process: ``serial`` requests one after another (latencies in ms), then
    requests/s from ``callers`` concurrent keep-alive clients for ``seconds``."""

    async def main() -> tuple[list[float], float]:
        import aiohttp

        body = {"code": TRIVIAL, "language": "python"}
        async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=0)) as session:
            samples = []
            for _ in range(serial):
                start = time.perf_counter()
                async with session.post(path, json=body) as response:
                    answer = await response.json()
                    assert response.status == 200, answer
                samples.append((time.perf_counter() - start) * 1000)
            done = 0
            deadline = time.perf_counter() + seconds

            async def caller() -> None:
                nonlocal done
                while time.perf_counter() < deadline:
                    async with session.post(path, json=body) as response:
                        await response.read()
                    done += response.status == 200

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(callers):
                    tg.start_soon(caller)
            return samples, done / (time.perf_counter() - start)

    return anyio.run(main)


def _in_child(url: str, path: str) -> tuple[list[float], float]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_load, (url, path, SERIAL, CALLERS, SECONDS))


async def bench_service() -> list[Row]:
    from gem_sandbox.sandbox.backends.docker import DockerBackend
    from gem_sandbox.service import ServeOptions, running

    problem = DockerBackend.check()
    if problem:
        print(f"service benchmarks skipped: {problem}", file=sys.stderr)
        return []
    options = ServeOptions(port=0, backend="docker")
    async with Runtime("docker", min_idle=CONTAINERS, max_size=CONTAINERS) as runtime:
        await runtime.wait_ready(timeout=120)
        direct = await warm_calls_ms(runtime, SERIAL)  # the suite's, on the runtime the service serves
        direct_rate = await calls_per_second(runtime, CALLERS, SECONDS)
        async with running(options, runtime) as service:
            rest, rest_rate = await anyio.to_thread.run_sync(_in_child, service.url, "/v1/run")
            fusion, fusion_rate = await anyio.to_thread.run_sync(_in_child, service.url, "/run_code")
    what = f"service: trivial /run_code, {CONTAINERS} containers"
    return [
        Row(f"{what}, p50", percentile(fusion, 50), percentile(direct, 50), "ms", BASELINE),
        Row(f"{what}, p99", percentile(fusion, 99), percentile(direct, 99), "ms", BASELINE),
        Row(f"{what}, {CALLERS} clients", fusion_rate, direct_rate, "req/s", f"{BASELINE}, {CALLERS} callers",
            higher_is_better=True),
        Row(f"service: trivial /v1/run, {CONTAINERS} containers, p50", percentile(rest, 50), percentile(direct, 50),
            "ms", BASELINE),
        Row(f"service: trivial /v1/run, {CONTAINERS} containers, {CALLERS} clients", rest_rate, direct_rate, "req/s",
            f"{BASELINE}, {CALLERS} callers", higher_is_better=True),
    ]


def run() -> list[Row]:
    return anyio.run(bench_service)
