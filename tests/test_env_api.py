"""The Env contract: both faces, per-instance randomness, state, wrappers."""

from __future__ import annotations

import pytest

from gem_sandbox.core import EnvWrapper
from tests.helpers import AsyncSleepEnv, CountdownEnv


def test_sync_env_gets_an_async_face():
    env = CountdownEnv(length=1)
    obs, _ = env.reset(seed=1)

    async def play():
        await env.areset(seed=1)
        return await env.astep("x")

    from gem_sandbox.sync import run_sync

    assert obs.startswith("start")
    assert run_sync(play)[2] is True


def test_async_env_gets_a_sync_face():
    env = AsyncSleepEnv(delay=0)
    assert env.reset() == ("ready", {})
    assert env.step("hi")[0] == "echo hi"


def test_same_seed_reproduces_an_episode_and_instances_are_independent():
    a, b = CountdownEnv(seed=7), CountdownEnv(seed=7)
    assert a.reset()[0] == b.reset()[0]
    assert a.reset(seed=3)[0] == b.reset(seed=3)[0]
    assert CountdownEnv(seed=1).reset()[0] != CountdownEnv(seed=2).reset()[0]


def test_get_state_and_set_state_resume_an_episode():
    env = CountdownEnv(length=3)
    env.reset(seed=0)
    state = env.get_state()
    first = env.step("a")
    env.set_state(state)
    assert env.step("a") == first


def test_spawn_copies_configuration_and_optionally_state():
    env = CountdownEnv(length=5)
    env.reset(seed=0)
    env.step("a")
    assert env.spawn(same_state=True).remaining == 4
    assert env.spawn().remaining == 5
    assert env.spawn(length=9).length == 9


def test_wrapper_forwards_unknown_attributes_live():
    env = CountdownEnv(length=3)
    wrapped = EnvWrapper(EnvWrapper(env))
    wrapped.reset(seed=0)
    assert wrapped.remaining == 3
    wrapped.step("a")
    assert wrapped.remaining == 2  # read through, not a copy made at wrap time
    assert wrapped.unwrapped is env


def test_wrapper_raises_attribute_error_for_missing_names():
    with pytest.raises(AttributeError):
        EnvWrapper(CountdownEnv()).no_such_attribute
