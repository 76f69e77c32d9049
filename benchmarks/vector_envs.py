"""Env steps per second for 1,000 GuessTheNumber envs: AsyncVectorEnv (one event loop)
against GEM's design (a thread pool with one thread per env), on the same envs and actions.

Two workloads: the bare game (steps take microseconds), and the game behind a 10 ms wait per
step, which stands in for a tool call answered by a sandbox."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio

import gem_sandbox as gem
from gem_sandbox.core import EnvWrapper

from .report import Row, print_table

NUM_ENVS = 1000
STEPS = 20
WAIT_S = 0.01


class Waiting(EnvWrapper):
    """Each step first waits ``WAIT_S``, as a step that calls a sandbox does."""

    @property
    def suspends(self) -> bool:
        return True

    def step(self, action: Any):
        time.sleep(WAIT_S)
        return self.env.step(action)

    async def astep(self, action: Any):
        await anyio.sleep(WAIT_S)
        return await self.env.astep(action)


def thread_per_env_steps(envs: list, actions: list[str], steps: int) -> float:
    """GEM's AsyncVectorEnv: every step maps env.step over a pool of num_envs threads."""
    with ThreadPoolExecutor(max_workers=len(envs)) as pool:
        start = time.perf_counter()
        for _ in range(steps):
            results = pool.map(lambda pair: pair[0].step(pair[1]), zip(envs, actions))
            for env, (_, _, terminated, truncated, _) in zip(envs, results):
                if terminated or truncated:
                    env.reset()
        return len(envs) * steps / (time.perf_counter() - start)


def async_vector_steps(vec, actions: list[str], steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        vec.step(actions)
    return vec.num_envs * steps / (time.perf_counter() - start)


def compare(what: str, wrappers: list, num_envs: int, steps: int) -> Row:
    env_id = "game:GuessTheNumber-v0"
    actions = [f"\\boxed{{{1 + i % 20}}}" for i in range(num_envs)]
    vec = gem.make_vec(env_id, num_envs=num_envs, async_mode=True, wrappers=wrappers)
    vec.reset(seed=0)
    ours = async_vector_steps(vec, actions, steps)

    envs = [gem.make(env_id, seed=i) for i in range(num_envs)]
    for wrapper in wrappers:
        envs = [wrapper(env) for env in envs]
    for env in envs:
        env.reset()
    baseline = thread_per_env_steps(envs, actions, steps)
    return Row(what, ours, baseline, "steps/s", "thread per env (GEM)", higher_is_better=True)


def run(num_envs: int = NUM_ENVS, steps: int = STEPS) -> list[Row]:
    return [
        compare(f"{num_envs} GuessTheNumber envs", [], num_envs, steps),
        compare(f"{num_envs} envs, {WAIT_S * 1000:.0f} ms wait per step", [Waiting], num_envs, steps),
    ]


def main() -> None:
    print_table("Vector env stepping", run())


if __name__ == "__main__":
    main()
