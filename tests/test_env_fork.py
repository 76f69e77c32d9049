"""Forking envs mid-episode: a stateful tool episode forks into eight envs that each go on
with the parent's kernel variables and files and diverge, on bubblewrap and Docker; plain envs
fork their state; a vector env steps a forked group on without a reset."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from gem_sandbox_envs.math.arithmetic import ArithmeticEnv

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.errors import ForkError
from gem_sandbox.tools.python_code_tool import PythonCodeTool
from gem_sandbox.tools.tool_env_wrapper import ToolEnvWrapper
from gem_sandbox.vector import AsyncVectorEnv
from tests.helpers import CountdownEnv
from tests.tool_fixtures import BACKENDS, anyio_backend, open_runtime  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=BACKENDS)
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    async with open_runtime(request.param, max_size=10, min_idle=2) as rt:
        yield rt


def stateful_math(runtime: Runtime) -> ToolEnvWrapper:
    return ToolEnvWrapper(ArithmeticEnv(seed=3), [PythonCodeTool(runtime=runtime, stateful=True)])


async def test_a_stateful_tool_episode_forks_into_eight_that_diverge(runtime: Runtime):
    parent = stateful_math(runtime)
    await parent.areset(seed=7)
    await parent.astep("<python>x = 41\nopen('trail.txt', 'w').write('parent') and None</python>")
    branches = await parent.afork(8)
    try:
        assert runtime.statistics().leased == 9
        for i, branch in enumerate(branches):
            assert branch.env.answer == parent.env.answer and branch.tool_use_counter == 1
            code = f"x += {i}\nprint(x, open('trail.txt').read())\nopen('trail.txt', 'w').write('b{i}') and None"
            obs, *_ = await branch.astep(f"<python>{code}</python>")
            assert obs == f"Code execution result: {41 + i} parent\n\n"
        for i, branch in enumerate(branches):  # each saw only its own changes
            obs, *_ = await branch.astep("<python>print(x, open('trail.txt').read())</python>")
            assert obs == f"Code execution result: {41 + i} b{i}\n\n"
        obs, *_ = await parent.astep("<python>print(x, open('trail.txt').read())</python>")
        assert obs == "Code execution result: 41 parent\n\n"
        answer = f"\\boxed{{{parent.env.answer}}}"
        results = [await env.astep(answer) for env in [parent, *branches]]
        assert {(reward, terminated) for _, reward, terminated, _, _ in results} == {(1.0, True)}
        assert runtime.statistics().leased == 0  # every episode's lease ended with it
    finally:
        for env in [parent, *branches]:
            await env.aclose()


async def test_a_fork_with_no_room_makes_no_env_and_keeps_the_parent(runtime: Runtime):
    parent = stateful_math(runtime)
    await parent.areset(seed=1)
    await parent.astep("<python>kept = 'yes'</python>")
    try:
        with pytest.raises(ForkError):
            await parent.afork(10)
        assert runtime.statistics().leased == 1
        obs, *_ = await parent.astep("<python>print(kept)</python>")
        assert obs == "Code execution result: yes\n\n"
    finally:
        await parent.aclose()


async def test_a_vector_env_steps_a_forked_group_on_without_a_reset(runtime: Runtime):
    parent = stateful_math(runtime)
    await parent.areset(seed=2)
    await parent.astep("<python>base = 100</python>")
    vec = AsyncVectorEnv(envs=await parent.afork(4))
    try:
        obs, *_ = await vec.astep([f"<python>print(base + {i})</python>" for i in range(4)])
        assert obs == [f"Code execution result: {100 + i}\n\n" for i in range(4)]
    finally:
        await vec.aclose()
        await parent.aclose()
    assert runtime.statistics().leased == 0


def test_an_env_without_sandboxes_forks_its_state():
    env = CountdownEnv(length=5, seed=0)
    env.reset(seed=4)
    env.step("a")
    copies = env.fork(3)
    assert [c.secret for c in copies] == [env.secret] * 3 and [c.remaining for c in copies] == [4] * 3
    copies[0].step("b")
    assert (copies[0].remaining, copies[1].remaining, env.remaining) == (3, 4, 4)
    with pytest.raises(ValueError):
        env.fork(0)


def test_blocking_code_forks_snapshots_and_restores_through_a_sync_runtime():
    from gem_sandbox.sandbox.backends.local import LocalBackend
    from gem_sandbox.sync import SyncRuntime

    if LocalBackend.check():
        pytest.skip(LocalBackend.check())
    with SyncRuntime("local", max_size=4, min_idle=1) as runtime:
        with runtime.lease() as sandbox:
            sandbox.kernel_exec("word = 'kept'")
            snapshot = sandbox.snapshot()
            branches = sandbox.fork(2)
        assert [b.kernel_exec("print(word)").stdout for b in branches] == ["kept\n"] * 2
        for branch in branches:
            runtime.release(branch)
        with runtime.restore(snapshot) as restored:
            assert restored.kernel_exec("print(word)").stdout == "kept\n"
        runtime.drop_snapshot(snapshot)
        assert runtime.statistics().leased == 0
