"""Vector envs: autoreset modes, subset stepping, isolation, seeding, scale."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
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


def test_a_step_over_the_timeout_is_truncated_without_stalling_the_batch():
    vec = AsyncVectorEnv([AsyncSleepEnv(delay=0), AsyncSleepEnv(delay=0)], step_timeout=0.2)
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
    start = time.perf_counter()
    vec.step(["a"] * 50)
    assert time.perf_counter() - start < 0.3 * 5  # serial stepping would take 15 s


def test_async_vector_env_of_a_thousand_envs_steps_in_one_loop():
    vec = AsyncVectorEnv([CountdownEnv(length=3) for _ in range(1000)])
    threads_before = threading.active_count()
    vec.reset(seed=0)
    for _ in range(3):
        _, rewards, terminated, _, _ = vec.step(["a"] * 1000)
    assert terminated.all() and rewards.sum() == 1000
    assert threading.active_count() <= threads_before + 1  # no thread per env
    vec.close()


# -- envs that record or misbehave, for the cases below ------------------------------------
class ThreadRecordingEnv(CountdownEnv):
    """Records the names of the threads its sync face is called in."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def reset(self, seed: int | None = None, **kwargs: Any):
        self.threads.add(threading.current_thread().name)
        return super().reset(seed, **kwargs)

    def step(self, action: Any):
        self.threads.add(threading.current_thread().name)
        return super().step(action)


class ErrorKeyEnv(CountdownEnv):
    """A one-step game whose reset info carries an ``error`` key of its own (say, the
    previous answer's mistake): a plain ``(obs, info)`` return, not a failed reset."""

    def reset(self, seed: int | None = None, **kwargs: Any):
        obs, info = super().reset(seed, **kwargs)
        return obs, {**info, "error": "the last answer was wrong"}


class TwoTupleStepEnv(CountdownEnv):
    """Breaks the contract: its step returns ``(obs, info)``."""

    def step(self, action: Any):
        return "obs", {}


class FailingCloseEnv(CountdownEnv):
    """Records whether it was closed; raises on close when ``fails``."""

    def __init__(self, fails: bool = False) -> None:
        super().__init__()
        self.fails, self.closed = fails, False

    def close(self) -> None:
        self.closed = True
        if self.fails:
            raise RuntimeError("cannot close")


class SlowAsyncCloseEnv(AsyncSleepEnv):
    """Closes only after a wait, so that a sibling failing first would cancel it."""

    closed = False

    async def aclose(self) -> None:
        await anyio.sleep(0.1)
        self.closed = True


@BOTH
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_a_reset_returning_an_error_key_in_its_info_is_not_a_failed_reset(cls, mode):
    vec = cls([ErrorKeyEnv(length=1)], autoreset_mode=mode)
    vec.reset()
    vec.step(["a"])  # ends the episode; SAME_STEP resets in this step, NEXT_STEP in the next
    if mode is AutoresetMode.NEXT_STEP:
        obs, _, terminated, _, infos = vec.step(["ignored"])
        assert obs[0].startswith("start") and terminated.tolist() == [False]
        assert infos[0]["error"] == "the last answer was wrong"
    obs, rewards, terminated, _, infos = vec.step(["b"])  # a real step, not a retried reset
    assert infos[0].get("final_obs", obs[0]) == "left 0"
    assert rewards.tolist() == [1.0] and terminated.tolist() == [True]


@BOTH
def test_a_step_returning_a_two_tuple_is_isolated_as_a_malformed_return(cls):
    vec = cls([TwoTupleStepEnv(), CountdownEnv()])
    vec.reset()
    obs, _, terminated, _, infos = vec.step(["a", "b"])
    assert infos[0]["error"] == (
        "TypeError: step returned ('obs', {}), not (obs, reward, terminated, truncated, info)"
    )
    assert terminated.tolist() == [True, False] and obs[1] == "left 2"


@BOTH
def test_a_failing_close_does_not_stop_the_others_from_closing(cls):
    envs = [FailingCloseEnv(), FailingCloseEnv(fails=True), FailingCloseEnv(), FailingCloseEnv(fails=True)]
    vec = cls(envs, env_ids=["a", "b", "c", "d"])
    with pytest.raises(ExceptionGroup, match=r"2 of 4 envs failed to close: env 1 \(b\), env 3 \(d\)") as caught:
        vec.close()
    assert [e.closed for e in envs] == [True] * 4
    assert [str(e) for e in caught.value.exceptions] == ["cannot close"] * 2


def test_a_failing_aclose_does_not_cancel_the_others():
    slow = [SlowAsyncCloseEnv(), SlowAsyncCloseEnv()]
    vec = AsyncVectorEnv([slow[0], FailingCloseEnv(fails=True), slow[1]])
    with pytest.raises(ExceptionGroup, match="1 of 3 envs failed to close: env 1"):
        vec.close()
    assert [e.closed for e in slow] == [True, True]


def test_sync_vector_env_steps_sync_envs_in_the_callers_thread():
    threads_before = {t.name for t in threading.enumerate()}
    envs = [ThreadRecordingEnv(), ThreadRecordingEnv()]
    vec = SyncVectorEnv(envs)
    vec.reset()
    vec.step(["x", "y"])
    vec.close()
    assert all(env.threads == {threading.current_thread().name} for env in envs)
    assert {t.name for t in threading.enumerate()} <= threads_before  # no loop thread started


def test_sync_vector_env_steps_async_native_envs_through_their_sync_face():
    vec = SyncVectorEnv([AsyncSleepEnv(delay=0), CountdownEnv()])
    vec.reset()
    obs, *_ = vec.step(["x", "y"])
    assert obs == ["echo x", "left 2"]


class OwnTimeoutEnv(AsyncSleepEnv):
    """Its step raises a TimeoutError of its own (say, from a client library), at once."""

    async def astep(self, action: Any):
        raise TimeoutError("the upstream API timed out")


def test_an_envs_own_timeout_error_is_an_exception_not_the_step_timeout():
    vec = AsyncVectorEnv([OwnTimeoutEnv()], step_timeout=5)
    vec.reset()
    _, _, terminated, truncated, infos = vec.step(["x"])
    assert infos[0]["error_type"] == "exception" and "the upstream API timed out" in infos[0]["error"]
    assert terminated.tolist() == [True] and truncated.tolist() == [False]


def test_sync_vector_env_rejects_a_step_timeout():
    with pytest.raises(ValueError, match="SyncVectorEnv cannot apply step_timeout.*AsyncVectorEnv"):
        SyncVectorEnv([CountdownEnv()], step_timeout=1.0)


class FlakyResetEnv(CountdownEnv):
    """Its first ``reset`` raises; the later ones succeed."""

    def reset(self, seed: int | None = None, **kwargs: Any):
        if not self.resets:
            self.resets += 1
            raise RuntimeError("no reset")
        return super().reset(seed, **kwargs)


@BOTH
def test_a_failed_reset_is_retried_on_the_next_step(cls):
    vec = cls([FlakyResetEnv(length=1)])
    _, infos = vec.reset()
    assert "RuntimeError: no reset" in infos[0]["error"]
    obs, rewards, terminated, _, _ = vec.step(["ignored"])
    assert obs[0].startswith("start") and terminated.tolist() == [False]
