"""JSON tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` for every tool,
an extension the tool wrapper turns on with ``json_tool_calls=True`` (GEM has none)."""

from __future__ import annotations

import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.tools.calculator import CalculatorTool
from gem_sandbox.tools.parsing import ToolCallError, find_call
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.tools.shell import ShellTool
from gem_sandbox.tools.tool_env_wrapper import INVALID_CALL_TYPE, ToolEnvWrapper
from tests.helpers import CountdownEnv
from tests.tool_fixtures import anyio_backend, runtime  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio

TOOLS = [CalculatorTool(), PythonCodeTool()]
CALCULATE = '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>'


def calculator_env(**options) -> ToolEnvWrapper:
    return ToolEnvWrapper(
        CountdownEnv(length=3), [CalculatorTool()], tool_reward=0.05, tool_success_reward=0.25, **options
    )


def test_a_json_call_names_its_tool_and_arguments():
    action = 'ok <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call> rest'
    call = find_call(action, TOOLS)
    assert call is not None and not isinstance(call, ToolCallError)
    assert (call.tool, call.arguments) == ("python", {"code": "print(1)"})
    assert call.parsed_action == action.removesuffix(" rest")


def test_arguments_encoded_as_a_string_are_accepted():
    action = '<tool_call>{"name": "calculator", "arguments": "{\\"expression\\": \\"2+3\\"}"}</tool_call>'
    call = find_call(action, TOOLS)
    assert call is not None and not isinstance(call, ToolCallError)
    assert call.arguments == {"expression": "2+3"}


@pytest.mark.parametrize(
    ("action", "first"),
    [
        (f"{CALCULATE} <python>2</python>", "calculator"),
        (f"<python>2</python> {CALCULATE}", "python"),
        ("<calculator>1</calculator> ```python\n2\n```", "calculator"),
        ('<tool_call>{"name": "nope"}</tool_call> <calculator>1</calculator>', None),
    ],
)
def test_the_earliest_complete_call_wins_across_formats(action: str, first: str | None):
    call = find_call(action, TOOLS)
    assert (call.tool if not isinstance(call, ToolCallError) else None) == first


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"name": "nope", "arguments": {}}', "unknown tool 'nope'; available tools: calculator, python"),
        ('{"name": "calculator", "arguments": {"expression": "1"}', "not valid JSON"),
        ('["calculator"]', 'a tool call is a JSON object {"name": ..., "arguments": {...}}'),
        ('{"name": "calculator", "arguments": {}}', "needs the argument(s) expression"),
        ('{"name": "calculator", "arguments": [1]}', "must be a JSON object"),
        ('{"name": "calculator", "arguments": {"expression": 7}}', "expression of 'calculator' must be strings"),
    ],
)
def test_unusable_calls_are_errors_that_say_why(payload: str, message: str):
    call = find_call(f"<tool_call>{payload}</tool_call>", TOOLS)
    assert isinstance(call, ToolCallError) and message in call.message


async def test_a_json_call_runs_the_tool_it_names(runtime: Runtime):
    tools = [ShellTool(runtime=runtime), PythonCodeTool(runtime=runtime)]
    env = ToolEnvWrapper(CountdownEnv(length=3), tools, json_tool_calls=True)
    await env.areset(seed=0)
    call = '<tool_call>{"name": "python", "arguments": {"code": "print(6*7)"}}</tool_call>'
    obs, _, _, _, info = await env.astep(call)
    assert obs == "Code execution result: 42\n\n" and info["tool_type"] == "python_code"
    obs, *_ = await env.astep('<tool_call>{"name": "bash", "arguments": {"command": "echo hi"}}</tool_call>')
    assert obs == "Shell result (exit code 0):\nhi\n"
    await env.aclose()


@pytest.mark.parametrize(
    "action",
    [
        '\\boxed{1} <tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>',
        "\\boxed{1} <tool_call>{not json}</tool_call>",
    ],
)
def test_a_bad_call_is_a_failed_tool_use_never_a_final_answer(action: str):
    env = calculator_env(json_tool_calls=True)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs.startswith("Tool call error: ")
    assert reward == pytest.approx(0.05) and not terminated and not truncated
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (1, 0)
    assert info["tool_type"] == INVALID_CALL_TYPE and info["use_tool"] is True
    assert env.remaining == 3  # the env never saw the action


def test_the_wrapper_exports_every_tools_schema():
    env = ToolEnvWrapper(CountdownEnv(), [CalculatorTool(), PythonCodeTool(), ShellTool()])
    assert [s["function"]["name"] for s in env.tool_schemas()] == ["calculator", "python", "bash"]


def test_json_calls_are_off_by_default_so_the_env_scores_the_text():
    env = calculator_env()
    env.reset(seed=0)
    action = '\\boxed{1} <tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>'
    obs, reward, terminated, _, info = env.step(action)
    assert (obs, reward, terminated) == ("left 2", 0.0, False)  # GEM's: the env got the action
    assert info["use_tool"] is True and "tool_type" not in info
    assert env.remaining == 2


@pytest.mark.parametrize(
    ("earliest", "answered_by"),
    [(False, "Calculator result: 2\n"), (True, "Tool call error: ")],
)
def test_a_json_call_competes_with_the_tools_own_format(earliest: bool, answered_by: str):
    env = calculator_env(json_tool_calls=True, earliest_call_wins=earliest)
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "nope"}</tool_call> <calculator>1+1</calculator>')
    assert obs.startswith(answered_by)


def test_tool_names_must_be_unique_for_json_calls():
    with pytest.raises(ValueError, match="unique"):
        ToolEnvWrapper(CountdownEnv(), [PythonCodeTool(), PythonCodeTool(stateful=True)], json_tool_calls=True)
    ToolEnvWrapper(CountdownEnv(), [PythonCodeTool(), PythonCodeTool(stateful=True)])  # GEM allows it


def test_the_factory_passes_the_opt_in_on():
    from gem_sandbox.wrappers import get_wrapper_fns

    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
    for options, expected in [(None, "left 2"), ({"json_tool_calls": True}, "Calculator result: 42\n")]:
        env = get_wrapper_fns("calculator_tool", tool_options=options)[0](CountdownEnv(length=3))
        env.reset(seed=0)
        assert env.step(call)[0] == expected
