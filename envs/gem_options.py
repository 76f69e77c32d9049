"""The keyword arguments GEM's envs know, which every env here accepts.

GEM's env constructors end in ``**_`` and swallow any keyword, and GEM's trainers and tests
lean on it: one set of keywords goes to whichever env an id names (``use_mp=False`` and
``dataset=`` to a reasoning-gym env, ``verbose=True`` to a QA env). Here an env takes a name
some GEM env knows even when it has no use for it (it is then ignored, as GEM ignores it),
and refuses any other name with a TypeError, so that a misspelt setting (``max_turn``) is not
silently dropped.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Every constructor argument of gem-llm 0.1.0's envs and registrations, and of GEM's public
#: repository's newer ones (``init_algo`` and ``mc_rand_moves`` of its fifteen puzzle).
GEM_OPTIONS = frozenset(
    {
        "answer_key", "board_size", "clues", "code_length", "cols", "container_config", "dataset",
        "dataset_name", "dim_room", "duplicate_numbers", "extract_boxed", "hardcore", "image_key",
        "init_algo", "load_from_cache_file", "max_number", "max_tests", "max_turns", "max_workers",
        "mc_rand_moves", "mcp_service", "min_number", "name", "num_boxes", "num_disks", "num_mines",
        "num_numbers", "num_rows", "num_words", "only_real_words", "question_key", "room_size",
        "rows", "sandbox_type", "scale", "seed", "size", "split", "target_tile", "task_configs",
        "tasks", "test_key", "use_mp", "verbose", "word_length",
    }
)  # fmt: skip


def refuse_unknown(cls: type, names: Iterable[str], own: Iterable[str] = ()) -> None:
    """Raise a TypeError naming each of ``names`` that is neither one of ``cls``'s ``own``
    options nor one GEM's envs know, with the closest valid name as a hint."""
    valid = {*own, *GEM_OPTIONS}
    unknown = [_with_hint(name, own or valid) for name in names if name not in valid]
    if unknown:
        raise TypeError(
            f"{cls.__name__} got unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
            + (f"; its options are {', '.join(own)}" if own else "")
        )


def _with_hint(name: str, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)
