"""Math answers score as in gem-llm: the same answer to the same problem gets the same reward
from GEM's MathEnv (its own grader) and ours (math-verify), but for one documented difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pylatexenc", reason="gem-llm's math grader needs pylatexenc (the test extra has it)")
pytest.importorskip("math_verify", reason="the math envs need math-verify: pip install 'gem-sandbox[math]'")
datasets = pytest.importorskip("datasets")
gem_math = pytest.importorskip("gem.envs.math_env", reason="gem-llm is not installed")

from gem_sandbox_envs.math.math_env import MathEnv  # noqa: E402

#: (accepted answer, the model's action): equivalent forms, wrong answers and malformed ones.
SAME = [
    ("\\frac{3}{4}", "\\boxed{\\frac{3}{4}}"),
    ("\\frac{3}{4}", "\\boxed{0.75}"),
    ("\\frac{3}{4}", "\\boxed{3/4}"),
    ("4", "\\boxed{4}"),
    ("4", "The answer is \\boxed{4}."),
    ("4", "\\boxed{5}"),
    ("4", "no box"),
    ("4", "\\boxed{}"),
    ("4", "\\boxed{4} then \\boxed{5}"),
    ("-2", "\\boxed{-2}"),
    ("10\\%", "\\boxed{10\\%}"),
    ("\\sqrt{2}", "\\boxed{\\sqrt 2}"),
    ("(1, 2)", "\\boxed{(1,2)}"),
    ("x^2+1", "\\boxed{1+x^2}"),
    ("\\pi", "\\boxed{\\pi}"),
    ("12", "\\boxed{12.0}"),
    ("1000", "\\boxed{1,000}"),
    ("\\text{yes}", "\\boxed{yes}"),
]


def both(answer: str, action: str, tmp_path: Path) -> tuple[tuple, tuple]:
    row = {"problem": "q", "answer": answer}
    theirs = gem_math.MathEnv(dataset=datasets.Dataset.from_list([row]), question_key="problem", answer_key="answer")
    theirs.reset()
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row) + "\n")
    ours = MathEnv(data_path=path)
    ours.reset()
    return theirs.step(action), ours.step(action)


@pytest.mark.parametrize("answer, action", SAME)
def test_an_answer_scores_as_in_gem(answer: str, action: str, tmp_path: Path):
    theirs, ours = both(answer, action, tmp_path)
    assert ours[:4] == theirs[:4]  # observation, reward, terminated, truncated
    assert ours[4]["correct"] == bool(theirs[4]["correct"])


def test_an_fbox_answer_is_read_here_and_not_in_gem(tmp_path: Path):
    """GEM finds ``\\fbox{4}`` but strips only a ``\\boxed{`` prefix, so it never matches."""
    theirs, ours = both("4", "\\fbox{4}", tmp_path)
    assert (theirs[1], ours[1]) == (0, 1.0)
