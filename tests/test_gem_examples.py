"""GEM's training examples, their env-facing part run through ``import gem_sandbox as gem``.

Each test makes the calls one of GEM's public examples makes on its envs, in the same order
and from the same kind of caller (a coroutine, for the trainers whose agents are async), and
checks what the example then relies on:

* ``examples/train_tinker/gem_adapter.py`` (Tinker cookbook): a pool of ``gem.make(id,
  **env_kwargs)``, a group of deep copies per pool entry, ``reset()``, ``step(text)``, the
  reward as a float, the info's numbers as metrics;
* ``examples/train_tinker/tinker_train.py``: ``get_wrapper_fns(wrappers, tokenizer=...)``,
  envs made with ``seed=time_ns``, ``use_mp=False`` and the first env's ``dataset``, episodes
  collected concurrently by ``asyncio.gather`` with ``terminated | truncated``;
* ``examples/train_openrlhf/agent_func_*.py``: ``gem.make(...)`` with ``seed=time_ns`` (and
  ``env_id=`` by keyword), ``env.max_turns`` read before any reset, ``reset(seed)``
  positionally, rewards compared and put into tensors;
* RL2's ``examples/train_rl2`` (``async_env*.py``, ``async_multi_turn.py``,
  ``vec_multi_turn.py``): a pool of wrapped envs reset with per-env seeds and stepped from
  coroutines, and ``gem.make_vec(..., vec_kwargs=, wrappers=, async_mode=True)`` reset and
  stepped with ``""`` for finished envs.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import time
from numbers import Real

import pytest

import gem_sandbox as gem
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns

GUESSES = [rf"\boxed{{{n}}}" for n in (10, 5, 15, 3, 17, 8, 12, 1, 20, 6)]


def numeric_metrics(info: dict) -> dict:
    """What the Tinker adapter keeps of an info: its int and float values."""
    return {k: v for k, v in info.items() if isinstance(v, (int, float))}


# -- Tinker cookbook adapter -----------------------------------------------------------------


def test_tinker_adapter_plays_a_group_of_copies_of_a_pooled_env():
    env_kwargs = json.loads('{"max_turns": 4}')
    pool = [gem.make("game:GuessTheNumber-v0", **env_kwargs) for _ in range(2)]
    group = [copy.deepcopy(pool[1]) for _ in range(3)]

    async def episode(env) -> list[float]:
        obs, _ = env.reset()
        convo = [{"role": "user", "content": obs}]
        rewards = []
        for text in GUESSES:
            next_obs, reward, terminated, truncated, info = env.step(text)
            rewards.append(float(reward))
            numeric_metrics(info or {})
            if terminated or truncated:
                return rewards
            convo += [{"role": "assistant", "content": text}, {"role": "user", "content": next_obs}]
        raise AssertionError("the episode outlived max_turns")

    async def run_group():
        return await asyncio.gather(*(episode(env) for env in group))

    returns = asyncio.run(run_group())
    assert all(1 <= len(rewards) <= 4 for rewards in returns)


def test_tinker_adapter_copies_play_independently():
    source = gem.make("game:GuessTheNumber-v0", seed=3)
    first, second = copy.deepcopy(source), copy.deepcopy(source)
    first.reset(seed=1)
    second.reset(seed=1)
    first.step(GUESSES[0])
    assert (first.turn_count, second.turn_count) == (1, 0)


def test_tinker_adapter_reads_rewards_and_numeric_infos_of_a_single_turn_env():
    env = copy.deepcopy(gem.make("rg:leg_counting", seed=11, size=100))
    env.reset()
    _, reward, terminated, truncated, info = env.step(r"\boxed{4}")
    assert isinstance(float(reward), float) and terminated and truncated
    assert all(isinstance(v, (int, float)) for v in numeric_metrics(info).values())


# -- tinker_train.py ---------------------------------------------------------------------------


@pytest.mark.parametrize("wrappers", ["concat", "concat,episode_tracking"])
def test_tinker_train_collects_concurrent_episodes(wrappers: str):
    wrapper_fns = get_wrapper_fns(wrappers, tokenizer=None)
    envs = [gem.make("rg:simple_equations", seed=int(time.time_ns()), use_mp=False)]
    for i in range(2):
        dataset = envs[0].dataset if hasattr(envs[0], "dataset") else None
        envs.append(gem.make("rg:simple_equations", seed=int(time.time_ns()) * i, dataset=dataset, use_mp=False))
    for i in range(len(envs)):
        for wrapper in wrapper_fns:
            envs[i] = wrapper(envs[i])

    async def collect_episode(env) -> list[dict]:
        transitions = []
        obs, _ = env.reset()
        while True:
            next_obs, reward, terminated, truncated, _ = env.step(r"\boxed{x = 1}")
            done = terminated | truncated
            transitions.append({"obs": obs, "reward": reward, "done": done})
            obs = next_obs
            if done:
                return transitions

    async def batch():
        return await asyncio.gather(*[collect_episode(env) for env in envs])

    episodes = asyncio.run(batch())
    assert [len(e) for e in episodes] == [1, 1, 1]
    assert all(isinstance(t["obs"], str) and isinstance(t["reward"], Real) for e in episodes for t in e)


def test_tinker_train_runs_a_tool_wrapper_from_inside_the_event_loop():
    env = gem.make("rg:leg_counting", seed=5, size=100, use_mp=False)
    for wrapper in get_wrapper_fns("python_tool,concat", tokenizer=None):
        env = wrapper(env)

    async def turn():
        env.reset()
        return env.step("<python>print(6 * 7)</python>")

    try:
        obs, reward, terminated, truncated, info = asyncio.run(turn())
    finally:
        env.close()
    assert "42" in obs and info["tool_type"] == "python_code"
    assert (reward, terminated, truncated) == (0.05 + 0.25, False, False)


# -- OpenRLHF agent_func -------------------------------------------------------------------


class MultiTurnAgent:
    """The env calls of OpenRLHF's ``AgentInstance`` in GEM's multi-turn agent_func files."""

    async def init(self):
        self.env = gem.make("game:GuessTheNumber-v0", seed=time.time_ns())
        self.max_steps = self.env.max_turns
        return self

    async def reset(self, seed: int):
        random.seed(seed)
        observation, _ = self.env.reset(random.randint(1, 10000000))
        return observation

    async def step(self, action_text: str) -> dict:
        next_observation, reward, terminated, truncated, _ = self.env.step(action_text)
        if reward < -1:
            reward = -1.0
        return {"rewards": float(reward), "environment_feedback": next_observation, "done": terminated or truncated}


def test_openrlhf_multi_turn_agent_plays_to_the_end_within_max_turns():
    async def run():
        agent = await MultiTurnAgent().init()
        await agent.reset(seed=123)
        for step, guess in enumerate(GUESSES * 3, 1):
            out = await agent.step(guess)
            if out["done"]:
                return step, agent.max_steps
        raise AssertionError("never done")

    steps, max_steps = asyncio.run(run())
    assert max_steps == 20 and steps <= max_steps


def test_openrlhf_positional_reset_seed_repeats_the_episode():
    env = gem.make("game:GuessTheNumber-v0", seed=time.time_ns())
    first = [env.reset(4242) and env.step(guess)[0] for guess in GUESSES[:1]]
    again = [env.reset(4242) and env.step(guess)[0] for guess in GUESSES[:1]]
    assert first == again


def test_openrlhf_single_turn_agent_makes_its_env_by_keyword_and_scores_once():
    env = gem.make(env_id="rg:letter_counting", size=10000000, seed=time.time_ns())
    template = "User: {observation}\nAssistant: "

    async def run():
        random.seed(7)
        observation, _ = env.reset(random.randint(1, 10000000))
        prompt = template.replace("{observation}", observation)
        return prompt, env.step(r"\boxed{3}")

    prompt, (_, reward, terminated, truncated, _) = asyncio.run(run())
    assert prompt.startswith("User: ") and "{observation}" not in prompt
    assert terminated and truncated and 0.0 <= float(reward) <= 1.0


# -- RL2 -----------------------------------------------------------------------------------------


def test_rl2_async_pool_resets_with_per_env_seeds_and_steps_from_coroutines():
    num_envs = 3
    pool = []
    for i in range(num_envs):
        env = gem.make(env_id="game:GuessTheNumber-v0", seed=233 + i)
        for wrapper in get_wrapper_fns("concat", tokenizer=None):
            env = wrapper(env)
        pool.append(env)
    locks = [asyncio.Lock() for _ in range(num_envs)]

    async def episode(idx: int) -> dict:
        env_idx = idx % num_envs
        async with locks[env_idx]:
            observation, _ = pool[env_idx].reset(seed=233 + env_idx)
            for guess in GUESSES * 2:
                next_obs, reward, terminated, truncated, info = pool[env_idx].step(guess)
                if terminated or truncated:
                    return {"next_state": next_obs, "reward": float(reward), "extra_info": info, "first": observation}
        raise AssertionError("never done")

    async def run():
        return await asyncio.gather(*(episode(idx) for idx in range(2 * num_envs)))

    results = asyncio.run(run())
    assert all(isinstance(r["extra_info"], dict) and isinstance(r["next_state"], str) for r in results)
    assert [r["first"] for r in results[:num_envs]] == [r["first"] for r in results[num_envs:]]


def test_rl2_vectorized_env_resets_and_steps_a_cohort_with_empty_actions_for_finished_envs():
    num_envs = 3
    vec_env = gem.make_vec(
        ["game:GuessTheNumber-v0-hard"] * num_envs,
        vec_kwargs=[{"seed": 233 + i} for i in range(num_envs)],
        wrappers=get_wrapper_fns("concat", tokenizer=None),
        async_mode=True,
    )

    async def cohort():
        observations, _ = vec_env.reset()
        done = [False] * num_envs
        steps = 0
        while not all(done):
            actions = ["" if done[i] else r"\boxed{25}" for i in range(num_envs)]
            obs, rewards, terminateds, truncateds, infos = vec_env.step(actions)
            results = [{**infos[i], "reward": rewards[i], "next_state": obs[i]} for i in range(num_envs)]
            done = [done[i] or bool(terminateds[i] or truncateds[i]) for i in range(num_envs)]
            steps += 1
            assert steps <= 50, "the cohort never finished"
        return observations, results

    try:
        observations, results = asyncio.run(cohort())
    finally:
        vec_env.close()
    assert len(observations) == num_envs and all(isinstance(o, str) for o in observations)
    assert all(isinstance(r["next_state"], str) for r in results)
