"""``gem-sandbox bench e2b``: the unmodified ``e2b`` SDK against ``gem-sandbox serve
--e2b-compatible`` (Docker, 8 containers), beside the same work on the pool directly in the
same run: ``Sandbox.create`` to the first command's answer, and ``commands.run`` p50/p99.

The SDK runs in this process, beside the service, as an agent loop on the same machine would.
e2b's and CubeSandbox's published figures are printed as context only: they were measured
elsewhere (over a WAN, on other hardware), not here.
"""

from __future__ import annotations

import sys
import time

import anyio

from gem_sandbox.runtime import Runtime

from .report import Row, percentile

CONTAINERS = 8
CREATES = 20
CALLS = 200
PUBLISHED = (
    ("e2b: first command after create (published, over WAN)", 500.0),
    ("CubeSandbox: create (published, microVM)", 48.0),
)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def bench_e2b() -> list[Row]:
    try:
        import e2b
    except ImportError:
        print("e2b benchmarks skipped: pip install e2b", file=sys.stderr)
        return []
    from gem_sandbox.sandbox.backends.docker import DockerBackend
    from gem_sandbox.service import ServeOptions, TokenPolicy, running

    problem = DockerBackend.check()
    if problem:
        print(f"e2b benchmarks skipped: {problem}", file=sys.stderr)
        return []
    token = TokenPolicy(name="bench", secret="bench-secret", max_leases=CONTAINERS)
    options = ServeOptions(port=0, backend="docker", e2b_compatible=True, tokens=(token,))
    async with Runtime("docker", min_idle=CONTAINERS, max_size=CONTAINERS) as runtime:
        await runtime.wait_ready(timeout=120)
        direct_first, sdk_first = [], []
        for _ in range(CREATES):
            started = time.perf_counter()
            async with runtime.lease() as sandbox:
                assert (await sandbox.run("true", "bash")).ok
                direct_first.append(_ms(started))
            await runtime.wait_ready()
        async with runtime.lease() as sandbox:
            direct_calls = []
            for _ in range(CALLS):
                started = time.perf_counter()
                assert (await sandbox.run("echo hi", "bash")).ok
                direct_calls.append(_ms(started))
        async with running(options, runtime) as service:
            sdk = {"api_url": service.url, "sandbox_url": service.url, "api_key": token.secret}
            for _ in range(CREATES):
                started = time.perf_counter()
                created = await e2b.AsyncSandbox.create(**sdk)
                await created.commands.run("true")
                sdk_first.append(_ms(started))
                await created.kill()
                await runtime.wait_ready()
            created = await e2b.AsyncSandbox.create(**sdk)
            sdk_calls = []
            for _ in range(CALLS):
                started = time.perf_counter()
                assert (await created.commands.run("echo hi")).stdout == "hi\n"
                sdk_calls.append(_ms(started))
            await created.kill()
    base = "the pool directly"
    rows = [
        Row("e2b SDK: create to first command p50", percentile(sdk_first, 50), percentile(direct_first, 50), "ms",
            f"{base}: lease + first run"),
        Row("e2b SDK: commands.run p50", percentile(sdk_calls, 50), percentile(direct_calls, 50), "ms", f"{base}: run"),
        Row("e2b SDK: commands.run p99", percentile(sdk_calls, 99), percentile(direct_calls, 99), "ms", f"{base}: run"),
    ]
    rows += [Row(what, value, None, "ms") for what, value in PUBLISHED]
    return rows


def run() -> list[Row]:
    return anyio.run(bench_e2b)
