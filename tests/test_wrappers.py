"""Wrappers: the tool wrapper with a real tool, observation contexts, episode tracking, the
lifecycle through wrappers, and what closing a wrapper closes."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from gem_sandbox_envs.games import register_all as register_games

import gem_sandbox as gem
from gem_sandbox import InvalidAction, ResetNeeded
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sync import run_sync
from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.calculator import CalculatorTool, evaluate
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.wrappers import (
    EpisodeTrackingWrapper,
    ObservationWrapper,
    ToolEnvWrapper,
    get_wrapper_fns,
)
from gem_sandbox.tools.tool_env_wrapper import MAX_USES_MESSAGE
from tests.helpers import CountdownEnv
from tests.tool_fixtures import SPEC, make_backend


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
    assert obs == "left 2" and info["use_tool"] is True  # GEM's: every step says use_tool
    env = tool_env(use_tool_on_env_steps=False)
    env.reset(seed=0)
    assert env.step("just an answer")[4]["use_tool"] is False


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
    # GEM's roles: the env's own answer after a tool wrapper is a tool message too
    assert "<assistant><calculator>2+2</calculator><tool>Calculator result: 4\n<assistant>final<tool>left 2<assistant>" in obs


def test_concat_chat_can_give_the_envs_answers_the_user_role():
    inner = tool_env(use_tool_on_env_steps=False)
    env = ObservationWrapper(inner, include_action=True, include_chat_template=True, tokenizer=FakeTokenizer())
    env.reset(seed=0)
    env.step("<calculator>2+2</calculator>")
    obs, *_ = env.step("final")
    assert "<tool>Calculator result: 4\n<assistant>final<user>left 2<assistant>" in obs


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


# -- the lifecycle through the tool wrapper ---------------------------------------------------
def test_a_tool_call_after_the_episode_ended_raises_and_pays_nothing():
    env = tool_env(tool_reward=0.05, tool_success_reward=0.25)
    env.reset(seed=0)
    for action in ["a", "b", "c"]:
        *_, terminated, _, _ = env.step(action)
    assert terminated
    for action in ["<calculator>1+1</calculator>", "d"]:
        with pytest.raises(ResetNeeded, match="CountdownEnv's episode ended at turn 3; call reset"):
            env.step(action)
    assert (env.tool_use_counter, env.tool_success_counter) == (0, 0)  # nothing ran, nothing paid
    _, info = env.reset()
    assert info["prev_ep_tool_use_counter"] == 0
    assert env.step("<calculator>1+1</calculator>")[1] == pytest.approx(0.30)


def test_a_tool_call_before_reset_raises():
    env = tool_env(tool_reward=0.05)
    with pytest.raises(ResetNeeded, match=r"call reset\(\) first"):
        env.step("<calculator>1+1</calculator>")
    assert env.tool_use_counter == 0


@pytest.mark.anyio
async def test_the_async_face_of_the_tool_wrapper_is_guarded_too():
    env = tool_env()
    with pytest.raises(ResetNeeded):
        await env.astep("<calculator>1+1</calculator>")
    await env.areset(seed=0)
    with pytest.raises(InvalidAction):
        await env.astep(None)


@pytest.mark.parametrize("action", [42, None, {"tool": "calculator"}])
def test_a_non_string_action_is_refused_by_the_tool_wrapper_as_by_a_game(action):
    register_games()
    game = gem.make("game:GuessTheNumber-v0")
    tool_game = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0"), tools=[CalculatorTool()], tool_reward=0.05)
    errors = []
    for env in (game, tool_game):
        env.reset(seed=0)
        with pytest.raises(InvalidAction) as caught:
            env.step(action)
        errors.append(str(caught.value))
        assert env.unwrapped.turn_count == 0  # refused before any turn was taken
    assert errors[0] == errors[1]
    assert f"actions are strings (the model's text); GuessTheNumberEnv got {type(action).__name__}" in errors[0]
    assert tool_game.tool_use_counter == 0
    assert tool_game.step(r"\boxed{99}")[1] == 0.0  # and the episode goes on


def test_stacked_wrappers_count_each_turn_once():
    env = EpisodeTrackingWrapper(
        ObservationWrapper(tool_env(), include_action=True, include_chat_template=False)
    )
    env.reset(seed=0)
    for action in ["<calculator>1</calculator>", "a", "b", "c"]:
        *_, info = env.step(action)
    assert info["step_counter"] == 4
    with pytest.raises(ResetNeeded, match="ended at turn 3;"):  # the env's turns; the tool's step is not one
        env.step("d")
    assert env.step_counter == 4


# -- closing: what each wrapper owns, and the env once -----------------------------------------
class RecordingTool(Tool):
    """A tool that answers ``<echo>...</echo>`` and counts its closes; ``fails`` makes them raise."""

    name: ClassVar[str] = "echo"
    tool_type: ClassVar[str] = "echo"
    description: ClassVar[str] = "Echo the text back."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"text": {"type": "string"}}}

    def __init__(self, fails: bool = False) -> None:
        self.fails, self.closes = fails, 0

    def instruction_string(self) -> str:
        return "<echo>text</echo>"

    def parse(self, action: str) -> ToolCall | None:
        if not action.startswith("<echo>"):
            return None
        return ToolCall(self.name, {"text": action[6:]}, action, len(action))

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        return ToolOutput(call.arguments["text"])

    async def aclose(self) -> None:
        self.closes += 1
        if self.fails:
            raise RuntimeError(f"{self.name} cannot close")


class OtherRecordingTool(RecordingTool):
    name: ClassVar[str] = "other"  # tool names are unique within a wrapper


class ClosingEnv(CountdownEnv):
    """Counts its closes."""

    closes = 0

    def close(self) -> None:
        self.closes += 1


def test_closing_the_tool_wrapper_closes_its_tools_and_the_env():
    inner, tools = ClosingEnv(), [RecordingTool(), OtherRecordingTool()]
    env = ToolEnvWrapper(inner, tools=tools)
    env.reset(seed=0)
    env.close()
    assert [t.closes for t in tools] == [1, 1] and inner.closes == 1
    env.close()  # twice is fine: each close is safe to repeat
    assert [t.closes for t in tools] == [2, 2] and inner.closes == 2


@pytest.mark.anyio
async def test_a_tool_that_fails_to_close_stops_neither_the_others_nor_the_env():
    inner, tools = ClosingEnv(), [RecordingTool(fails=True), OtherRecordingTool()]
    with pytest.raises(RuntimeError, match="echo cannot close"):
        await ToolEnvWrapper(inner, tools=tools).aclose()
    assert [t.closes for t in tools] == [1, 1] and inner.closes == 1


@pytest.mark.parametrize("face", ["sync", "async"])
def test_every_wrapper_forwards_close_to_the_inner_env_exactly_once(face: str):
    inner, tool = ClosingEnv(), RecordingTool()
    env = EpisodeTrackingWrapper(
        ObservationWrapper(ToolEnvWrapper(inner, tools=[tool]), include_action=False, include_chat_template=False)
    )
    env.close() if face == "sync" else run_sync(env.aclose)
    assert (inner.closes, tool.closes) == (1, 1)


def test_the_factory_gives_each_env_a_tool_its_wrapper_owns():
    (wrap,) = get_wrapper_fns("calculator_tool")
    first, second = wrap(CountdownEnv()), wrap(CountdownEnv())
    assert first.tools[0] is not second.tools[0]  # closing one cannot close the other's


@pytest.mark.anyio
async def test_closing_releases_the_episodes_sandbox_with_a_real_python_tool():
    backend = make_backend("local")
    async with Runtime(backend, PoolConfig(min_idle=0, max_size=1, spec=SPEC)) as runtime:
        env = ToolEnvWrapper(CountdownEnv(), tools=[PythonCodeTool(runtime=runtime, stateful=True)])
        await env.areset(seed=0)
        obs, *_ = await env.astep("<python>x = 6 * 7\nprint(x)</python>")
        assert obs == "Code execution result: 42\n\n" and runtime.statistics().leased == 1
        await env.aclose()
        assert runtime.statistics().leased == 0 and len(env.episode) == 0
        await env.aclose()  # twice is fine
    await backend.aclose()
