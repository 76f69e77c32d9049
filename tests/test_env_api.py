"""The Env contract: both faces, per-instance randomness, state, wrappers, the lifecycle."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from gem_sandbox_envs.games import register_all as register_games
from gem_sandbox_envs.math import register_all as register_math

import gem_sandbox as gem
from gem_sandbox.core import Env, EnvWrapper, InvalidAction, ResetNeeded
from gem_sandbox.bridge import run_sync
from tests.helpers import AsyncSleepEnv, CountdownEnv


def test_sync_env_gets_an_async_face():
    env = CountdownEnv(length=1)
    obs, _ = env.reset(seed=1)

    async def play():
        await env.areset(seed=1)
        return await env.astep("x")

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


# -- the lifecycle: ResetNeeded and InvalidAction, enforced by the Env base class ------------
class Timer(Env):
    """A direct subclass (no make, no helpers): truncated, not terminated, after ``limit`` steps."""

    blocking = False

    def __init__(self, limit: int = 2) -> None:  # skips Env.__init__: the guard needs nothing of it
        self.limit = limit

    def reset(self, seed: int | None = None, **kwargs: Any):
        self.steps = 0
        return "go", {}

    def step(self, action: str):
        self.steps += 1
        return "tick", 0.0, False, self.steps == self.limit, {}


class AsyncNative(AsyncSleepEnv):
    """Async-native and single-turn: the sync face it gets is guarded through its astep."""

    async def astep(self, action: Any):
        return "done", 1.0, True, False, {}


class TwoGuards(CountdownEnv):
    """Its step calls the guarded step of its base, so two guards nest."""

    def step(self, action: Any):
        return super().step(action.upper())


def step_either(env: Env, action: Any, face: str):
    return run_sync(env.astep, action) if face == "async" else env.step(action)


def reset_either(env: Env, face: str):
    return run_sync(env.areset, seed=0) if face == "async" else env.reset(seed=0)


FACES = pytest.mark.parametrize("face", ["sync", "async"])


def game() -> Env:
    register_games()
    return gem.make("game:GuessTheNumber-v0-easy")


def math_env() -> Env:
    register_math()
    return gem.make("math:Arithmetic-v0")


#: A game and the math env made by id; direct subclasses, sync- and async-native.
ENVS = pytest.mark.parametrize(
    "make_env",
    [game, math_env, Timer, AsyncNative, lambda: CountdownEnv(length=1)],
    ids=["game", "math", "direct", "async-native", "countdown"],
)


@ENVS
@FACES
def test_a_step_before_the_first_reset_is_a_reset_needed_error(make_env, face: str):
    env = make_env()
    with pytest.raises(ResetNeeded, match=r"has no episode running: call reset\(\) first"):
        step_either(env, "\\boxed{1}", face)
    reset_either(env, face)
    step_either(env, "\\boxed{1}", face)  # now it plays


def finish(env: Env, face: str) -> int:
    """Play to the end of the episode; the number of turns it took."""
    for turn in itertools.count(1):
        *_, terminated, truncated, _ = step_either(env, "\\boxed{1}", face)
        if terminated or truncated:
            return turn
    raise AssertionError


@ENVS
@FACES
def test_a_step_after_the_episode_ended_raises_until_reset(make_env, face: str):
    env = make_env()
    reset_either(env, face)
    turns = finish(env, face)
    for _ in range(2):  # and keeps raising: nothing is played or paid
        expected = rf"episode ended at turn {turns}; call reset\(\) to start a new one"
        with pytest.raises(ResetNeeded, match=expected):
            step_either(env, "\\boxed{1}", face)
    reset_either(env, face)
    assert finish(env, face) == turns  # reset clears it


def test_a_step_after_truncation_alone_raises_too():
    env = Timer(limit=2)
    env.reset()
    env.step("a")
    assert env.step("b")[2:4] == (False, True)
    with pytest.raises(ResetNeeded, match="ended at turn 2"):
        env.step("c")


def test_single_turn_math_refuses_a_second_answer():
    env = math_env()
    env.reset(seed=0)
    assert env.step(f"\\boxed{{{env.answer}}}")[1] == 1.0
    with pytest.raises(ResetNeeded, match="ArithmeticEnv's episode ended at turn 1"):
        env.step(f"\\boxed{{{env.answer}}}")


def test_the_error_types_are_exported_and_typed():
    assert gem.ResetNeeded is ResetNeeded and issubclass(ResetNeeded, RuntimeError)
    assert gem.InvalidAction is InvalidAction and issubclass(InvalidAction, TypeError)


def snapshot(env: Env) -> str:
    """The env's state, comparable: its generator by the state it is in."""
    return repr({k: v.getstate() if isinstance(v, random.Random) else v for k, v in env.get_state().items()})


@ENVS
@FACES
@pytest.mark.parametrize("action", [42, None, ["\\boxed{1}"], b"\\boxed{1}"])
def test_a_non_string_action_is_refused_before_anything_changes(make_env, face: str, action: Any):
    env = make_env()
    reset_either(env, face)
    state = snapshot(env)
    expected = rf"actions are strings \(the model's text\); \w+ got {type(action).__name__} "
    with pytest.raises(InvalidAction, match=expected):
        step_either(env, action, face)
    assert snapshot(env) == state  # not a turn, not a format error
    step_either(env, "\\boxed{1}", face)


def test_nested_guards_count_one_turn_per_step():
    env = TwoGuards(length=2)
    env.reset()
    assert env.step("a")[4] == {"action": "A"}
    env.step("b")
    with pytest.raises(ResetNeeded, match="ended at turn 2;"):
        env.step("c")


def test_a_failed_reset_leaves_no_episode_to_step():
    class BrokenReset(CountdownEnv):
        def reset(self, seed: int | None = None, **kwargs: Any):
            super().reset(seed, **kwargs)
            raise RuntimeError("no board")

    env = BrokenReset()
    with pytest.raises(RuntimeError, match="no board"):
        env.reset()
    with pytest.raises(ResetNeeded, match="call reset"):
        env.step("a")


def test_the_lifecycle_is_part_of_the_state():
    env = CountdownEnv(length=2)
    env.reset(seed=0)
    env.step("a")
    midway = env.get_state()
    env.step("b")  # ended
    env.set_state(midway)
    assert env.step("b")[2] is True  # resumed where it was, not refused
    with pytest.raises(ResetNeeded, match="ended at turn 2;"):
        env.step("c")
    assert env.spawn().step("a")[0] == "left 1"  # a spawned env is reset, so playable


def test_a_wrapped_env_is_guarded_once_by_the_inner_env():
    env = EnvWrapper(EnvWrapper(CountdownEnv(length=2)))
    with pytest.raises(ResetNeeded, match="CountdownEnv has no episode running"):
        env.step("a")
    env.reset(seed=0)
    env.step("a")
    env.step("b")
    with pytest.raises(ResetNeeded, match="ended at turn 2;"):
        env.step("c")
    with pytest.raises(ResetNeeded):
        run_sync(env.astep, "c")
