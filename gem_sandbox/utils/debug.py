"""GEM's debugging helpers (``gem.utils.debug``): play an episode with a policy and print it.

They work with any env, a vector env included (``policy`` then returns a batch of actions).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pprint import pprint
from typing import Any

import numpy as np

from gem_sandbox.core import areset_env, astep_env


def ppprint(x: Any) -> None:
    """Pretty-print ``x``; a list or tuple item by item, numbered."""
    if isinstance(x, (list, tuple)):
        for i, item in enumerate(x):
            print("-" * 5, f"{i + 1}/{len(x)}:")
            pprint(item)
            print("")
    else:
        pprint(x)


def _section(title: str, value: Any) -> None:
    print("-" * 10, title, "-" * 10)
    ppprint(value)


def _report(step_count: int, sections: dict[str, Any], terminated: Any, truncated: Any) -> bool:
    """Print one step; whether every env's episode is done."""
    print("=" * 30)
    print(f"Step {step_count}")
    for title, value in sections.items():
        _section(title, value)
    print("terminated: ", terminated, "truncated: ", truncated)
    print("=" * 30)
    done = np.logical_or(terminated, truncated)
    return bool(np.all(done))


def _random_half(action: Any) -> dict[int, Any]:
    """A non-empty random subset of a batch of actions, as ``{index: action}``."""
    active: dict[int, Any] = {}
    while not active:
        active = {i: a for i, a in enumerate(action) if np.random.rand() > 0.5}
    return active


def _play(env: Any, policy: Callable[[Any], Any], ignore_done: bool, max_steps: float, subset: bool) -> None:
    """The loop both sync helpers run; ``subset`` acts in a random half of a vector env's envs."""
    start = time.time()
    obs, _ = env.reset()
    step_count = 0
    while True:
        step_count += 1
        action = policy(obs)
        sent = _random_half(action) if subset else action
        next_obs, reward, terminated, truncated, _ = env.step(sent)
        if subset:
            sections = {"action": sent, "next_observation": next_obs, "reward": reward}
        else:
            sections = {"observation": obs, "action": action, "reward": reward}
        done = _report(step_count, sections, terminated, truncated)
        obs = next_obs
        if (done and not ignore_done) or step_count >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


def run_and_print_episode(env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9) -> None:
    """Reset ``env``, then step it with ``policy(obs)`` until the episode ends (every env's,
    for a vector env) or ``max_steps``, printing each step."""
    _play(env, policy, ignore_done, max_steps, subset=False)


def run_and_print_episode_with_selective_step(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """For a vector env: as :func:`run_and_print_episode`, but each step acts in a random half
    of the envs (a ``{index: action}`` subset step), as GEM's helper does."""
    _play(env, policy, ignore_done, max_steps, subset=True)


async def run_and_print_episode_async(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """:func:`run_and_print_episode` through the env's async face (``areset``/``astep``; GEM
    awaits ``reset``/``step`` of envs whose sync face is a coroutine)."""
    start = time.time()
    obs, _ = await areset_env(env)
    step_count = 0
    while True:
        step_count += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = await astep_env(env, action)
        done = _report(step_count, {"observation": obs, "action": action, "reward": reward}, terminated, truncated)
        obs = next_obs
        if (done and not ignore_done) or step_count >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")
