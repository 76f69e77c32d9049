"""Scoring a short answer against a question's accepted answers: exact match and token F1.

Both compare answers after the normalisation of SQuAD's evaluation script, which Search-R1 and
GEM use too: lowercase, drop punctuation, drop the articles *a*, *an* and *the*, collapse
whitespace. So "The Eiffel Tower" matches "eiffel tower", while "Paris, France" does not match
"Paris" (EM 0) but shares a token with it (F1 2/3). Against several accepted answers each
measure takes its best.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """SQuAD's answer normalisation: lowercase, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the two answers are equal once normalised, else 0.0."""
    return float(normalize(prediction) == normalize(gold))


def f1(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalised answers (SQuAD's): the harmonic mean of the shares of
    predicted tokens that are gold and of gold tokens that were predicted."""
    predicted, expected = normalize(prediction).split(), normalize(gold).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class Score:
    """The best exact match and the best F1 over a question's accepted answers."""

    em: float
    f1: float

    @property
    def correct(self) -> bool:
        return self.em == 1.0


def score(prediction: str, accepted: Iterable[str]) -> Score:
    """``prediction`` against every accepted answer; each measure keeps its best."""
    answers = list(accepted)
    if not answers:
        raise ValueError("a question needs at least one accepted answer")
    return Score(max(exact_match(prediction, a) for a in answers), max(f1(prediction, a) for a in answers))


def accepted_answers(answer: Any) -> tuple[str, ...]:
    """A dataset row's answer as the tuple of strings it accepts.

    Rows store one answer (a string, a number, a bool as RuleTaker's True/False) or several: a
    list, a tuple, an array (numpy's, or anything with ``tolist()``, as pandas and parquet
    readers give), or a JSON-encoded list in a string (``'["1871", "in 1871"]'``)."""
    if hasattr(answer, "tolist") and not isinstance(answer, str | bytes):
        answer = answer.tolist()
    if isinstance(answer, str):
        decoded = _json_list(answer)
        values: list[Any] = decoded if decoded is not None else [answer]
    elif isinstance(answer, list | tuple):
        values = list(answer)
    else:
        values = [answer]
    if not values or not all(isinstance(v, str | int | float) for v in values):
        raise ValueError(f"an answer is a string, a number or a list of them, got {answer!r}")
    texts = tuple(str(v) for v in values)
    if not any(normalize(t) for t in texts):
        raise ValueError(f"an answer must have some text left once normalised, got {answer!r}")
    return texts


def _json_list(text: str) -> list[Any] | None:
    """The list a string encodes as JSON (``'["a", "b"]'``), or None when it is not one."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    try:
        decoded = json.loads(stripped)
    except ValueError:
        return None
    return decoded if isinstance(decoded, list) and decoded else None
