"""The files shipped in ``data/``, and how they are made: all of them generated, none downloaded.

- ``fictional-world.corpus.jsonl`` and ``fictional-world.questions.jsonl``: gem-sandbox's
  fictional world (:mod:`.fictional`), served by ``qa:FictionalWorld-v0``.
- ``<dataset>.<split>.jsonl``, the offline samples of GEM's ids (``sample=True``), in the
  fields GEM reads from each dataset. The real rows cannot be shipped, so the QA samples are
  questions about the fictional world (single-hop for the NQ-, TriviaQA- and PopQA-like sets,
  two-hop for the HotpotQA-, 2Wiki-, MuSiQue- and Bamboogle-like ones); with ``sample=True``
  those envs carry the world's corpus, so a search episode on a sample can find its answers.
  The RuleTaker samples are theories from :mod:`.rules`, labelled by forward chaining.

Regenerate them all with ``python -c "from gem_sandbox_envs.qa import samples; samples.write()"``;
``tests/test_qa_env.py`` checks the shipped files equal what this module makes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from gem_sandbox_envs.qa import fictional, rules
from gem_sandbox_envs.qa.sources import data_dir

WORLD_CORPUS = "fictional-world.corpus.jsonl"
WORLD_QUESTIONS = "fictional-world.questions.jsonl"
RULETAKER_DEPTHS = (0, 1, 2, 3, 5)
ROWS_PER_SAMPLE = 6

#: sample file -> (question field, hops of its questions, answers as lists)
WORLD_SAMPLES: dict[str, tuple[str, int, bool]] = {
    "NaturalQuestions.train.jsonl": ("problem", 1, True),
    "HotpotQA.train.jsonl": ("problem", 2, False),
    "nq_open.validation.jsonl": ("question", 1, True),
    "search-eval.nq.jsonl": ("question", 1, True),
    "search-eval.tq.jsonl": ("question", 1, True),
    "search-eval.popqa.jsonl": ("question", 1, True),
    "search-eval.hotpotqa.jsonl": ("question", 2, True),
    "search-eval.2wiki.jsonl": ("question", 2, True),
    "search-eval.musique.jsonl": ("question", 2, True),
    "search-eval.bamboogle.jsonl": ("question", 2, True),
}


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def world_sample(name: str, world: fictional.World) -> list[dict[str, Any]]:
    """The rows of one QA sample: world questions of its hop count, chosen by its name."""
    question_key, hops, as_lists = WORLD_SAMPLES[name]
    pool = [row for row in fictional.questions(world) if row["hops"] == hops]
    rows = []
    for row in random.Random(name).sample(pool, ROWS_PER_SAMPLE):
        answer = row["answer"]
        if as_lists and isinstance(answer, str):
            answer = [answer]
        elif not as_lists and isinstance(answer, list):
            answer = answer[0]
        rows.append({question_key: row["question"], "answer": answer})
    return rows


def shipped_files() -> dict[str, str]:
    """Every file of ``data/`` but the README: name -> content."""
    world = fictional.build()
    files = {WORLD_CORPUS: fictional.corpus_jsonl(world), WORLD_QUESTIONS: fictional.questions_jsonl(world)}
    for name in WORLD_SAMPLES:
        files[name] = _jsonl(world_sample(name, world))
    for depth in RULETAKER_DEPTHS:
        files[f"RuleTaker-d{depth}-70k.train.jsonl"] = _jsonl(rules.sample_rows(depth, ROWS_PER_SAMPLE))
    return files


def write(directory: Path | None = None) -> None:
    """Write every generated file into ``directory`` (the package's ``data/``)."""
    directory = directory or data_dir()
    for name, text in shipped_files().items():
        (directory / name).write_text(text, encoding="utf-8")
