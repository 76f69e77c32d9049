"""Tool episodes on sandboxes: lazy per-episode leases and their release, many episodes at
once through AsyncVectorEnv, and GEM's ``python_tool`` factory names."""

from __future__ import annotations

import time

import pytest
from gem_sandbox_envs.math.arithmetic import ArithmeticEnv

from gem_sandbox.runtime import Runtime
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.tools.tool_env_wrapper import MAX_USES_MESSAGE, ToolEnvWrapper
from gem_sandbox.vector import AsyncVectorEnv
from gem_sandbox.wrappers import get_wrapper_fns
from tests.helpers import CountdownEnv
from tests.tool_fixtures import anyio_backend, runtime  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


def stateful_math(runtime: Runtime, seed: int = 0) -> ToolEnvWrapper:
    return ToolEnvWrapper(ArithmeticEnv(seed=seed), [PythonCodeTool(runtime=runtime, stateful=True)])


# -- per-episode leases ----------------------------------------------------------------------


async def test_a_sandbox_is_leased_on_the_first_stateful_call_only(runtime: Runtime):
    env = stateful_math(runtime)
    await env.areset(seed=0)
    assert runtime.statistics().leased == 0
    await env.astep("<python>x = 1</python>")
    await env.astep("<python>x += 1</python>")
    assert runtime.statistics().leased == 1 and len(env.episode) == 1
    await env.aclose()


async def test_the_lease_ends_with_the_episode(runtime: Runtime):
    env = stateful_math(runtime)
    await env.areset(seed=0)
    await env.astep("<python>x = 1</python>")
    *_, terminated, truncated, _ = await env.astep("\\boxed{0}")
    assert terminated and truncated
    assert runtime.statistics().leased == 0 and len(env.episode) == 0


async def test_reset_and_close_release_the_lease(runtime: Runtime):
    env = stateful_math(runtime)
    await env.areset(seed=0)
    await env.astep("<python>x = 1</python>")
    await env.areset()
    assert runtime.statistics().leased == 0
    await env.astep("<python>x = 1</python>")
    await env.aclose()
    assert runtime.statistics().leased == 0


async def test_stateless_calls_hold_no_lease_between_steps(runtime: Runtime):
    env = ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(runtime=runtime)])
    await env.areset(seed=0)
    leases = runtime.statistics().leases
    await env.astep("<python>print(1)</python>")
    assert runtime.statistics().leased == 0 and runtime.statistics().leases == leases + 1


async def test_a_spawned_env_leases_its_own_sandbox(runtime: Runtime):
    env = stateful_math(runtime)
    await env.areset(seed=0)
    await env.astep("<python>x = 'parent'</python>")
    child = env.spawn(same_state=True)
    obs, *_ = await child.astep("<python>print(x)</python>")
    assert "NameError" in obs and runtime.statistics().leased == 2
    await child.aclose()
    await env.aclose()
    assert runtime.statistics().leased == 0


# -- many episodes at once -------------------------------------------------------------------


async def test_tool_calls_of_many_episodes_run_concurrently(runtime: Runtime):
    envs = [ToolEnvWrapper(CountdownEnv(length=9), [PythonCodeTool(runtime=runtime)]) for _ in range(16)]
    vec = AsyncVectorEnv(envs)
    await vec.areset(seed=0)
    actions = [f"<python>import time\ntime.sleep(0.4)\nprint({i})</python>" for i in range(16)]
    started = time.monotonic()
    obs, rewards, *_ = await vec.astep(actions)
    elapsed = time.monotonic() - started
    assert obs == [f"Code execution result: {i}\n\n" for i in range(16)]
    assert elapsed < 16 * 0.4 / 2  # at least 2 at a time; the pool of 4 allows 4
    await vec.aclose()
    assert runtime.statistics().leased == 0


async def test_concurrent_stateful_episodes_keep_separate_namespaces(runtime: Runtime):
    vec = AsyncVectorEnv([stateful_math(runtime, seed=i) for i in range(4)])  # max_size 4: one each
    await vec.areset(seed=0)
    await vec.astep([f"<python>mine = {i}</python>" for i in range(4)])
    assert runtime.statistics().leased == 4
    obs, *_ = await vec.astep(["<python>print(mine)</python>"] * 4)
    assert obs == [f"Code execution result: {i}\n\n" for i in range(4)]
    _, _, terminated, _, _ = await vec.astep(["\\boxed{0}"] * 4)  # ends (and autoresets) each
    assert terminated.all() and runtime.statistics().leased == 0
    await vec.aclose()


# -- GEM's factory names ---------------------------------------------------------------------


def wrapped(names: str, runtime: Runtime) -> ToolEnvWrapper:
    env = CountdownEnv(length=9)
    for fn in get_wrapper_fns(names, runtime=runtime):
        env = fn(env)
    return env


async def test_python_tool_rewards_uses_and_successes_and_stops_at_five(runtime: Runtime):
    env = wrapped("python_tool", runtime)
    obs, info = await env.areset(seed=0)
    assert obs.endswith(PythonCodeTool().instruction_string())
    _, reward, *_ = await env.astep("<python>print(1)</python>")
    assert reward == pytest.approx(0.30)
    _, reward, *_ = await env.astep("<python>1/0</python>")
    assert reward == pytest.approx(0.05)
    for _ in range(3):
        obs, *_, info = await env.astep("<python>print(1)</python>")
    assert obs == "Code execution result: 1\n\n" + MAX_USES_MESSAGE
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (5, 4)
    obs, reward, *_ = await env.astep("<python>print(1)</python>")  # past the limit: the env's
    assert obs == "left 8" and reward == 0.0


@pytest.mark.parametrize("name", ["python_tool_no_int_reward", "python_tool_no_int_reward_last_line_error"])
async def test_no_int_reward_variants_give_no_tool_reward(runtime: Runtime, name: str):
    env = wrapped(name, runtime)
    await env.areset(seed=0)
    obs, reward, *_ = await env.astep("<python>print('partial')\n1/0</python>")
    assert reward == 0.0
    last_line_only = name.endswith("last_line_error")
    assert (obs == "Code execution result: partial\n\nZeroDivisionError: division by zero\n") == last_line_only
    assert ("Traceback" in obs) != last_line_only


async def test_the_factorys_runtime_reaches_tools_through_a_vector_env(runtime: Runtime):
    vec = AsyncVectorEnv([wrapped("python_tool", runtime) for _ in range(3)])
    leases = runtime.statistics().leases
    await vec.areset(seed=0)
    obs, *_ = await vec.astep(["<python>print('hi')</python>"] * 3)
    assert obs == ["Code execution result: hi\n\n"] * 3 and runtime.statistics().leases == leases + 3
