"""The shell tool: one persistent bash session per episode, exit codes, timeouts."""

from __future__ import annotations

import time

import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.tools.shell import ShellTool
from gem_sandbox.wrappers import ToolEnvWrapper
from tests.helpers import CountdownEnv
from tests.tool_fixtures import anyio_backend, runtime  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def shell_env(runtime: Runtime, **kwargs) -> ToolEnvWrapper:
    return ToolEnvWrapper(CountdownEnv(length=9), [ShellTool(runtime=runtime, **kwargs)])


def test_the_call_is_the_first_bash_block():
    call = ShellTool().parse("first <bash>\nls -l\n</bash> then <bash>pwd</bash>")
    assert call is not None
    assert call.arguments == {"command": "ls -l"} and call.parsed_action == "first <bash>\nls -l\n</bash>"
    assert ShellTool().parse("<bash>unclosed") is None


async def test_cd_and_exports_persist_within_an_episode(runtime: Runtime):
    env = shell_env(runtime)
    await env.areset(seed=0)
    obs, *_ = await env.astep("<bash>mkdir -p project && cd project && export GREETING=hello</bash>")
    assert obs == "Shell result (exit code 0):\n"
    obs, *_ = await env.astep("<bash>pwd; echo $GREETING</bash>")
    directory, greeting = obs.removeprefix("Shell result (exit code 0):\n").splitlines()
    assert directory.endswith("/project") and greeting == "hello"
    await env.aclose()


async def test_a_new_episode_gets_a_fresh_session(runtime: Runtime):
    env = shell_env(runtime)
    await env.areset(seed=0)
    await env.astep("<bash>export GREETING=hello; touch mark</bash>")
    await env.areset()
    obs, *_ = await env.astep("<bash>echo ${GREETING:-unset}; ls</bash>")
    assert obs == "Shell result (exit code 0):\nunset\n"
    await env.aclose()


async def test_the_observation_shows_output_and_the_exit_code(runtime: Runtime):
    env = shell_env(runtime)
    await env.areset(seed=0)
    obs, _, _, _, info = await env.astep("<bash>echo out; echo err >&2; false</bash>")
    assert obs == "Shell result (exit code 1):\nout\nerr\n"
    assert info["tool_success_counter"] == 0 and info["tool_type"] == "shell"
    await env.aclose()


async def test_the_timeout_is_applied_and_the_session_survives(runtime: Runtime):
    env = shell_env(runtime, timeout=1)
    await env.areset(seed=0)
    await env.astep("<bash>export KEPT=yes</bash>")
    started = time.monotonic()
    obs, *_ = await env.astep("<bash>sleep 30</bash>")
    assert time.monotonic() - started < 3
    assert obs.startswith("Shell result (timed out):\n") and obs.endswith("Execution timed out after 1 seconds.\n")
    obs, *_ = await env.astep("<bash>echo $KEPT</bash>")
    assert obs == "Shell result (exit code 0):\nyes\n"
    await env.aclose()


async def test_shell_and_stateful_python_share_the_episodes_sandbox(runtime: Runtime):
    env = ToolEnvWrapper(CountdownEnv(length=9), [ShellTool(runtime=runtime), PythonCodeTool(runtime=runtime, stateful=True)])
    await env.areset(seed=0)
    await env.astep("<bash>echo 42 > answer.txt</bash>")
    obs, *_ = await env.astep("<python>print(open('answer.txt').read().strip())</python>")
    assert obs == "Code execution result: 42\n\n"
    assert runtime.statistics().leased == 1
    await env.aclose()
    assert runtime.statistics().leased == 0
