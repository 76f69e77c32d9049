"""GEM's dataset math envs: every id runs from its shipped sample, answers are checked by
math-verify (equivalent forms accepted, others rejected) from any thread under a hard time
limit, local files serve as data, and a failed download says how to run offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from gem_sandbox_envs.math import DATASETS, register_all
from gem_sandbox_envs.math.answer_check import default_checker, equivalent
from gem_sandbox_envs.math.math_env import TERMINAL_STATE, MathEnv
from gem_sandbox_envs.math.sources import sample_name

import gem_sandbox as gem
from gem_sandbox.registry import spec
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.wrappers import get_wrapper_fns
from tests.tool_fixtures import SPEC, anyio_backend, make_backend  # noqa: F401  (fixture)

DATA = Path(__file__).resolve().parents[1] / "envs" / "math" / "data"
IDS = sorted(DATASETS)
WRONG = "\\boxed{-12345}"


def sample_rows(env_id: str) -> list[dict[str, Any]]:
    text = (DATA / sample_name(*DATASETS[env_id])).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def accepted(row: dict[str, Any]) -> list[str]:
    return row["answer"] if isinstance(row["answer"], list) else [row["answer"]]


# -- registration ----------------------------------------------------------------------


def test_the_ids_and_settings_are_gems():
    """Same ids, dataset names, splits and keys as gem-llm registers; only the image-based
    Geometry3K is left out."""
    pytest.importorskip("gem.envs", reason="gem-llm is not installed")
    from gem.envs.registration import ENV_REGISTRY as GEMS

    gems = {i: s for i, s in GEMS.items() if s.entry_point.startswith("gem.envs.math")}
    assert set(gems) - set(DATASETS) == {"math:Geometry3K"}
    register_all()
    for env_id in DATASETS:
        assert spec(env_id).kwargs == gems[env_id].kwargs, env_id


def test_register_all_is_idempotent_and_the_listing_names_the_download():
    register_all()
    register_all()
    assert spec("eval:AIME24").source() == "download: axon-rl/math-eval (split aime24)"
    assert spec("math:GSM8K").source() == "download: axon-rl/GSM-8k"
    assert MathEnv.describe_source(dataset_name="axon-rl/GSM-8k", sample=True) == "shipped sample"
    assert MathEnv.describe_source(data_path="/data/x.jsonl") == "local file /data/x.jsonl"


# -- every id from its sample ----------------------------------------------------------


@pytest.mark.parametrize("env_id", IDS)
def test_every_id_serves_its_sample_and_scores_right_and_wrong_answers(env_id: str):
    rows = sample_rows(env_id)
    env = gem.make(env_id, sample=True, seed=0)
    assert isinstance(env, MathEnv) and env.source == "shipped sample" and len(env.problems) == len(rows)
    for idx, row in enumerate(rows):
        obs, info = env.reset(idx=idx)
        assert (obs, info) == (row["problem"], {})  # GEM's observation: the question as stored
        assert env.step(f"Thus the answer is \\boxed{{{accepted(row)[0]}}}.") == (
            TERMINAL_STATE,
            1.0,
            True,
            True,
            {"correct": True, "status": "ok"},
        )
    env.reset(seed=1)
    assert env.step(WRONG) == (TERMINAL_STATE, 0.0, True, True, {"correct": False, "status": "ok"})


@pytest.mark.parametrize("env_id", IDS)
def test_math_verify_reads_every_shipped_answer(env_id: str):
    """A reference math-verify cannot parse would match nothing, not even itself."""
    for row in sample_rows(env_id):
        for answer in accepted(row):
            assert equivalent(answer, [answer]), answer
            assert not equivalent("-12345", [answer]), answer


def test_the_terminal_observation_is_gems():
    constants = pytest.importorskip("gem.utils.constants", reason="gem-llm is not installed")
    assert TERMINAL_STATE == constants.TERMINAL_STATE


@pytest.mark.parametrize("action", ["the answer is 63", "\\boxed{}", "\\boxed{  }", "\\boxed{63"])
def test_no_boxed_answer_is_a_format_error(action: str):
    env = gem.make("math:GSM8K", sample=True)
    env.reset(idx=0)
    assert env.step(action) == (TERMINAL_STATE, 0.0, True, True, {"correct": False, "status": "format_error"})


# -- equivalence -----------------------------------------------------------------------

EQUIVALENT = [
    ("0.5", "\\frac{1}{2}"),
    ("1/2", "\\frac{1}{2}"),
    ("\\dfrac{1}{2}", "0.5"),
    ("\\frac{\\sqrt{2}}{2}", "\\sqrt{2}/2"),
    ("\\frac{1}{\\sqrt{2}}", "\\frac{\\sqrt2}{2}"),
    ("\\sqrt{18}", "3\\sqrt{2}"),
    ("0.75", "\\frac{3}{4}"),
    ("1+\\sqrt{3}", "\\sqrt{3} + 1"),
    ("(2, 3)", "(2,3)"),
    ("[2,5)\\cup(5,+\\infty)", "[2,5) \\cup (5,\\infty)"),
    ("(4,\\infty)\\cup(-\\infty,-4)", "(-\\infty, -4) \\cup (4, +\\infty)"),
    ("\\{3, 2, 1\\}", "\\{1,2,3\\}"),
    ("8, -2", "-2, 8"),
    ("(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("15,120", "15120"),
    ("\\$63.00", "63"),
    ("0.0000005", "5 \\times 10^{-7}"),
    ("14 \\pi", "14\\pi"),
    ("x = 4", "4"),
    ("C", "\\text{(C)}"),
]
DIFFERENT = [
    ("0.51", "\\frac{1}{2}"),
    ("0.333", "\\frac{1}{3}"),
    ("\\frac{1}{7}", "\\frac{1}{6}"),
    ("2\\sqrt{2}", "3\\sqrt{2}"),
    ("1.414", "\\sqrt{2}"),
    ("[2,3]", "(2,3)"),
    ("[2,\\infty)", "[2,5) \\cup (5,\\infty)"),
    ("\\{1,2\\}", "\\{1,2,3\\}"),
    ("8", "-2, 8"),
    ("(\\pi/2, 3)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("44", "14\\pi"),
    ("D", "\\text{(C)}"),
    ("seven", "7"),
]


@pytest.mark.parametrize(("given", "reference"), EQUIVALENT)
def test_equivalent_forms_are_accepted(given: str, reference: str):
    assert default_checker().check(given, [reference]) is True


@pytest.mark.parametrize(("given", "reference"), DIFFERENT)
def test_different_values_are_rejected(given: str, reference: str):
    assert default_checker().check(given, [reference]) is False


def test_an_answer_matching_any_accepted_one_is_correct():
    assert default_checker().check("\\frac{1}{2}", ["7", "0.5"]) is True
    assert default_checker().check("\\frac{1}{3}", ["7", "0.5"]) is False


# -- threads and time limits -----------------------------------------------------------


def step_in_thread(env: MathEnv, action: str) -> tuple[Any, ...]:
    results: list[tuple[Any, ...]] = []
    thread = threading.Thread(target=lambda: results.append(env.step(action)))
    thread.start()
    thread.join(timeout=60)
    assert results, "the step did not return"
    return results[0]


def test_an_env_steps_from_another_thread():
    """math-verify's own timeouts need the main thread (signal.alarm); this one's do not."""
    env = gem.make("math:GSM8K", sample=True)
    env.reset(idx=0)  # its answer is "63"
    assert step_in_thread(env, "\\boxed{\\$63.00}")[1:] == (1.0, True, True, {"correct": True, "status": "ok"})
    env.reset(idx=0)
    assert step_in_thread(env, "\\boxed{64}")[1:] == (0.0, True, True, {"correct": False, "status": "ok"})


def test_a_check_that_overruns_is_killed_and_scores_zero_from_a_thread():
    env = gem.make("math:GSM8K", sample=True, check_timeout=0.5)
    env.reset(idx=0)
    obs, reward, *_, info = step_in_thread(env, "\\boxed{9^{9^{9^{9}}}}")  # sympy would take ages
    assert (obs, reward, info) == (TERMINAL_STATE, 0.0, {"correct": False, "status": "timeout"})
    env.reset(idx=0)
    assert step_in_thread(env, "\\boxed{63.0}")[1] == 1.0  # a new worker took over


@pytest.mark.anyio
async def test_the_async_face_checks_in_a_worker_thread():
    env = gem.make("math:Math12K", sample=True)
    await env.areset(idx=1)  # its answer is \frac{3}{4}
    assert (await env.astep("\\boxed{0.75}"))[1:] == (1.0, True, True, {"correct": True, "status": "ok"})


# -- the episode and its data ----------------------------------------------------------


def test_the_walk_serves_each_problem_once_per_epoch_and_seeds_reproduce():
    env = gem.make("eval:AIME24", sample=True, seed=3)
    epoch = [env.reset()[0] for _ in range(len(env.problems))]
    assert sorted(epoch) == sorted(env.problems.questions)
    fresh = gem.make("eval:AIME24", sample=True, seed=99)
    assert [fresh.reset(seed=s)[0] for s in range(5)] == [env.reset(seed=s)[0] for s in range(5)]
    with pytest.raises(IndexError, match="has 5 problems"):
        env.reset(idx=5)


def test_copies_share_the_problems():
    env = gem.make("math:GSM8K", sample=True, seed=0)
    env.reset()
    clone = env.spawn(same_state=True)
    assert clone.problems is env.problems and clone.question == env.question


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_data_path_serves_a_jsonl_file(tmp_path: Path):
    rows = [
        {"problem": "What is 1/4 + 1/4?", "answer": "\\frac{1}{2}"},
        {"problem": "What is 6 times 7?", "answer": 42},
        {"problem": "Give a root of x^2 = 4.", "answer": ["2", "-2"]},
    ]
    path = write_jsonl(tmp_path / "mine.jsonl", rows)
    env = gem.make("math:Math12K", data_path=str(path))
    assert env.source == f"local file {path}"
    for idx, row in enumerate(rows):
        assert env.reset(idx=idx)[0] == row["problem"]
    env.reset(idx=0)
    assert env.step("\\boxed{0.5}")[1] == 1.0
    env.reset(idx=1)
    assert env.step("\\boxed{42.0}")[1] == 1.0
    env.reset(idx=2)
    assert env.step("\\boxed{-2}")[1] == 1.0


def test_data_path_serves_a_parquet_file_with_its_own_keys(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "mine.parquet"
    table = {"question": ["Simplify \\sqrt{8}.", "What is 3/6?"], "final": [["2\\sqrt{2}"], ["1/2"]]}
    pq.write_table(pa.table(table), path)
    env = MathEnv(data_path=path, question_key="question", answer_key="final")
    assert env.reset(idx=0)[0] == "Simplify \\sqrt{8}."
    assert env.step("\\boxed{\\sqrt{8}}")[1] == 1.0
    env.reset(idx=1)
    assert env.step("\\boxed{0.5}")[1] == 1.0
    with pytest.raises(ValueError, match="has no 'problem' or 'answer' column; its columns: \\['question', 'final'\\]"):
        MathEnv(data_path=path)


@pytest.mark.parametrize(
    ("content", "name", "error", "match"),
    [
        ('{"problem": "1+1?"}\n', "a.jsonl", ValueError, "line 1: no 'answer' field"),
        ('{"problem": "1+1?", "answer": "2"}\nnot json\n', "a.jsonl", ValueError, "line 2: not JSON"),
        ('{"problem": "1+1?", "answer": null}\n', "a.jsonl", ValueError, "an answer is a string, a number"),
        ("", "a.jsonl", ValueError, "has no problems"),
        ("problem,answer\n", "a.csv", ValueError, "must be a .jsonl or a .parquet file"),
    ],
)
def test_bad_data_files_say_what_is_wrong(tmp_path: Path, content: str, name: str, error: type, match: str):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(error, match=match):
        MathEnv(data_path=tmp_path / name)


def test_a_missing_file_or_two_sources_at_once_are_refused(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="no such data file"):
        MathEnv(data_path=tmp_path / "nowhere.jsonl")
    with pytest.raises(ValueError, match="not both"):
        gem.make("math:GSM8K", sample=True, data_path=write_jsonl(tmp_path / "a.jsonl", []))
    with pytest.raises(ValueError, match="no sample is shipped for other"):
        MathEnv(dataset_name="someone/other", sample=True)
    with pytest.raises(ValueError, match="no problems to serve"):
        MathEnv(sample=True)


OFFLINE_SCRIPT = """
import sys
from gem_sandbox_envs.math.math_env import MathEnv
env = MathEnv(dataset_name="axon-rl/GSM-8k", sample=True)
env.reset()
env.step("\\\\boxed{1}")
assert "datasets" not in sys.modules and "math_verify" not in sys.modules, "imported eagerly"
import gem_sandbox as gem
gem.make("math:GSM8K")
"""


@pytest.mark.slow
def test_an_offline_download_fails_with_one_clear_error(tmp_path: Path):
    """Offline, with nothing cached: no traceback from inside ``datasets``, one error saying
    how to run without the download. (A fresh process: HF reads these variables on import.)"""
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("gem_sandbox_envs.hub.DatasetUnavailable: cannot load GEM's dataset axon-rl/GSM-8k")
    assert "pass data_path= a local .jsonl or .parquet file" in last and "sample=True" in last
    assert "site-packages/datasets" not in run.stderr


# -- a tool-using episode ----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_python_tool_episode_computes_then_answers():
    backend = make_backend("local")
    async with Runtime(backend, PoolConfig(min_idle=1, max_size=2, run_timeout=10, spec=SPEC)) as runtime:
        env = gem.make("math:GSM8K", sample=True)
        for wrap in get_wrapper_fns("python_tool", runtime=runtime):
            env = wrap(env)
        obs, _ = await env.areset(idx=0)  # eggs: 36 a day, cartons of 12 at $3, a week
        assert obs.startswith(sample_rows("math:GSM8K")[0]["problem"]) and "<python>" in obs  # + the tool's
        tool_obs, tool_reward, terminated, _, info = await env.astep("<python>print(36 // 12 * 3 * 7)</python>")
        assert tool_obs.startswith("Code execution result: 63") and info["use_tool"] and not terminated
        final_obs, reward, terminated, truncated, info = await env.astep("So he makes \\boxed{\\$63}.")
        assert (final_obs, reward, terminated, truncated) == (TERMINAL_STATE, 1.0, True, True)
        assert info["correct"] and info["status"] == "ok" and tool_reward == pytest.approx(0.30)
        await env.aclose()
    await backend.aclose()
