"""Extracting ``\\boxed{...}`` answers from model output.

GEM's envs read the agent's answer from a LaTeX ``\\boxed{}`` (or ``\\fbox{}``); the answer
may itself contain braces (``\\boxed{\\frac{1}{2}}``), so a regex is not enough: braces are
matched by counting.

GEM's own helpers (``extract_last_boxed_answer`` and the rest of ``gem.utils.parsing``) are
here too, under GEM's names and with GEM's exact behaviour, for code that imports them.
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


# -- GEM's names (``gem.utils.parsing``), with GEM's behaviour ---------------------------------
# ``last_boxed_answer`` above reads answers the way this project's envs score them; the
# functions below are GEM's, kept exact for code that imports them by name. They differ from
# it: ``\fbox{3}`` is found only when there is no ``\boxed`` at all and then answers None
# (GEM strips only a ``\boxed{`` prefix), and ``\boxed {3}`` (a space) answers None.
_TAGGED_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_CODE_BLOCK = re.compile(r"```(?:\w+)?\n(.*?)```", re.DOTALL)


def last_boxed_only_string(string: str) -> str | None:
    """GEM's: the last ``\\boxed`` (or, when there is none, the last ``\\fbox``) through the
    brace that balances the braces after it, command included; None when there is none or it
    never balances."""
    start = string.rfind("\\boxed")
    if start < 0:
        start = string.rfind("\\fbox")
        if start < 0:
            return None
    depth = 0
    for i in range(start, len(string)):
        if string[i] == "{":
            depth += 1
        elif string[i] == "}":
            depth -= 1
            if depth == 0:
                return string[start : i + 1]
    return None


def remove_boxed(s: str | None) -> str | None:
    """GEM's: the content of ``s`` when it is exactly ``\\boxed{...}``, else None."""
    prefix = "\\boxed{"
    if isinstance(s, str) and s.startswith(prefix) and s.endswith("}"):
        return s[len(prefix) : -1]
    return None


def extract_last_boxed_answer(solution: str) -> str | None:
    """GEM's answer extraction: :func:`remove_boxed` of :func:`last_boxed_only_string`."""
    return remove_boxed(last_boxed_only_string(solution))


def extract_code_from_model(model_response: str) -> str | None:
    """GEM's: the last fenced code block of ``model_response`` (a language tag allowed),
    stripped; None when there is none."""
    blocks = _CODE_BLOCK.findall(model_response)
    return blocks[-1].strip() if blocks else None


def extract_last_tagged_answer(model_response: str) -> str | None:
    """GEM's: the last ``<answer>...</answer>``'s content, stripped; None when there is none."""
    answers = _TAGGED_ANSWER.findall(model_response)
    return answers[-1].strip() if answers else None
