"""GEM's question-answering envs: a dataset's questions, one per single-turn episode, scored by exact match.

As in GEM, the observation is the question after an instruction to think in ``<think>`` and
answer in ``<answer>...</answer>`` (``\\boxed{...}`` with ``extract_boxed=True``, as the
``logic:RuleTaker-d*`` ids set); the last such answer in the action is scored against the
question's accepted answers after SQuAD's normalisation (:mod:`.scoring`). Reward 1.0 on an
exact match, else 0.0, and GEM's terminal observation either way.

``info`` says how it went: ``status`` ``"ok"`` (an answer was scored; ``correct``, ``em`` and
``f1``, the best token F1 over the accepted answers, say how well) or ``"format_error"`` (no
non-empty answer tag or box; scored 0, as GEM scores it).

Where this differs from GEM's QaEnv: the instruction is worded anew and names the form the env
actually reads (GEM asks for ``<answer>`` tags even where it reads ``\\boxed{}``); an empty
answer is a format error rather than a comparison with the empty string; ``info`` carries the
status and the scores beside GEM's ``correct``; questions are drawn by ``self.rng`` (GEM's
``reset(seed=...)`` draws from the global ``random``).

An env whose questions are about a corpus it carries (``qa:FictionalWorld-v0``; the shipped QA
samples, which ask about that world; or ``corpus=`` a Search-R1 ``.jsonl``) exposes it as
``search_index``, the path of its built embedded index, which the ``search_tool`` wrappers
search instead of a server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gem_sandbox_envs.qa import samples, scoring
from gem_sandbox_envs.qa.corpus import corpus_index
from gem_sandbox_envs.qa.sources import SOURCE, StrPath, data_dir, sample_name
from gem_sandbox_envs.gem_options import refuse_unknown
from gem_sandbox_envs.rows import QuestionEnv

from gem_sandbox.core import ResetReturn, StepReturn
from gem_sandbox.utils.parsing import last_boxed_answer

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"  # GEM's observation after a single-turn episode

_TAGGED = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_PROMPT = (
    "Think the question through step by step inside <think> and </think>, then give only "
    "your final answer, {form}.\n\nQuestion: {question}\n"
)
_FORMS = {False: "inside <answer> and </answer>", True: "inside \\boxed{}"}


def last_tagged_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>`` in ``text``, or None."""
    found = _TAGGED.findall(text)
    return found[-1].strip() if found else None


class QaEnv(QuestionEnv):
    """Serves a dataset's questions: each once per epoch in an order shuffled by ``self.rng``;
    ``reset(seed=s)`` draws one by seed, ``reset(idx=i)`` serves the source's ``i``-th.

    ``dataset_name``, ``split``, ``question_key``, ``answer_key`` and ``extract_boxed`` are
    GEM's (the registered ids set them); ``data_path`` or ``sample`` choose another source (see
    :mod:`.sources`), or ``dataset`` gives the rows themselves (as GEM's ``dataset=``: a
    ``datasets.Dataset``/``DatasetDict``, or a list of dicts). ``corpus`` names a Search-R1
    corpus the questions are about (see :attr:`search_index`). The arguments up to
    ``load_from_cache_file`` are GEM's, in GEM's order. ``load_from_cache_file`` and the other
    names GEM's envs take (``verbose``, ``max_turns``...) are accepted and ignored: a QA
    episode is one turn, and this env logs nothing per step nor caches datasets itself.
    """

    blocking = False  # scoring is a string comparison

    def __init__(
        self,
        dataset_name: str = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "question",
        answer_key: str = "answer",
        seed: int | None = None,
        extract_boxed: bool = False,
        load_from_cache_file: bool = True,
        *,
        data_path: StrPath | None = None,
        sample: bool = False,
        corpus: StrPath | None = None,
        **gem_options: Any,
    ) -> None:
        refuse_unknown(type(self), gem_options)
        source = self.describe_source(
            dataset_name=dataset_name, split=split, data_path=data_path, sample=sample, dataset=dataset
        )
        super().__init__(seed, source, "question")
        self.extract_boxed = extract_boxed
        self.questions = SOURCE.load(dataset_name, split, data_path, sample, question_key, answer_key, dataset)
        if corpus is None and sample and sample_name(dataset_name, split) in samples.WORLD_SAMPLES:
            corpus = data_dir() / samples.WORLD_CORPUS  # the samples ask about the fictional world
        self.corpus = Path(corpus) if corpus is not None else None
        if self.corpus is not None and not self.corpus.is_file():
            raise FileNotFoundError(f"no corpus file at {self.corpus}")

    @property
    def search_index(self) -> Path | None:
        """The embedded index of the corpus these questions are about (built on first use,
        shared by every env of the process), or None when they come without one. The
        ``search_tool`` wrappers read it from the unwrapped env."""
        return corpus_index(self.corpus) if self.corpus is not None else None

    def prompt(self, question: str) -> str:
        return _PROMPT.format(form=_FORMS[self.extract_boxed], question=question)

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> ResetReturn:
        return self.prompt(self.ask(seed, idx, self.questions)), {}

    def extract(self, action: str) -> str | None:
        """The answer the action gives: its last ``\\boxed{}`` or ``<answer>`` as configured."""
        return last_boxed_answer(action) if self.extract_boxed else last_tagged_answer(action)

    def step(self, action: str) -> StepReturn:
        answer = self.extract(action)
        if answer is None or not answer.strip():
            info = {"status": "format_error", "correct": False, "em": 0.0, "f1": 0.0}
            return TERMINAL_STATE, 0.0, True, True, info
        result = scoring.score(answer, self.answers)
        info = {"status": "ok", "correct": result.correct, "em": result.em, "f1": result.f1}
        return TERMINAL_STATE, result.em, True, True, info

    def sample_random_action(self) -> str:
        if self.extract_boxed:
            return f"\\boxed{{{self.rng.choice(['True', 'False'])}}}"
        return f"<answer>{self.rng.choice(['yes', 'no', 'Paris', '1871', 'the river'])}</answer>"


class FictionalWorldEnv(QaEnv):
    """gem-sandbox's own QA env (not GEM's): questions on its fictional world, whose answers
    only its corpus holds (:mod:`.fictional`). ``hops`` 1 or 2 keeps the single- or two-hop
    questions; None serves both. With the ``search_tool`` wrapper each episode searches the
    world's corpus through the embedded index: no server, no ``SEARCH_URL``."""

    def __init__(self, hops: int | None = None, seed: int | None = None) -> None:
        if hops not in (None, 1, 2):
            raise ValueError(f"hops is 1, 2 or None (both), got {hops!r}")
        text = (data_dir() / samples.WORLD_QUESTIONS).read_text(encoding="utf-8")
        rows = [row for row in map(json.loads, text.splitlines()) if hops is None or row["hops"] == hops]
        super().__init__(dataset=rows, corpus=data_dir() / samples.WORLD_CORPUS, seed=seed)
        self.hops = hops

    @classmethod
    def describe_source(cls, **_: Any) -> str:  # type: ignore[override]
        return "shipped: gem-sandbox's fictional world"

