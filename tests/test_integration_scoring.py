"""The shared scoring API: a completion scored on the task its seed picks, in a real sandbox
(bubblewrap) for code, by math-verify for math; results in the pairs' order; failures of the
infrastructure told apart from wrong answers."""

from __future__ import annotations

import pytest

from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.registry import UnknownEnvError
from gem_sandbox.runtime import Runtime
from gem_sandbox.sync import SyncRuntime

CODE = "code:CodeContest"  # with sample=True: the shipped stdin/stdout sample
SUM_PY = "a, b = map(int, input().split())\nprint(a + b)"
WRONG_PY = "print(0)"


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def seed_of(scorer: Scorer, title: str) -> int:
    """A seed whose prompt is the sample task called ``title``."""
    return next(row["seed"] for row in scorer.rows(50) if row["prompt"].startswith(title))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def sync_runtime():
    with SyncRuntime("local", max_size=4) as runtime:
        yield runtime


def test_rows_hold_the_first_observation_the_env_id_and_the_seed() -> None:
    scorer = Scorer(CODE, sample=True)
    rows = scorer.rows(3, seed=5)
    assert [row["seed"] for row in rows] == [5, 6, 7]
    assert {row["env_id"] for row in rows} == {CODE}
    env = scorer.make_env()
    assert rows[1]["prompt"] == env.reset(seed=6)[0]


def test_a_correct_program_scores_one_and_a_wrong_one_zero(sync_runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, sample=True, runtime=sync_runtime)
    seed = seed_of(scorer, "Sum of Two Integers")
    right, wrong = scorer.score_many([(fenced(SUM_PY), seed), (fenced(WRONG_PY), seed)])
    assert (right.reward, right.status) == (1.0, "ok")
    assert (wrong.reward, wrong.status) == (0.0, "wrong_answer")
    assert right.info["passed"] == right.info["total"] > 0


def test_a_code_score_runs_in_a_sandbox(sync_runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, sample=True, runtime=sync_runtime)
    before = sync_runtime.statistics().leases
    scorer.score_many([(fenced(SUM_PY), seed_of(scorer, "Sum of Two Integers"))])
    assert sync_runtime.statistics().leases > before


def test_a_completion_without_code_is_a_format_error_not_a_crash(sync_runtime: SyncRuntime) -> None:
    [scored] = Scorer(CODE, sample=True, runtime=sync_runtime).score_many([("I do not know.", 0)])
    assert scored.status == "format_error"
    assert scored.reward < 0


def test_a_program_that_hangs_scores_zero_as_a_timeout(sync_runtime: SyncRuntime) -> None:
    scorer = Scorer(CODE, sample=True, runtime=sync_runtime, timeout=1.0)
    [scored] = scorer.score_many([(fenced("while True:\n    pass"), 0)])
    assert (scored.reward, scored.status) == (0.0, "timeout")


def test_a_math_answer_is_scored_by_its_boxed_value() -> None:
    scorer = Scorer("math:Arithmetic-v0")
    env = scorer.make_env()
    env.reset(seed=3)
    answer = env.unwrapped.answer  # the value this task's answer is checked against
    right, wrong = scorer.score_many([(f"\\boxed{{{answer}}}", 3), ("\\boxed{not a number}", 3)])
    assert right.reward == 1.0 and right.info["correct"] is True
    assert wrong.reward == 0.0 and wrong.info["correct"] is False


@pytest.mark.anyio
async def test_many_scores_keep_the_pairs_order_under_concurrency() -> None:
    async with Runtime("local", max_size=3) as runtime:
        scorer = Scorer(CODE, sample=True, runtime=runtime)
        seed = seed_of(scorer, "Sum of Two Integers")
        # the slow right answers come first, so finishing order differs from submission order
        slow = fenced("import time\ntime.sleep(0.3)\n" + SUM_PY)
        pairs = [(slow, seed), (fenced(WRONG_PY), seed)] * 3
        results = await scorer.ascore_many(pairs)
    assert [r.reward for r in results] == [1.0, 0.0] * 3


@pytest.mark.anyio
async def test_an_unavailable_sandbox_is_an_infra_error_not_a_wrong_answer() -> None:
    async with Runtime("local", max_size=1, min_idle=0, acquire_timeout=2.0) as runtime:
        scorer = Scorer(CODE, sample=True, runtime=runtime)
        seed = seed_of(scorer, "Sum of Two Integers")
        held = await runtime.acquire(timeout=60)  # the only sandbox is taken: scoring cannot get one
        try:
            [starved] = await scorer.ascore_many([(fenced(SUM_PY), seed)])
        finally:
            await runtime.release(held)
        [wrong] = await scorer.ascore_many([(fenced(WRONG_PY), seed)])
    assert starved.status == "infra_error" and starved.infra_error
    assert wrong.status == "wrong_answer" and not wrong.infra_error


def test_an_unknown_env_id_is_refused_with_close_matches() -> None:
    with pytest.raises(UnknownEnvError, match="code:CodeContest"):
        Scorer("code:CodeContes")


def test_an_unknown_wrapper_is_refused() -> None:
    with pytest.raises(KeyError, match="no_such_tool"):
        Scorer(CODE, sample=True, wrappers="no_such_tool")


def test_a_non_text_completion_is_refused(sync_runtime: SyncRuntime) -> None:
    with pytest.raises(TypeError, match="str"):
        Scorer(CODE, sample=True, runtime=sync_runtime).score_many([(["not", "text"], 0)])  # type: ignore[list-item]


def test_score_many_refuses_an_async_runtime() -> None:
    with pytest.raises(TypeError, match="SyncRuntime"):
        Scorer(CODE, sample=True, runtime=Runtime("local")).score_many([])



@pytest.mark.anyio
async def test_a_batch_on_a_code_env_scores_as_one_step_per_pair_would() -> None:
    async with Runtime("local", max_size=3) as runtime:
        scorer = Scorer(CODE, sample=True, runtime=runtime, reward="fraction")  # no early exit: every test runs
        seeds = [row["seed"] for row in scorer.rows(4)]
        pairs = [(fenced(SUM_PY), seeds[0]), ("no code here", seeds[1]), (fenced(WRONG_PY), seeds[2]), (fenced(SUM_PY), seeds[3])]
        before = runtime.statistics().leases
        batch = await scorer.ascore_many(pairs)
        assert runtime.statistics().leases - before == 3  # one sandbox per answer with code
        one_by_one = [await scorer.ascore(completion, seed) for completion, seed in pairs]
    assert batch == one_by_one
    assert [s.status for s in batch[1:3]] == ["format_error", "wrong_answer"]


@pytest.mark.anyio
async def test_a_wrapped_env_scores_pair_by_pair_with_the_wrappers_rewards() -> None:
    async with Runtime("local", max_size=2) as runtime:
        scorer = Scorer(CODE, sample=True, runtime=runtime, wrappers="python_tool")
        seed = seed_of(scorer, "Sum of Two Integers")
        [tool_call] = await scorer.ascore_many([("<python>print(1 + 2)</python>", seed)])
    # the tool's use and success (GEM's 0.05 + 0.25), not the bare env's format_error
    assert (tool_call.reward, tool_call.info["tool_status"], tool_call.info["use_tool"]) == (0.3, "ok", True)
