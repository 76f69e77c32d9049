"""Is a model's answer the expected number? Exact rational equivalence, not string equality.

``"1,234"``, ``"$1234$"``, ``"1234.0"`` and ``"\\frac{2468}{2}"`` all name 1234; a float like
``0.333`` does not equal 1/3. Answers that are not numbers are compared as normalized text.
"""

from __future__ import annotations

import re
from fractions import Fraction

_FRAC = re.compile(r"^(-?)\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}$")
_TEXT = re.compile(r"\\text\{([^{}]*)\}")
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def normalize(answer: str) -> str:
    """Strip what does not change the value: dollars, spaces, ``\\text{}``, ``\\left``/``\\right``,
    a trailing period, thousands separators."""
    text = _TEXT.sub(r"\1", answer.strip())
    for noise in ("$", "\\!", "\\,", "\\left", "\\right", " "):
        text = text.replace(noise, "")
    text = text.rstrip(".")
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    return text


def as_number(answer: str) -> Fraction | None:
    """The exact value of a normalized answer (integer, decimal, ``a/b``, ``\\frac{a}{b}``)."""
    frac = _FRAC.match(answer)
    if frac:
        answer = "{}{}/{}".format(*frac.groups())
    try:
        return Fraction(answer)
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(given: str | None, expected: str) -> bool:
    """Whether ``given`` names the same value as ``expected``."""
    if given is None:
        return False
    given, expected = normalize(given), normalize(expected)
    given_value, expected_value = as_number(given), as_number(expected)
    if given_value is not None and expected_value is not None:
        return given_value == expected_value
    return given == expected
