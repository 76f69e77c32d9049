"""The sandboxed Python tool: GEM's formats, timeouts, state, output bounds, infra failures,
and how it finds its runtime."""

from __future__ import annotations

import time

import anyio
import pytest

import gem_sandbox
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sync import MissingRuntime, close_default_runtime
from gem_sandbox.tools.python_code_tool import GEM_INSTRUCTION, PythonCodeTool
from gem_sandbox.wrappers import ToolEnvWrapper
from tests.helpers import CountdownEnv
from tests.tool_fixtures import anyio_backend, runtime  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def gem_tool_class():
    return pytest.importorskip("gem.tools.python_code_tool", reason="gem-llm is not installed").PythonCodeTool


# -- parsing and strings (no sandbox) --------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "code", "parsed_action"),
    [
        ("a <python>print(1)</python> b", "print(1)", "a <python>print(1)</python>"),
        ("```python\nprint(2)\n``` then <python>print(1)</python>", "print(2)", "```python\nprint(2)\n```"),
        ("<python>print(1)</python> then ```python\nprint(2)\n```", "print(1)", "<python>print(1)</python>"),
        ("<python>\n  x = 1\n</python><python>y</python>", "x = 1", "<python>\n  x = 1\n</python>"),
    ],
)
def test_the_block_that_ends_first_is_the_call(action: str, code: str, parsed_action: str):
    call = PythonCodeTool().parse(action)
    assert call is not None
    assert (call.arguments["code"], call.parsed_action, call.end) == (code, parsed_action, len(parsed_action))


@pytest.mark.parametrize("action", ["no code here", "<python>print(1)", "```python\nprint(1)"])
def test_an_action_without_a_complete_block_is_no_call(action: str):
    assert PythonCodeTool().parse(action) is None


@pytest.mark.parametrize(
    "action",
    [
        "x <python>print(1)</python> y ```python\nprint(2)\n```",
        "```python\nprint(2)\n``` <python>print(1)</python>",
        "```\npython print(3)```",
        "nothing",
        "<python>unclosed ```python\nok\n```",
    ],
)
def test_parsing_agrees_with_gem(action: str):
    gem_code, gem_parsed, gem_valid = gem_tool_class()()._parse_action(action)
    call = PythonCodeTool().parse(action)
    assert (call is not None) == gem_valid
    if call is not None:
        assert (call.arguments["code"], call.parsed_action) == (gem_code, gem_parsed)


def test_instruction_string_is_gems_verbatim():
    assert PythonCodeTool().instruction_string() == gem_tool_class()().instruction_string() == GEM_INSTRUCTION
    assert "persistent" in PythonCodeTool(stateful=True).instruction_string()


def test_gems_positional_arguments_and_defaults():
    tool = PythonCodeTool(3, "bwrap", True)
    assert (tool.timeout, tool.sandbox_type, tool.keep_error_last_line, tool.runtime) == (3, "bwrap", True, None)
    default_tool = PythonCodeTool()
    assert (default_tool.timeout, default_tool.sandbox_type, default_tool.keep_error_last_line) == (5, "none", False)


def test_sandbox_type_takes_gems_values_and_names_the_runtime_for_anything_else():
    PythonCodeTool(sandbox_type="none"), PythonCodeTool(sandbox_type="bwrap")
    with pytest.raises(ValueError, match="unknown sandbox_type 'docker'.*runtime=Runtime"):
        PythonCodeTool(sandbox_type="docker")


def test_the_schema_is_an_openai_function():
    function = PythonCodeTool().schema()["function"]
    assert function["name"] == "python" and function["parameters"]["required"] == ["code"]


# -- runs ----------------------------------------------------------------------------------

GEM_FORMAT_PROGRAMS = [
    "print(1 + 1)",
    "print('out')\nimport sys\nprint('warn', file=sys.stderr)",
    "print('before')\nraise ValueError('bad value')",
    "pass",
    "print('\\n  indented after blank lines')",
]


@pytest.mark.parametrize("keep_error_last_line", [False, True])
async def test_observations_match_gems_byte_for_byte(runtime: Runtime, keep_error_last_line: bool):
    gem_tool = gem_tool_class()(keep_error_last_line=keep_error_last_line)
    ours = PythonCodeTool(keep_error_last_line=keep_error_last_line, runtime=runtime)
    for code in GEM_FORMAT_PROGRAMS:
        action = f"<python>{code}</python>"
        expected = await anyio.to_thread.run_sync(gem_tool.execute_action, action)  # GEM on the host
        assert await ours.aexecute_action(action) == expected, code


async def test_output_is_gems_code_execution_result(runtime: Runtime):
    output = await PythonCodeTool(runtime=runtime).aexecute(PythonCodeTool().parse("<python>print(6 * 7)</python>"))
    assert output.observation == "Code execution result: 42\n\n"
    assert not output.error and output.details["status"] == "ok"


async def test_the_timeout_is_applied(runtime: Runtime):
    tool = PythonCodeTool(timeout=1, runtime=runtime)
    started = time.monotonic()
    output = await tool.aexecute(tool.parse("<python>print('working', flush=True)\nwhile True: pass</python>"))
    assert time.monotonic() - started < 3
    # GEM's timeout answer: its message alone, what the program printed before is dropped
    assert output.observation == "Code execution result: Execution timed out after 1 seconds.\n"
    assert output.error and output.details["status"] == "timeout"


