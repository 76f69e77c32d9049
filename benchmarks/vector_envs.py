"""Env steps per second for 1,000 GuessTheNumber envs: AsyncVectorEnv (one event loop)
against GEM's design (a thread pool with one thread per env), on the same envs and actions."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import gem_sandbox as gem
from .report import Row, print_table

NUM_ENVS = 1000
STEPS = 20


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


def run(num_envs: int = NUM_ENVS, steps: int = STEPS) -> list[Row]:
    env_id = "game:GuessTheNumber-v0"
    vec = gem.make_vec(env_id, num_envs=num_envs, async_mode=True)
    vec.reset(seed=0)
    actions = [f"\\boxed{{{1 + i % 20}}}" for i in range(num_envs)]
    ours = async_vector_steps(vec, actions, steps)

    envs = [gem.make(env_id, seed=i) for i in range(num_envs)]
    for env in envs:
        env.reset()
    baseline = thread_per_env_steps(envs, actions, steps)
    return [
        Row(f"{num_envs} GuessTheNumber envs, env steps/s", ours, baseline, "steps/s",
            "thread per env (GEM)", higher_is_better=True)
    ]


def main() -> None:
    print_table("Vector env stepping", run())


if __name__ == "__main__":
    main()
