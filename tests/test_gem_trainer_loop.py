"""A trainer's collection loop written for gem-llm, in the shape of GEM's OAT GRPO example, runs
on gem_sandbox with only its import lines changed.

The loop uses what such trainers touch: ``make_vec`` with a list of ids, per-env seeds and
factory wrappers, batched ``step``, ``terminated | truncated`` arrays, the tool wrapper's
``prev_ep_*`` counters, ``env.envs[i]`` with ``get_state``/``set_state`` and ``deepcopy`` to
replay one start several times (GRPO's groups), and ``env.envs[i].reset()``.
"""

from __future__ import annotations

import importlib
import re
from copy import deepcopy
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("gem", reason="gem-llm is not installed (pip install 'gem-sandbox[gem]')")

STACKS = {
    "gem-llm": ("gem", "gem.wrappers.wrapper_factory"),
    "gem_sandbox": ("gem_sandbox", "gem_sandbox.wrappers.wrapper_factory"),
}


def policy(observation: str) -> str:
    """Bisects GuessTheNumber's range from the last hint; asks the Python tool once first."""
    if "Code execution result" not in observation and "<python>" not in observation:
        return "<python>print(25)</python>"
    low, high = 1, 50
    for guess, hint in re.findall(r"\\boxed\{(\d+)\}.*?(higher|lower)", observation, re.DOTALL):
        if hint == "higher":
            low = max(low, int(guess) + 1)
        else:
            high = min(high, int(guess) - 1)
    return f"\\boxed{{{(low + high) // 2}}}"


def collect(
    gem: ModuleType, get_wrapper_fns: Any, *, getset_state: bool, num_env: int = 2, group: int = 2
) -> dict[str, Any]:
    """Plays ``group`` copies of each env's first start to the end, GRPO style: the start kept
    with ``get_state`` (``getset_state``) or as a deep copy of the env, the example's two ways."""
    env = gem.make_vec(
        ["game:GuessTheNumber-v0-hard"] * num_env,
        vec_kwargs=[{"seed": 7 + j} for j in range(num_env)],
        wrappers=get_wrapper_fns("python_tool_no_int_reward,concat_with_action"),
        async_mode=False,
    )
    first, _ = env.reset()
    starts = [deepcopy(env.envs[i].get_state() if getset_state else env.envs[i]) for i in range(num_env)]
    returns, tool_uses, lengths = [], [], []
    for _ in range(group):
        for i in range(num_env):
            if getset_state:
                env.envs[i].set_state(deepcopy(starts[i]))
            else:
                env.envs[i] = deepcopy(starts[i])
        obs = list(first)
        running = [0.0] * num_env
        steps = [0] * num_env
        finished = [False] * num_env
        while not all(finished):
            actions = [policy(o) for o in obs]
            obs, reward, terminated, truncated, info = env.step(actions)
            done = terminated | truncated
            for i in range(num_env):
                if finished[i]:
                    continue
                running[i] += float(reward[i])
                steps[i] += 1
                if done[i]:
                    finished[i] = True
                    tool_uses.append(info[i].get("prev_ep_tool_use_counter", 0))
        returns.extend(running)
        lengths.extend(steps)
    fresh, _ = env.envs[0].reset()  # as the example does for a failed generation
    assert isinstance(fresh, str)
    if hasattr(env, "close"):  # gem-llm's vector envs have none
        env.close()
    return {"returns": returns, "tool_uses": tool_uses, "lengths": lengths}


def run(stack: str, getset_state: bool) -> dict[str, Any]:
    package, factory = STACKS[stack]
    gem = importlib.import_module(package)
    return collect(gem, importlib.import_module(factory).get_wrapper_fns, getset_state=getset_state)


def test_the_same_loop_runs_on_both_stacks():
    """gem-llm's tool wrapper cannot get_state its games (they have none): its trainers copy
    the env; ours support both ways, and each replays a start exactly."""
    theirs = run("gem-llm", getset_state=False)
    for getset_state in (False, True):
        ours = run("gem_sandbox", getset_state)
        assert len(ours["returns"]) == len(ours["lengths"]) == 4
        assert all(length >= 2 for length in ours["lengths"])  # a tool call, then guesses
        assert ours["returns"][:2] == ours["returns"][2:] and ours["lengths"][:2] == ours["lengths"][2:]
        assert ours["tool_uses"] == theirs["tool_uses"]
