"""Wrappers: the tool wrapper with a real tool, observation contexts, episode tracking."""

from __future__ import annotations

import pytest

from gem_sandbox.tools.calculator import CalculatorTool, evaluate
from gem_sandbox.wrappers import (
    EpisodeTrackingWrapper,
    ObservationWrapper,
    ToolEnvWrapper,
    get_wrapper_fns,
)
from gem_sandbox.wrappers.tool_env import MAX_USES_MESSAGE
from tests.helpers import CountdownEnv


class FakeTokenizer:
    """Renders chat messages the way a chat template would, visibly."""

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


def tool_env(**kwargs):
    return ToolEnvWrapper(CountdownEnv(length=3), tools=[CalculatorTool()], **kwargs)


def test_tool_call_is_answered_by_the_tool_and_rewarded():
    env = tool_env(tool_reward=0.05, tool_success_reward=0.25)
    obs, info = env.reset(seed=0)
    assert "<calculator>" in obs and info["use_tool"] is False
    obs, reward, terminated, truncated, info = env.step("think <calculator>6*7</calculator> then more")
    assert obs == "Calculator result: 42\n"
    assert reward == pytest.approx(0.30) and not terminated and not truncated
    assert info["parsed_action"] == "think <calculator>6*7</calculator>"
    assert info["tool_type"] == "calculator" and info["use_tool"] is True
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (1, 1)
    assert env.remaining == 3  # the env itself did not step


def test_failed_tool_call_earns_only_the_use_reward():
    env = tool_env(tool_reward=0.05, tool_success_reward=0.25)
    env.reset(seed=0)
    obs, reward, _, _, info = env.step("<calculator>1/0</calculator>")
    assert obs.startswith("Calculator error") and reward == pytest.approx(0.05)
    assert info["tool_success_counter"] == 0


def test_actions_without_tool_calls_step_the_env():
    env = tool_env()
    env.reset(seed=0)
    obs, _, _, _, info = env.step("just an answer")
    assert obs == "left 2" and info["use_tool"] is False


def test_max_tool_uses_adds_gems_message_then_passes_actions_to_the_env():
    env = tool_env(max_tool_uses=1)
    env.reset(seed=0)
    obs, *_ = env.step("<calculator>1+1</calculator>")
    assert obs == "Calculator result: 2\n" + MAX_USES_MESSAGE
    obs, *_ = env.step("<calculator>1+1</calculator>")
    assert obs == "left 2"


def test_reset_reports_previous_episode_tool_counters():
    env = tool_env()
    env.reset(seed=0)
    env.step("<calculator>1+1</calculator>")
    env.step("<calculator>2**</calculator>")
    _, info = env.reset()
    assert info["prev_ep_tool_use_counter"] == 2 and info["prev_ep_tool_success_counter"] == 1
    assert info["tool_use_counter"] == 0


def test_tool_state_round_trips():
    env = tool_env()
    env.reset(seed=0)
    env.step("<calculator>1</calculator>")
    state = env.get_state()
    env.step("<calculator>1</calculator>")
    env.set_state(state)
    assert env.tool_use_counter == 1


def test_calculator_refuses_anything_but_arithmetic():
    assert evaluate("(3 + 4) * 2 ** 3") == 56
    for bad in ["__import__('os')", "a + 1", "9 ** 9 ** 9", "[1]"]:
        with pytest.raises(ValueError):
            evaluate(bad)


def test_calculator_exports_an_openai_function_schema():
    schema = CalculatorTool().schema()
    assert schema["type"] == "function" and schema["function"]["name"] == "calculator"
    assert schema["function"]["parameters"]["required"] == ["expression"]


def test_concat_accumulates_observations():
    env = ObservationWrapper(CountdownEnv(length=3), include_action=False, include_chat_template=False)
    first, _ = env.reset(seed=0)
    obs, *_ = env.step("a")
    assert obs == f"{first}left 2\n"


def test_concat_with_action_interleaves_parsed_actions():
    env = ObservationWrapper(tool_env(), include_action=True, include_chat_template=False)
    env.reset(seed=0)
    obs, *_ = env.step("<calculator>2+2</calculator> trailing text")
    assert obs.endswith("<calculator>2+2</calculator>\nCalculator result: 4\n")
    assert "trailing text" not in obs


def test_concat_chat_gives_tool_answers_the_tool_role():
    env = ObservationWrapper(tool_env(), include_action=True, include_chat_template=True, tokenizer=FakeTokenizer())
    env.reset(seed=0)
    env.step("<calculator>2+2</calculator>")
    obs, *_ = env.step("final")
    assert obs.startswith("<user>start")
    assert "<assistant><calculator>2+2</calculator><tool>Calculator result: 4\n<assistant>final<user>left 2<assistant>" in obs


def test_chat_template_without_tokenizer_is_a_clear_error():
    with pytest.raises(ValueError, match="tokenizer"):
        ObservationWrapper(CountdownEnv())


def test_max_history_length_keeps_only_recent_turns():
    env = ObservationWrapper(CountdownEnv(length=9), include_action=True, include_chat_template=False, max_history_length=1)
    env.reset(seed=0)
    env.step("a")
    obs, *_ = env.step("b")
    assert obs == "left 8\nb\nleft 7\n"


def test_episode_tracking_counts_steps_and_rewards():
    env = EpisodeTrackingWrapper(CountdownEnv(length=2))
    env.reset(seed=0)
    env.step("a")
    _, _, _, _, info = env.step("b")
    assert info["step_counter"] == 2 and info["cumulative_rewards"] == 1.0
    _, info = env.reset()
    assert info["prev_ep_step_counter"] == 2 and info["prev_ep_cumulative_rewards"] == 1.0


def test_wrapper_factory_composes_gems_names():
    fns = get_wrapper_fns("calculator_tool,concat_chat,episode_tracking", tokenizer=FakeTokenizer())
    env = CountdownEnv()
    for fn in fns:
        env = fn(env)
    assert isinstance(env, EpisodeTrackingWrapper) and isinstance(env.env.env, ToolEnvWrapper)
    with pytest.raises(ValueError, match="tokenizer"):
        get_wrapper_fns("concat_chat")
    with pytest.raises(KeyError, match="unknown wrapper"):
        get_wrapper_fns("nope")
