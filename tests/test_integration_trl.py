"""GRPO reward functions on scored envs, called as TRL 1.x's GRPOTrainer calls them
(``prompts=, completions=, completion_ids=``, the dataset's other columns, ``trainer_state``,
``log_extra``, ``log_metric``), with code run in real bubblewrap sandboxes. The trainer itself
drives them in tests/test_train_trl_grpo.py."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("datasets", reason="gem_sandbox.integrations.trl builds a datasets.Dataset")

from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.integrations.trl import (
    completion_text,
    dataset,
    python_tool_reward,
    reward_function,
)
from gem_sandbox.registry import UnknownEnvError
from gem_sandbox.runtime import Runtime
from gem_sandbox.sync import SyncRuntime

CODE = "code:CodeContest"
SUM_PY = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


@pytest.fixture(scope="module")
def runtime():
    with SyncRuntime("local", max_size=4) as runtime:
        yield runtime


def call_as_trl(reward, completions: list[Any], env_id: list[str], seed: list[int]) -> list[float | None]:
    """The keywords TRL 1.16's GRPOTrainer._calculate_rewards passes a custom reward function."""
    return reward(
        prompts=["p"] * len(completions),
        completions=completions,
        completion_ids=[[0]] * len(completions),
        env_id=env_id,
        seed=seed,
        trainer_state=object(),
        log_extra=lambda *a, **k: None,
        log_metric=lambda *a, **k: None,
    )


def sum_seed(scorer: Scorer) -> int:
    return next(r["seed"] for r in scorer.rows(50) if r["prompt"].startswith("Sum of Two Integers"))


def test_each_completion_earns_its_env_score_and_other_envs_rows_get_none(runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, runtime=runtime, sample=True)
    seed = sum_seed(scorer)
    reward = reward_function(scorer)
    rewards = call_as_trl(reward, [SUM_PY, "```python\nprint(0)\n```", "x"], [CODE, CODE, "math:Arithmetic-v0"], [seed] * 3)
    assert rewards == [1.0, 0.0, None]
    assert reward.__name__ == "gem:code:CodeContest"  # TRL logs rewards/<__name__>/mean


def test_conversational_completions_are_scored_by_the_last_assistant_message(runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, runtime=runtime, sample=True)
    chat = [{"role": "assistant", "content": "thinking"}, {"role": "assistant", "content": SUM_PY}]
    assert call_as_trl(reward_function(scorer), [chat], [CODE], [sum_seed(scorer)]) == [1.0]


def test_a_completion_without_code_earns_the_format_penalty(runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, runtime=runtime, sample=True)
    assert call_as_trl(reward_function(scorer), ["no code here"], [CODE], [0]) == [-0.1]


def test_a_completion_that_hangs_earns_zero(runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, runtime=runtime, sample=True, timeout=1.0)
    reward = reward_function(scorer)
    assert call_as_trl(reward, ["```python\nwhile True:\n    pass\n```"], [CODE], [0]) == [0.0]
    [[(_, _, scored)]] = reward.history
    assert scored.status == "timeout"


def test_an_infra_error_is_masked_as_none() -> None:
    with SyncRuntime("local", max_size=1, min_idle=0, acquire_timeout=2.0) as starved:
        scorer = Scorer(CODE, runtime=starved, sample=True)
        held = starved.lease(timeout=60)
        held.__enter__()  # the only sandbox is taken: scoring cannot get one
        try:
            rewards = call_as_trl(reward_function(scorer), [SUM_PY], [CODE], [sum_seed(scorer)])
        finally:
            held.__exit__(None, None, None)
    assert rewards == [None]


def test_the_python_tool_reward_is_the_tool_steps_reward(runtime: SyncRuntime) -> None:
    env = "math:Arithmetic-v0"
    reward = python_tool_reward(env, runtime=runtime)
    runs = ["```python\nprint(6 * 7)\n```", "```python\nprint(undefined)\n```", "no tool call"]
    assert call_as_trl(reward, runs, [env] * 3, [0] * 3) == [0.3, 0.05, 0.0]  # GEM: 0.05 a use, +0.25 a success
    assert [s.info["tool_use_counter"] for _, _, s in reward.history[0]] == [1, 1, 0]


def test_missing_columns_are_a_clear_error(runtime: SyncRuntime) -> None:
    reward = reward_function(Scorer(CODE, runtime=runtime, sample=True))
    with pytest.raises(ValueError, match="env_id and seed columns"):
        call_as_trl(reward, [SUM_PY, SUM_PY], [CODE], [0])


def test_an_unknown_env_id_is_refused_before_training() -> None:
    with pytest.raises(UnknownEnvError):
        python_tool_reward("code:NoSuchEnv")


def test_an_async_runtime_is_refused() -> None:
    with pytest.raises(TypeError, match="SyncRuntime"):
        reward_function(Scorer(CODE, runtime=Runtime("local"), sample=True))


def test_the_dataset_holds_prompt_env_id_and_seed_per_env() -> None:
    code, tool = Scorer(CODE, sample=True), Scorer("math:Arithmetic-v0", wrappers="python_tool")
    rows = dataset([code, tool], 2, seed=4)
    assert rows.column_names == ["prompt", "env_id", "seed"]
    assert rows["env_id"] == [CODE, CODE, "math:Arithmetic-v0", "math:Arithmetic-v0"]
    assert rows["seed"] == [4, 5, 4, 5]
    assert rows["prompt"][0] == code.rows(1, seed=4)[0]["prompt"]


def test_a_conversational_dataset_wraps_each_prompt_as_a_user_message() -> None:
    rows = dataset(Scorer(CODE, sample=True), 1, conversational=True, prompt=lambda p: p + "\n```python\n")
    [message] = rows["prompt"][0]
    assert message["role"] == "user" and message["content"].endswith("```python\n")


def test_completion_text_refuses_a_chat_without_an_assistant_message() -> None:
    with pytest.raises(ValueError, match="assistant"):
        completion_text([{"role": "user", "content": "hi"}])
