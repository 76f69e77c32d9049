"""Vector envs: autoreset modes, subset stepping, isolation, seeding, scale."""

from __future__ import annotations

import pytest

from gem_sandbox.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from tests.helpers import AsyncSleepEnv, CountdownEnv

BOTH = pytest.mark.parametrize("cls", [SyncVectorEnv, AsyncVectorEnv])


@BOTH
def test_same_step_autoreset_returns_the_new_episode_and_keeps_the_final_obs(cls):
    vec = cls([CountdownEnv(length=1), CountdownEnv(length=2)])
    vec.reset(seed=0)
    obs, rewards, terminated, truncated, infos = vec.step(["a", "b"])
    assert list(terminated) == [True, False]
    assert obs[0].startswith("start") and infos[0]["final_obs"] == "left 0"
    assert rewards.tolist() == [1.0, 0.0]
    assert vec.envs[0].resets == 2


@BOTH
def test_next_step_autoreset_resets_on_the_following_step(cls):
    vec = cls([CountdownEnv(length=1)], autoreset_mode=AutoresetMode.NEXT_STEP)
    vec.reset(seed=0)
    obs, _, terminated, _, _ = vec.step(["a"])
    assert obs == ["left 0"] and terminated.tolist() == [True]
    obs, rewards, terminated, _, _ = vec.step(["ignored"])
    assert obs[0].startswith("start") and rewards.tolist() == [0.0] and terminated.tolist() == [False]


@BOTH
def test_a_dict_of_actions_steps_only_those_envs(cls):
    vec = cls([CountdownEnv(length=5) for _ in range(3)])
    vec.reset(seed=0)
    obs, rewards, *_ = vec.step({2: "x", 0: "y"})
    assert obs == ["left 4", "left 4"] and len(rewards) == 2
    assert [e.remaining for e in vec.envs] == [4, 5, 4]


@BOTH
def test_an_env_that_raises_is_isolated(cls):
    vec = cls([CountdownEnv(length=5), CountdownEnv(length=5)])
    vec.reset(seed=0)
    obs, _, terminated, _, infos = vec.step(["raise", "ok"])
    assert "RuntimeError: boom" in infos[0]["error"] and terminated.tolist() == [True, False]
    assert obs[1] == "left 4"
    obs, _, terminated, _, _ = vec.step(["ok", "ok"])  # the failed slot starts a new episode
    assert obs[0].startswith("start") and terminated.tolist() == [False, False]


@BOTH
def test_a_step_over_the_timeout_is_truncated_without_stalling_the_batch(cls):
    vec = cls([AsyncSleepEnv(delay=0), AsyncSleepEnv(delay=0)], step_timeout=0.2)
    vec.reset()
    obs, _, terminated, truncated, infos = vec.step(["hang", "fine"])
    assert infos[0]["error_type"] == "timeout" and truncated.tolist() == [True, False]
    assert obs[1] == "echo fine"


@BOTH
def test_per_env_seeds_and_reset_kwargs(cls):
    vec = cls([CountdownEnv(), CountdownEnv()])
    obs_a, infos = vec.reset(seed=[5, 6], env_kwargs=[{"k": 1}, {"k": 2}], shared=True)
    assert [i["kwargs"] for i in infos] == [{"shared": True, "k": 1}, {"shared": True, "k": 2}]
    obs_b, _ = vec.reset(seed=[5, 6])
    assert obs_a == obs_b and obs_a[0] != obs_a[1]


def test_async_vector_env_overlaps_waiting_steps():
    vec = AsyncVectorEnv([AsyncSleepEnv(delay=0.3) for _ in range(50)])
    vec.reset()
    import time

    start = time.perf_counter()
    vec.step(["a"] * 50)
    assert time.perf_counter() - start < 0.3 * 5  # serial stepping would take 15 s


def test_async_vector_env_of_a_thousand_envs_steps_in_one_loop():
    import threading

    vec = AsyncVectorEnv([CountdownEnv(length=3) for _ in range(1000)])
    threads_before = threading.active_count()
    vec.reset(seed=0)
    for _ in range(3):
        _, rewards, terminated, _, _ = vec.step(["a"] * 1000)
    assert terminated.all() and rewards.sum() == 1000
    assert threading.active_count() <= threads_before + 1  # no thread per env
    vec.close()
