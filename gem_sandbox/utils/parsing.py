"""Extracting ``\\boxed{...}`` answers from model output.

GEM's envs read the agent's answer from a LaTeX ``\\boxed{}`` (or ``\\fbox{}``); the answer
may itself contain braces (``\\boxed{\\frac{1}{2}}``), so a regex is not enough: braces are
matched by counting.
"""

from __future__ import annotations

import re

_BOX_OPENING = re.compile(r"\\(?:boxed|fbox)\s*\{")


def boxed_answers(text: str) -> list[str]:
    """The contents of every outermost ``\\boxed{...}`` in ``text``, in order.

    A box whose braces never close is skipped; a box nested in another is part of the
    outer one's content, not an answer of its own.
    """
    answers: list[str] = []
    pos = 0
    while match := _BOX_OPENING.search(text, pos):
        end = _closing_brace(text, match.end())
        if end is None:
            pos = match.end()
            continue
        answers.append(text[match.end() : end])
        pos = end + 1
    return answers


def last_boxed_answer(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, or None when there is none."""
    answers = boxed_answers(text)
    return answers[-1] if answers else None


def _closing_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the one just before ``start``, or None if it never closes."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return None
