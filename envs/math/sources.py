"""Where a math env's problems come from: GEM's Hugging Face dataset, a local file or a shipped sample.

How a source is read is shared with the QA envs (:mod:`gem_sandbox_envs.rows`); here is what
is the math envs' own: the samples in ``data/``, and the answers a row accepts. Rows have GEM's
fields: a question (``question_key``) and its answer (``answer_key``): a string, a number, or a
list of accepted answers (``axon-rl/math-eval`` stores lists).
"""

from __future__ import annotations

from typing import Any

from gem_sandbox_envs.rows import Items as Problems
from gem_sandbox_envs.rows import Source, StrPath, sample_name


def _accepted(answer: Any) -> tuple[str, ...]:
    """The answers a row accepts, as text: one, or each of a list."""
    values = answer if isinstance(answer, list | tuple) else [answer]
    if not values or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
        raise ValueError(f"an answer is a string, a number or a list of them, got {answer!r}")
    return tuple(map(str, values))


SOURCE = Source(__package__, _accepted, extra="math", noun="problem", pyarrow="'gem-sandbox[math]'")

load = SOURCE.load
read_file = SOURCE.read_file
download = SOURCE.download
from_dataset = SOURCE.from_dataset  # rows given directly (GEM's dataset=)

__all__ = ["SOURCE", "Problems", "StrPath", "download", "from_dataset", "load", "read_file", "sample_name"]
