"""The arithmetic math env: seeded problems, exact answers, GEM's single-turn rules, and a
real tool-using episode with the sandboxed Python tool."""

from __future__ import annotations

import re

import pytest
from gem_sandbox_envs.math import register_all
from gem_sandbox_envs.math.arithmetic import KINDS, TERMINAL_STATE, ArithmeticEnv
from gem_sandbox_envs.math.grading import answers_match

import gem_sandbox as gem
from gem_sandbox.core import ResetNeeded
from gem_sandbox.cli.demo import PROGRAMS, play, python_tool_user
from gem_sandbox.runtime import Runtime
from gem_sandbox.sync import close_default_runtime
from gem_sandbox.wrappers import get_wrapper_fns
from tests.tool_fixtures import anyio_backend, runtime  # noqa: F401  (fixtures)


def test_the_same_seed_gives_the_same_problem():
    first, _ = ArithmeticEnv().reset(seed=3)
    again, _ = ArithmeticEnv().reset(seed=3)
    others = {ArithmeticEnv().reset(seed=s)[0] for s in range(10)}
    assert first == again and len(others) == 10
    assert first.endswith("Put your final answer within \\boxed{}.")


def test_a_correct_boxed_answer_earns_one_and_ends_the_episode():
    env = ArithmeticEnv(seed=0)
    env.reset(seed=0)
    info = {"correct": True, "status": "ok"}
    assert env.step(f"so it is \\boxed{{{env.answer}}}") == (TERMINAL_STATE, 1.0, True, True, info)


@pytest.mark.parametrize(
    ("action", "status"),
    [("\\boxed{-1}", "ok"), ("the answer is 5", "format_error"), ("\\boxed{}", "format_error"), ("\\boxed{seven}", "ok")],
)
def test_anything_else_earns_zero(action: str, status: str):
    env = ArithmeticEnv(seed=0)
    env.reset(seed=0)
    assert env.step(action) == (TERMINAL_STATE, 0.0, True, True, {"correct": False, "status": status})


@pytest.mark.parametrize(
    ("given", "expected", "same"),
    [
        ("1,234", "1234", True),
        ("$1234$", "1234", True),
        ("1234.0", "1234", True),
        ("\\frac{2468}{2}", "1234", True),
        ("-\\dfrac{1}{2}", "-0.5", True),
        ("\\text{1234}.", "1234", True),
        ("0.333", "1/3", False),
        ("1235", "1234", False),
        (None, "1234", False),
    ],
)
def test_answers_are_compared_by_exact_value(given: str | None, expected: str, same: bool):
    assert answers_match(given, expected) is same


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kinds_answer_is_what_the_question_asks(kind: str):
    """Cross-check: the demo model's program for the question, run here, gives the answer."""
    env = ArithmeticEnv(kinds=[kind])
    for seed in range(5):
        question, _ = env.reset(seed=seed)
        pattern, template = next((p, t) for p, t in PROGRAMS if re.search(p, question))
        printed: list[str] = []
        exec(template.format(*re.search(pattern, question).groups()), {"print": printed.append})
        assert list(map(str, printed)) == [env.answer], question


def test_unknown_problem_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown problem kinds"):
        ArithmeticEnv(kinds=["calculus"])


def test_register_all_makes_the_id_and_is_idempotent():
    register_all()
    register_all()
    env = gem.make("math:Arithmetic-v0", seed=1)
    assert isinstance(env, ArithmeticEnv)


@pytest.mark.anyio
async def test_a_tool_using_episode_computes_then_answers(runtime: Runtime):
    env = ArithmeticEnv(seed=0)
    for fn in get_wrapper_fns("python_tool", runtime=runtime):
        env = fn(env)
    obs, _ = await env.areset(seed=4)
    policy = python_tool_user(obs)
    tool_obs, tool_reward, *_ , info = await env.astep(next(policy))
    final_obs, reward, terminated, truncated, _ = await env.astep(policy.send(tool_obs))
    assert info["use_tool"] and tool_obs.startswith("Code execution result: ")
    assert tool_reward == pytest.approx(0.30) and reward == 1.0 and terminated and truncated
    leases = runtime.statistics().leases
    with pytest.raises(ResetNeeded, match="ArithmeticEnv's episode ended at turn 1"):
        await env.astep("<python>print(1)</python>")  # a tool call past the end: not run, not paid
    assert runtime.statistics().leases == leases
    await env.aclose()


def test_the_demo_plays_a_tool_episode_on_the_process_default_runtime(capsys):
    env = ArithmeticEnv()
    for fn in get_wrapper_fns("python_tool"):
        env = fn(env)
    try:
        assert play(env, python_tool_user, seed=1) == pytest.approx(1.30)
    finally:
        env.close()
        close_default_runtime()
    assert "Code execution result: " in capsys.readouterr().out
