"""The shipped word lists (see ``data/README``), read once per process on first use."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

_COMMON = "common_words.txt"  # everyday words: the usual secrets
_ALL = "words.txt"  # the whole dictionary, a superset of the common words


@cache
def _read(name: str) -> tuple[str, ...]:
    text = files(__package__).joinpath("data", name).read_text(encoding="utf-8")
    return tuple(text.split())


@cache
def word_list(length: int, common: bool = True) -> tuple[str, ...]:
    """The lowercase words of ``length`` letters, sorted: everyday ones, or every known one."""
    name = _COMMON if common else _ALL
    words = tuple(word for word in _read(name) if len(word) == length)
    if not words:
        raise ValueError(f"the shipped word list {name} has no words of {length} letters")
    return words


@cache
def _dictionary() -> frozenset[str]:
    return frozenset(_read(_ALL))


def is_word(word: str) -> bool:
    """Whether ``word`` (any case) is in the shipped dictionary."""
    return word.lower() in _dictionary()
