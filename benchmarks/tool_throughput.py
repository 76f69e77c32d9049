"""Python tool calls per second for 1,000 concurrent episodes: gem-sandbox against gem-llm.

Ours: ``AsyncVectorEnv`` (one event loop) of ``ToolEnvWrapper(PythonCodeTool)`` episodes on
the arithmetic env, the calls running on a runtime of 8 Docker containers (bubblewrap when Docker
is unavailable; the table says which). GEM: the real ``gem-llm`` package, its ``PythonCodeTool``
(a host subprocess per call) in its ``ToolEnvWrapper``, stepped by its thread-per-env
``AsyncVectorEnv``. Both step the same actions: five tool calls per episode, then an answer.
Latency is per env step that made a tool call, measured around that env's step. GEM runs
``python`` from ``PATH``; the benchmark puts this interpreter's directory first, so GEM pays for
a real interpreter start rather than a version-manager shim.

``python -m benchmarks.tool_throughput`` (gem-llm must be installed for the baseline).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from gem_sandbox_envs.math.arithmetic import ArithmeticEnv

from gem_sandbox.core import EnvWrapper
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.defaults import backend_class
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.vector import AsyncVectorEnv
from gem_sandbox.wrappers import ToolEnvWrapper

from .report import Row, percentile, print_table

NUM_EPISODES = 1000
POOL_SIZE = 8
TOOL_CALLS = 5  # python_tool's max_tool_uses
CALL = "Let me compute.\n<python>\nprint(sum(i * i for i in range(1000)))\n</python>"
ANSWER = "\\boxed{332833500}"


class Timed(EnvWrapper):
    """Records how long each step that a tool answered took."""

    def __init__(self, env: Any, latencies: list[float]) -> None:
        super().__init__(env)
        self.latencies = latencies

    async def astep(self, action: Any):
        started = time.perf_counter()
        result = await self.env.astep(action)
        if result[-1].get("use_tool"):
            self.latencies.append(time.perf_counter() - started)
        return result


def backend_name() -> str:
    return "docker" if backend_class("docker").check() is None else "local"


async def ours(num_episodes: int, backend: str) -> tuple[float, list[float]]:
    """Tool calls per second and per-call step latencies of gem-sandbox."""
    latencies: list[float] = []
    config = PoolConfig(min_idle=POOL_SIZE, max_size=POOL_SIZE)
    async with Runtime(backend, config) as runtime:
        await runtime.wait_ready()
        tool = PythonCodeTool(timeout=5, runtime=runtime)
        envs = [
            Timed(ToolEnvWrapper(ArithmeticEnv(seed=i), [tool], 0.05, 0.25, TOOL_CALLS), latencies)
            for i in range(num_episodes)
        ]
        vec = AsyncVectorEnv(envs)
        await vec.areset(seed=0)
        await vec.astep({0: CALL})  # warm-up
        latencies.clear()
        await vec.areset(seed=0)
        started = time.perf_counter()
        for _ in range(TOOL_CALLS):
            await vec.astep([CALL] * num_episodes)
        elapsed = time.perf_counter() - started
        await vec.astep([ANSWER] * num_episodes)
        await vec.aclose()
    return len(latencies) / elapsed, latencies


def gems(num_episodes: int) -> tuple[float, list[float]]:
    """The same for gem-llm: its tool, its wrapper, its thread-per-env vector env."""
    import gem.core
    from gem.tools.python_code_tool import PythonCodeTool as GemPythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper as GemToolEnvWrapper
    from gem.vector.async_vector_env import AsyncVectorEnv as GemAsyncVectorEnv

    latencies: list[float] = []

    class GemArithmetic(gem.core.Env):
        """Our arithmetic env behind GEM's Env base class, which GEM's wrapper expects."""

        def __init__(self, seed: int) -> None:
            self.env = ArithmeticEnv(seed=seed)

        def reset(self, seed: int | None = None):
            return self.env.reset(seed=seed)

        def step(self, action: str):
            return self.env.step(action)

    class GemTimed(gem.core.EnvWrapper):
        def reset(self, seed: int | None = None):
            return self.env.reset(seed=seed)

        def step(self, action: str):
            started = time.perf_counter()
            result = self.env.step(action)
            if "tool_type" in result[-1]:
                latencies.append(time.perf_counter() - started)
            return result

    tool = GemPythonCodeTool(timeout=5)

    def make(i: int):
        return lambda: GemTimed(GemToolEnvWrapper(GemArithmetic(i), [tool], 0.05, 0.25, TOOL_CALLS))

    vec = GemAsyncVectorEnv([f"arithmetic-{i}" for i in range(num_episodes)], [make(i) for i in range(num_episodes)])
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"
    try:
        vec.reset(seed=0)
        vec.step({0: CALL})  # warm-up
        latencies.clear()
        vec.reset(seed=0)
        started = time.perf_counter()
        for _ in range(TOOL_CALLS):
            vec.step([CALL] * num_episodes)
        elapsed = time.perf_counter() - started
        vec.step([ANSWER] * num_episodes)
    finally:
        os.environ["PATH"] = path
        vec.thread_pool_executer.shutdown()
    return len(latencies) / elapsed, latencies


def run(num_episodes: int = NUM_EPISODES) -> list[Row]:
    backend = backend_name()
    our_rate, our_latencies = anyio.run(ours, num_episodes, backend)
    try:
        gem_rate, gem_latencies = gems(num_episodes)
    except ImportError as exc:
        print(f"(no gem-llm baseline: {exc}; pip install 'gem-sandbox[gem]')")
        gem_rate, gem_latencies = None, []
    base = "gem-llm, host subprocess"
    what = f"{num_episodes} episodes, pool of {POOL_SIZE} {backend} sandboxes"

    def latency(q: float, samples: list[float]) -> float | None:
        return percentile(samples, q) * 1000 if samples else None

    return [
        Row(f"tool calls/s, {what}", our_rate, gem_rate, "calls/s", base, higher_is_better=True),
        Row("p50 step latency (tool call)", latency(50, our_latencies), latency(50, gem_latencies), "ms", base),
        Row("p99 step latency (tool call)", latency(99, our_latencies), latency(99, gem_latencies), "ms", base),
    ]


def main() -> None:
    print_table(f"Python tool throughput, {NUM_EPISODES} concurrent episodes", run())


if __name__ == "__main__":
    main()
