"""GEM's exact-match QA scoring (``gem.utils.qa_em``), SQuAD's answer normalisation."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower case, punctuation and the articles a/an/the removed, whitespace collapsed."""
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_PUNCTUATION)).split())


def em_check(prediction: str, golden_answers: str | Iterable[str]) -> bool:
    """Whether ``prediction`` equals one of ``golden_answers`` after :func:`normalize_answer`."""
    if isinstance(golden_answers, str):
        golden_answers = [golden_answers]
    normalized = normalize_answer(prediction)
    return any(normalize_answer(gold) == normalized for gold in golden_answers)