async def test_gems_standard_imports_rerun_in_the_sandbox(runtime: Runtime):
    tool = PythonCodeTool(runtime=runtime)
    output = await tool.aexecute(tool.parse("<python>import os\nprint(sqrt(16), os.getuid() != 0)</python>"))
    assert output.observation == "Code execution result: 4.0 True\n\n" and not output.error
    off = PythonCodeTool(runtime=runtime, standard_imports=False)
    output = await off.aexecute(off.parse("<python>print(sqrt(16))</python>"))
    assert output.observation.endswith("NameError: name 'sqrt' is not defined\n") and output.error


async def test_a_bare_ellipsis_is_gems_syntax_error(runtime: Runtime):
    tool = PythonCodeTool(runtime=runtime)
    assert await tool.aexecute_action("<python>...</python>") == (
        True,
        True,
        "Code execution result: SyntaxError: invalid syntax\n",
        "<python>...</python>",
    )


async def test_output_is_not_capped_by_default(runtime: Runtime):
    tool = PythonCodeTool(runtime=runtime)
    output = await tool.aexecute(tool.parse("<python>print('x' * 20000 + 'END')</python>"))
    assert output.observation == "Code execution result: " + "x" * 20000 + "END\n\n"


async def test_long_output_is_capped_with_a_visible_marker(runtime: Runtime):
    tool = PythonCodeTool(runtime=runtime, max_output_chars=200)
    output = await tool.aexecute(tool.parse("<python>print('x' * 5000 + 'END')</python>"))
    assert len(output.observation) < 300
    assert "characters truncated ..." in output.observation and output.observation.endswith("END\n\n")


async def test_stateless_blocks_share_nothing(runtime: Runtime):
    env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(runtime=runtime)])
    await env.areset(seed=0)
    await env.astep("<python>x = 41</python>")
    obs, *_ = await env.astep("<python>print(x + 1)</python>")
    # GEM's re-run with its standard imports fails too: line 1 of the code is line 37 then
    assert obs.endswith('line 37, in <module>\nNameError: name \'x\' is not defined\n')
    await env.aclose()


async def test_stateful_blocks_share_one_namespace_per_episode(runtime: Runtime):
    env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(runtime=runtime, stateful=True)])
    await env.areset(seed=0)
    await env.astep("<python>import math\nx = 41</python>")
    obs, *_ = await env.astep("<python>print(x + 1, math.pi > 3)</python>")
    assert obs == "Code execution result: 42 True\n\n"
    await env.areset()
    obs, *_ = await env.astep("<python>print(x)</python>")
    assert "NameError" in obs  # a new episode starts from an empty namespace
    await env.aclose()


async def test_the_stateful_timeout_is_applied_and_the_kernel_survives(runtime: Runtime):
    env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(timeout=1, runtime=runtime, stateful=True)])
    await env.areset(seed=0)
    await env.astep("<python>x = 7</python>")
    started = time.monotonic()
    obs, *_ = await env.astep("<python>import time\ntime.sleep(30)</python>")
    assert time.monotonic() - started < 3
    assert obs == "Code execution result: Execution timed out after 1 seconds.\n"
    obs, *_ = await env.astep("<python>print(x)</python>")
    assert obs == "Code execution result: 7\n\n"
    await env.aclose()


async def test_an_episode_whose_sandbox_died_continues_on_a_fresh_one(runtime: Runtime):
    env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(runtime=runtime, stateful=True)])
    await env.areset(seed=0)
    await env.astep("<python>x = 1</python>")
    sandbox = await env.episode.sandbox(runtime)
    await sandbox.box.kill()
    await anyio.sleep(0.1)
    obs, *_ = await env.astep("<python>print('fresh')</python>")
    assert obs == "Code execution result: fresh\n\n"
    await env.aclose()
    assert runtime.statistics().leased == 0


class UnlaunchableBackend(Backend):
    """Every launch fails, as when the Docker daemon is gone."""

    name = "unlaunchable"

    @classmethod
    def check(cls) -> str | None:
        return None

    async def launch(self, spec: SandboxSpec) -> Box:
        raise OSError("the daemon went away")


async def test_a_sandbox_failure_is_an_observation_that_trainers_can_mask():
    config = PoolConfig(min_idle=0, max_size=1, launch_attempts=1, acquire_timeout=5)
    async with Runtime(UnlaunchableBackend(), config) as broken:
        env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(runtime=broken)], tool_reward=0.05)
        await env.areset(seed=0)
        obs, reward, terminated, _, info = await env.astep("<python>print(1)</python>")
    assert obs.startswith("Code execution result: Sandbox failure, not an error in the code:")
    assert "the daemon went away" in obs
    assert info["tool_status"] == "infra_error" and info["tool_success_counter"] == 0
    assert reward == pytest.approx(0.05) and not terminated  # a use, not a success


# -- how a tool finds its runtime ------------------------------------------------------------


@pytest.fixture
def local_default_runtime(monkeypatch):
    monkeypatch.setattr(defaults, "_backend_name", None)
    monkeypatch.setattr(defaults, "_pool_config", None)
    gem_sandbox.configure(backend="local", min_idle=1, max_size=2)
    yield
    close_default_runtime()


def test_the_process_default_serves_sync_callers(local_default_runtime: None):
    tool = PythonCodeTool()
    assert tool.execute_action("<python>print(2 ** 10)</python>")[2] == "Code execution result: 1024\n\n"
    env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(stateful=True)])
    env.reset(seed=0)
    env.step("<python>y = 5</python>")
    assert env.step("<python>print(y)</python>")[0] == "Code execution result: 5\n\n"
    env.close()


async def test_async_callers_without_a_runtime_are_told_to_pass_one():
    with pytest.raises(MissingRuntime, match="pass runtime=runtime"):
        await PythonCodeTool().aexecute_action("<python>print(1)</python>")
